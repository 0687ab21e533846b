//! The safetensors container the Hugging Face checkpoints use: an 8-byte little-endian header
//! length, a JSON header (`name -> {dtype, shape, data_offsets}` plus optional
//! `__metadata__`), then the raw little-endian tensor bytes.
//!
//! [`SafeTensors`] reads a file through a memory map and checks every entry's offsets and sizes
//! up front; [`SafeTensorsWriter`] writes one (names sorted, header padded to 8 bytes, as the
//! reference `safetensors` package does).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use audio_engine::ggml::dtype::{bf16_to_f32, f16_to_f32};

/// Why a safetensors file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SafeTensorsError {
    /// Opening, mapping or writing the file failed.
    #[error("{}: {source}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The header or an entry is malformed.
    #[error("{}: malformed safetensors file: {reason}", file.display())]
    Malformed {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A tensor the caller asked for is absent.
    #[error("{}: missing tensor '{name}'", file.display())]
    MissingTensor {
        /// The file.
        file: PathBuf,
        /// The tensor name.
        name: String,
    },
    /// A tensor's dtype cannot be converted as asked.
    #[error("{}: tensor '{name}' has dtype {dtype}, which cannot be read as f32", file.display())]
    UnsupportedDtype {
        /// The file.
        file: PathBuf,
        /// The tensor name.
        name: String,
        /// Its dtype string.
        dtype: String,
    },
}

/// Result of safetensors reading and writing.
pub type Result<T> = std::result::Result<T, SafeTensorsError>;

/// Element types of the safetensors format that checkpoints use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// IEEE single.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// Signed 64-bit integers (e.g. BatchNorm's `num_batches_tracked`).
    I64,
    /// Signed 32-bit integers.
    I32,
    /// Booleans, one byte each.
    Bool,
}

impl Dtype {
    fn parse(s: &str) -> Option<Dtype> {
        Some(match s {
            "F32" => Dtype::F32,
            "F16" => Dtype::F16,
            "BF16" => Dtype::BF16,
            "I64" => Dtype::I64,
            "I32" => Dtype::I32,
            "BOOL" => Dtype::Bool,
            _ => return None,
        })
    }

    /// The header spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I64 => "I64",
            Dtype::I32 => "I32",
            Dtype::Bool => "BOOL",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 | Dtype::BF16 => 2,
            Dtype::I64 => 8,
            Dtype::Bool => 1,
        }
    }
}

/// One tensor of a file: dtype, shape (PyTorch order, outermost first) and bytes.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    /// Element type.
    pub dtype: Dtype,
    /// Shape, outermost first (as PyTorch prints it).
    pub shape: &'a [usize],
    /// The raw little-endian bytes.
    pub data: &'a [u8],
}

impl TensorView<'_> {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

#[derive(Debug)]
struct Entry {
    dtype: Dtype,
    shape: Vec<usize>,
    start: usize,
    end: usize,
}

/// A memory-mapped safetensors file.
#[derive(Debug)]
pub struct SafeTensors {
    file: PathBuf,
    map: audio_engine::ggml::MappedFile,
    data_start: usize,
    entries: BTreeMap<String, Entry>,
    metadata: BTreeMap<String, String>,
}

impl SafeTensors {
    /// Opens and validates `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<SafeTensors> {
        let file = path.as_ref().to_path_buf();
        let io_err = |source| SafeTensorsError::Io {
            file: file.clone(),
            source,
        };
        let f = File::open(&file).map_err(io_err)?;
        // why: like every reader of model files we assume nobody truncates the file while it is
        // open (see `MappedFile`).
        let map = audio_engine::ggml::MappedFile::map(&f).map_err(io_err)?;
        let bad = |reason: String| SafeTensorsError::Malformed {
            file: file.clone(),
            reason,
        };
        if map.len() < 8 {
            return Err(bad(format!(
                "{} bytes, shorter than the header length",
                map.len()
            )));
        }
        let n = u64::from_le_bytes(map[..8].try_into().expect("8 bytes")) as usize;
        let data_start = 8usize
            .checked_add(n)
            .filter(|&e| e <= map.len())
            .ok_or_else(|| bad(format!("header length {n} exceeds the file")))?;
        let header: serde_json::Value = serde_json::from_slice(&map[8..data_start])
            .map_err(|e| bad(format!("header is not JSON: {e}")))?;
        let obj = header
            .as_object()
            .ok_or_else(|| bad("header is not a JSON object".into()))?;
        let data_len = map.len() - data_start;
        let mut entries = BTreeMap::new();
        let mut metadata = BTreeMap::new();
        for (name, v) in obj {
            if name == "__metadata__" {
                for (k, v) in v.as_object().into_iter().flatten() {
                    let v = v
                        .as_str()
                        .ok_or_else(|| bad(format!("metadata '{k}' is not a string")))?;
                    metadata.insert(k.clone(), v.to_owned());
                }
                continue;
            }
            let e = parse_entry(v).map_err(|r| bad(format!("tensor '{name}': {r}")))?;
            if e.end > data_len {
                return Err(bad(format!(
                    "tensor '{name}' ends at {} past the data section ({data_len} bytes)",
                    e.end
                )));
            }
            entries.insert(name.clone(), e);
        }
        Ok(SafeTensors {
            file,
            map,
            data_start,
            entries,
            metadata,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// Tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.keys().map(String::as_str)
    }

    /// The `__metadata__` string map.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// Whether the file has a tensor named `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// The tensor `name`.
    pub fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let e = self
            .entries
            .get(name)
            .ok_or_else(|| SafeTensorsError::MissingTensor {
                file: self.file.clone(),
                name: name.to_owned(),
            })?;
        Ok(TensorView {
            dtype: e.dtype,
            shape: &e.shape,
            data: &self.map[self.data_start + e.start..self.data_start + e.end],
        })
    }

