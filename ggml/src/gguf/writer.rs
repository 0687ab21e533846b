//! Writing GGUF v3 files.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::error::{GgufErrorKind, Result};
use super::format::{GGUF_MAGIC, GGUF_VERSION, KEY_ALIGNMENT};
use super::metadata::GgufMetadata;
use super::value::{GgufArray, GgufValue};
use crate::dtype::GgmlType;

/// ggml's `GGML_MAX_NAME` includes the terminating NUL.
pub const MAX_TENSOR_NAME_LEN: usize = 63;

/// A callback that writes a tensor's bytes when the file is written.
pub type TensorWriteFn<'a> = Box<dyn FnOnce(&mut dyn Write) -> io::Result<()> + 'a>;

/// The bytes of a tensor to be written.
pub enum TensorData<'a> {
    /// Borrowed bytes, e.g. from a memory-mapped source file; never copied.
    Borrowed(&'a [u8]),
    /// Owned bytes.
    Owned(Vec<u8>),
    /// Bytes produced at write time (e.g. quantized on the fly), so the whole
    /// output never needs to be in memory. The callback must write exactly the
    /// tensor's size; the writer checks.
    Deferred(TensorWriteFn<'a>),
}

impl<'a> TensorData<'a> {
    /// Data produced at write time by `f`.
    pub fn deferred(f: impl FnOnce(&mut dyn Write) -> io::Result<()> + 'a) -> Self {
        TensorData::Deferred(Box::new(f))
    }

    fn known_len(&self) -> Option<usize> {
        match self {
            TensorData::Borrowed(b) => Some(b.len()),
            TensorData::Owned(v) => Some(v.len()),
            TensorData::Deferred(_) => None,
        }
    }
}

impl<'a> From<&'a [u8]> for TensorData<'a> {
    fn from(b: &'a [u8]) -> Self {
        TensorData::Borrowed(b)
    }
}

impl<'a> From<&'a Vec<u8>> for TensorData<'a> {
    fn from(b: &'a Vec<u8>) -> Self {
        TensorData::Borrowed(b)
    }
}

impl From<Vec<u8>> for TensorData<'_> {
    fn from(v: Vec<u8>) -> Self {
        TensorData::Owned(v)
    }
}

impl std::fmt::Debug for TensorData<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TensorData::Borrowed(b) => write!(f, "Borrowed({} bytes)", b.len()),
            TensorData::Owned(v) => write!(f, "Owned({} bytes)", v.len()),
            TensorData::Deferred(_) => f.write_str("Deferred"),
        }
    }
}

#[derive(Debug)]
struct PendingTensor<'a> {
    name: String,
    ggml_type: GgmlType,
    shape: Vec<u64>,
    n_bytes: usize,
    data: TensorData<'a>,
}

/// Builds a GGUF v3 file: metadata in insertion order, then tensors in
/// insertion order, each padded to the alignment (as ggml and gguf-py lay them out).
///
/// ```no_run
/// # use lfm2_ggml::{dtype::GgmlType, gguf::GgufWriter};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let weights = vec![0u8; 4 * 8];
/// let mut w = GgufWriter::new();
/// w.add_kv("general.architecture", "lfm2")?;
/// w.add_tensor("w", GgmlType::F32, &[4, 2], &weights)?;
/// w.write_to_path("model.gguf")?;
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct GgufWriter<'a> {
    metadata: GgufMetadata,
    tensors: Vec<PendingTensor<'a>>,
    names: HashSet<String>,
}

fn tensor_err(tensor: &str, cause: io::Error) -> GgufErrorKind {
    GgufErrorKind::TensorIo {
        tensor: tensor.to_owned(),
        cause,
    }
}

impl<'a> GgufWriter<'a> {
    /// An empty writer (alignment 32).
    pub fn new() -> Self {
        Self::default()
    }

    /// The metadata collected so far.
    pub fn metadata(&self) -> &GgufMetadata {
        &self.metadata
    }

    /// Number of tensors added so far.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// Sets `general.alignment`; `alignment` must be a power of two.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<()> {
        self.metadata.set(KEY_ALIGNMENT, alignment).map(drop)
    }

    /// Appends a metadata entry; fails on an empty or duplicate key, or a bad
    /// `general.alignment`.
    pub fn add_kv(&mut self, key: impl Into<String>, value: impl Into<GgufValue>) -> Result<()> {
        self.metadata.insert(key, value)
    }

    /// Sets a metadata entry, replacing an existing value in place.
    pub fn set_kv(&mut self, key: impl Into<String>, value: impl Into<GgufValue>) -> Result<()> {
        self.metadata.set(key, value).map(drop)
    }

    /// Copies all entries of `metadata` (e.g. from a source file), replacing
    /// existing values.
    pub fn extend_metadata(&mut self, metadata: &GgufMetadata) -> Result<()> {
        for (k, v) in metadata.iter() {
            self.metadata.set(k, v.clone())?;
        }
        Ok(())
    }

    /// Adds a tensor with ggml shape `shape` (`shape[0]` fastest, 1 to 4 dims).
    ///
    /// Checks the name (unique, 1 to 63 bytes so ggml can hold it), the shape
    /// (rows whole blocks of `ggml_type`) and, unless deferred, the data length.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        ggml_type: GgmlType,
        shape: &[u64],
        data: impl Into<TensorData<'a>>,
    ) -> Result<()> {
        let name = name.into();
        let data = data.into();
        let reason = if name.is_empty() {
            Some("empty")
        } else if name.len() > MAX_TENSOR_NAME_LEN {
            Some("longer than 63 bytes (ggml's GGML_MAX_NAME)")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(GgufErrorKind::InvalidTensorName { name, reason }.into());
        }
        if self.names.contains(&name) {
            return Err(GgufErrorKind::DuplicateTensor { name, offset: None }.into());
        }
        if shape.is_empty() || shape.len() > 4 {
            return Err(GgufErrorKind::BadDimCount {
                tensor: name,
                n_dims: shape.len() as u64,
                offset: None,
            }
            .into());
        }
        let n_bytes = shape
            .iter()
            .try_fold(1i64, |acc, &n| acc.checked_mul(i64::try_from(n).ok()?))
            .ok_or(crate::dtype::DtypeError::SizeOverflow { ty: ggml_type })
            .and_then(|_| ggml_type.tensor_size(shape))
            .map_err(|cause| GgufErrorKind::TensorDtype {
                tensor: name.clone(),
                cause,
            })?;
        if let Some(found) = data.known_len() {
            if found != n_bytes {
                return Err(GgufErrorKind::TensorDataSize {
                    tensor: name,
                    expected: n_bytes as u64,
                    found: found as u64,
                }
                .into());
            }
        }
        self.names.insert(name.clone());
        self.tensors.push(PendingTensor {
            name,
            ggml_type,
            shape: shape.to_vec(),
            n_bytes,
            data,
        });
        Ok(())
    }

    /// Serializes header, metadata and tensor infos, padded to the alignment.
    fn header(&self, alignment: u64) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(GGUF_MAGIC);
        h.extend_from_slice(&GGUF_VERSION.to_le_bytes());
        h.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        h.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in self.metadata.iter() {
            put_str(&mut h, key);
            h.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
            put_value(&mut h, value);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut h, &t.name);
            h.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
            for &n in &t.shape {
                h.extend_from_slice(&n.to_le_bytes());
            }
            h.extend_from_slice(&(t.ggml_type as u32).to_le_bytes());
            h.extend_from_slice(&offset.to_le_bytes());
            offset += (t.n_bytes as u64).next_multiple_of(alignment);
        }
        h.resize((h.len() as u64).next_multiple_of(alignment) as usize, 0);
        h
    }

    /// Writes the file to `out` and returns the number of bytes written.
    ///
    /// Tensor data is streamed in insertion order; nothing is buffered beyond
    /// the header and a write buffer.
    pub fn write<W: Write>(self, out: W) -> Result<u64> {
        let alignment = self.metadata.alignment()?;
        let header = self.header(alignment);
        let mut out = BufWriter::with_capacity(1 << 20, out);
        out.write_all(&header)?;
        let mut written = header.len() as u64;
        let zeros = vec![0u8; alignment as usize];
        for t in self.tensors {
            let found = match t.data {
                TensorData::Borrowed(b) => {
                    out.write_all(b).map_err(|e| tensor_err(&t.name, e))?;
                    b.len() as u64
                }
                TensorData::Owned(v) => {
                    out.write_all(&v).map_err(|e| tensor_err(&t.name, e))?;
                    v.len() as u64
                }
                TensorData::Deferred(f) => {
                    let mut counting = CountingWriter {
                        inner: &mut out,
                        count: 0,
                    };
                    f(&mut counting).map_err(|e| tensor_err(&t.name, e))?;
                    counting.count
                }
            };
            if found != t.n_bytes as u64 {
                return Err(GgufErrorKind::TensorDataSize {
                    tensor: t.name,
                    expected: t.n_bytes as u64,
                    found,
                }
                .into());
            }
            let pad = (found.next_multiple_of(alignment) - found) as usize;
            out.write_all(&zeros[..pad])
                .map_err(|e| tensor_err(&t.name, e))?;
            written += found + pad as u64;
        }
        out.flush()?;
        Ok(written)
    }

    /// Writes the file to `path` atomically: the data goes to a temporary file
    /// in the same directory, which is synced and then renamed over `path`, so
    /// a failure never leaves a partial file at `path`. Errors carry the path.
    pub fn write_to_path(self, path: impl AsRef<Path>) -> Result<u64> {
        let path = path.as_ref();
        self.write_to_path_inner(path)
            .map_err(|e| e.with_path(path))
    }

    fn write_to_path_inner(self, path: &Path) -> Result<u64> {
        let (tmp, mut file) = create_temp_beside(path)?;
        // Removes the temporary file on every early return, and on a panic in a
        // deferred tensor callback.
        let mut guard = TempGuard {
            path: &tmp,
            armed: true,
        };
        let n = self.write(&mut file)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        guard.armed = false;
        Ok(n)
    }
}