    /// The tensor `name` converted to f32 (from F32, F16 or BF16).
    pub fn f32(&self, name: &str) -> Result<Vec<f32>> {
        let t = self.tensor(name)?;
        let chunks2 = || {
            t.data
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
        };
        Ok(match t.dtype {
            Dtype::F32 => t
                .data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
            Dtype::F16 => chunks2().map(f16_to_f32).collect(),
            Dtype::BF16 => chunks2().map(bf16_to_f32).collect(),
            other => {
                return Err(SafeTensorsError::UnsupportedDtype {
                    file: self.file.clone(),
                    name: name.to_owned(),
                    dtype: other.as_str().to_owned(),
                })
            }
        })
    }
}

fn parse_entry(v: &serde_json::Value) -> std::result::Result<Entry, String> {
    let dtype_s = v
        .get("dtype")
        .and_then(|d| d.as_str())
        .ok_or("no dtype string")?;
    let dtype = Dtype::parse(dtype_s).ok_or_else(|| format!("unsupported dtype {dtype_s}"))?;
    let shape = v
        .get("shape")
        .and_then(|s| s.as_array())
        .ok_or("no shape array")?
        .iter()
        .map(|d| {
            d.as_u64()
                .map(|d| d as usize)
                .ok_or("shape entry is not an integer")
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let offs = v
        .get("data_offsets")
        .and_then(|s| s.as_array())
        .filter(|a| a.len() == 2)
        .ok_or("no data_offsets pair")?;
    let off = |i: usize| {
        offs[i]
            .as_u64()
            .map(|d| d as usize)
            .ok_or("data_offsets entry is not an integer")
    };
    let (start, end) = (off(0)?, off(1)?);
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or("shape overflows")?;
    let want = numel.checked_mul(dtype.size()).ok_or("size overflows")?;
    if end < start || end - start != want {
        return Err(format!(
            "data_offsets [{start}, {end}] do not hold {want} bytes for shape {shape:?}"
        ));
    }
    Ok(Entry {
        dtype,
        shape,
        start,
        end,
    })
}

/// Builds a safetensors file in memory and writes it (for the synthetic checkpoints and the
/// tests).
#[derive(Debug, Default)]
pub struct SafeTensorsWriter {
    tensors: BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)>,
    metadata: BTreeMap<String, String>,
}

impl SafeTensorsWriter {
    /// An empty file.
    pub fn new() -> SafeTensorsWriter {
        SafeTensorsWriter::default()
    }

    /// Adds a `__metadata__` entry.
    pub fn metadata(&mut self, key: &str, value: &str) {
        self.metadata.insert(key.to_owned(), value.to_owned());
    }

    /// Adds an F32 tensor of `shape` (outermost first). Panics if `data` does not fit `shape`:
    /// the writer is fed by our own generators, where a mismatch is a programming error.
    pub fn add_f32(&mut self, name: &str, shape: &[usize], data: &[f32]) {
        assert_eq!(shape.iter().product::<usize>(), data.len(), "tensor {name}");
        let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensors
            .insert(name.to_owned(), (Dtype::F32, shape.to_vec(), bytes));
    }

    /// Adds an I64 tensor (e.g. `num_batches_tracked`).
    pub fn add_i64(&mut self, name: &str, shape: &[usize], data: &[i64]) {
        assert_eq!(shape.iter().product::<usize>(), data.len(), "tensor {name}");
        let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensors
            .insert(name.to_owned(), (Dtype::I64, shape.to_vec(), bytes));
    }

    /// Writes the file to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let file = path.as_ref().to_path_buf();
        let mut header = serde_json::Map::new();
        if !self.metadata.is_empty() {
            header.insert("__metadata__".into(), serde_json::json!(self.metadata));
        }
        let mut off = 0usize;
        for (name, (dtype, shape, bytes)) in &self.tensors {
            header.insert(
                name.clone(),
                serde_json::json!({
                    "dtype": dtype.as_str(),
                    "shape": shape,
                    "data_offsets": [off, off + bytes.len()],
                }),
            );
            off += bytes.len();
        }
        let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).expect("JSON");
        while h.len() % 8 != 0 {
            h.push(b' ');
        }
        let io_err = |source| SafeTensorsError::Io {
            file: file.clone(),
            source,
        };
        let mut out = io::BufWriter::new(File::create(&file).map_err(io_err)?);
        out.write_all(&(h.len() as u64).to_le_bytes())
            .map_err(io_err)?;
        out.write_all(&h).map_err(io_err)?;
        for (_, _, bytes) in self.tensors.values() {
            out.write_all(bytes).map_err(io_err)?;
        }
        out.flush().map_err(io_err)
    }
}