/// Creates a new, uniquely named temporary file in `path`'s directory.
fn create_temp_beside(path: &Path) -> io::Result<(PathBuf, File)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "gguf".to_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut attempt = 0u32;
    loop {
        let tmp = dir.join(format!(
            ".{stem}.{}.{nanos:x}{attempt}.tmp",
            std::process::id()
        ));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Removes the temporary file unless the rename succeeded.
struct TempGuard<'p> {
    path: &'p Path,
    armed: bool,
}

impl Drop for TempGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = fs::remove_file(self.path);
        }
    }
}

struct CountingWriter<'w, W: Write> {
    inner: &'w mut W,
    count: u64,
}

impl<W: Write> Write for CountingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn put_str(h: &mut Vec<u8>, s: &str) {
    h.extend_from_slice(&(s.len() as u64).to_le_bytes());
    h.extend_from_slice(s.as_bytes());
}

fn put_value(h: &mut Vec<u8>, value: &GgufValue) {
    match value {
        GgufValue::U8(v) => h.push(*v),
        GgufValue::I8(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::U16(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::I16(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::U32(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::I32(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::U64(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::I64(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::F32(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::F64(v) => h.extend_from_slice(&v.to_le_bytes()),
        GgufValue::Bool(v) => h.push(u8::from(*v)),
        GgufValue::String(s) => put_str(h, s),
        GgufValue::Array(a) => put_array(h, a),
    }
}

fn put_array(h: &mut Vec<u8>, a: &GgufArray) {
    h.extend_from_slice(&(a.element_type() as u32).to_le_bytes());
    h.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                h.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        GgufArray::U8(v) => h.extend_from_slice(v),
        GgufArray::I8(v) => each!(v),
        GgufArray::U16(v) => each!(v),
        GgufArray::I16(v) => each!(v),
        GgufArray::U32(v) => each!(v),
        GgufArray::I32(v) => each!(v),
        GgufArray::U64(v) => each!(v),
        GgufArray::I64(v) => each!(v),
        GgufArray::F32(v) => each!(v),
        GgufArray::F64(v) => each!(v),
        GgufArray::Bool(v) => h.extend(v.iter().map(|&b| u8::from(b))),
        GgufArray::String(v) => v.iter().for_each(|s| put_str(h, s)),
        GgufArray::Array(v) => v.iter().for_each(|inner| put_array(h, inner)),
    }
}
