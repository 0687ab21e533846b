//! A parsed GGUF file with its bytes (memory-mapped or owned).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{GgufError, GgufErrorKind, Result};
use super::metadata::GgufMetadata;
use super::reader;
use super::tensor_info::TensorInfo;
use super::value::{FromGgufValue, GgufArray, GgufValue};
use crate::dtype;
use crate::mapped_file::MappedFile;

enum Storage {
    /// Shared with weight stores that use tensors in place (see [`GgufFile::mapping`]).
    Mapped(Arc<MappedFile>),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// A validated GGUF file: metadata, tensor infos and access to tensor data.
///
/// Construction checks the whole structure (see the [module docs](super)), so
/// every [`TensorInfo`] it hands out describes bytes that lie inside the file.
pub struct GgufFile {
    storage: Storage,
    path: Option<PathBuf>,
    version: u32,
    metadata: GgufMetadata,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("n_kv", &self.metadata.len())
            .field("n_tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .finish_non_exhaustive()
    }
}

impl GgufFile {
    /// Memory-maps and parses the file at `path`. Errors carry the path.
    ///
    /// The mapping is read-only and shared: tensor data is paged in on demand and
    /// never copied. As with any mapping, the file must not be truncated or
    /// modified by another process while this value (or a weight store using
    /// the mapping) lives; see [`MappedFile`]'s truncation policy.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        Self::open_inner(path).map_err(|e| e.with_path(path))
    }

    fn open_inner(path: &Path) -> Result<GgufFile> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let storage = if len == 0 {
            // Mapping an empty file fails on some platforms; it is invalid anyway.
            Storage::Owned(Vec::new())
        } else {
            Storage::Mapped(Arc::new(MappedFile::map(&file)?.with_path(path)))
        };
        let mut gguf = Self::from_storage(storage)?;
        gguf.path = Some(path.to_owned());
        Ok(gguf)
    }

    /// Parses a GGUF file held in memory.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Result<GgufFile> {
        Self::from_storage(Storage::Owned(bytes.into()))
    }

    fn from_storage(storage: Storage) -> Result<GgufFile> {
        let p = reader::parse(storage.bytes())?;
        Ok(GgufFile {
            storage,
            path: None,
            version: p.version,
            metadata: p.metadata,
            tensors: p.tensors,
            tensor_index: p.tensor_index,
            alignment: p.alignment,
            data_offset: p.data_offset,
        })
    }

    /// The path the file was opened from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute offset of the data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// The file's memory mapping (`None` for [`from_bytes`](Self::from_bytes)): tensor data
    /// slices ([`tensor_data`](Self::tensor_data)) lie inside it, and a
    /// [`WeightStore`](crate::WeightStore) given it uses them in place.
    pub fn mapping(&self) -> Option<&Arc<MappedFile>> {
        match &self.storage {
            Storage::Mapped(m) => Some(m),
            Storage::Owned(_) => None,
        }
    }

    /// Fails with [`FileChanged`](GgufErrorKind::FileChanged) if the mapped file has become
    /// shorter than it was when opened (touching the lost pages would raise `SIGBUS`; see
    /// [`MappedFile`]). In-memory files always pass.
    pub fn check_unchanged(&self) -> Result<()> {
        match &self.storage {
            Storage::Mapped(m) => m.check_unchanged().map_err(|e| {
                self.err(GgufErrorKind::FileChanged {
                    mapped: m.len() as u64,
                    cause: e,
                })
            }),
            Storage::Owned(_) => Ok(()),
        }
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// All metadata, in file order.
    pub fn metadata(&self) -> &GgufMetadata {
        &self.metadata
    }

    /// All tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensor called `name`, or a [`MissingTensor`](GgufErrorKind::MissingTensor) error.
    pub fn require_tensor(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor(name).ok_or_else(|| {
            self.err(GgufErrorKind::MissingTensor {
                name: name.to_owned(),
            })
        })
    }

    /// The raw bytes of a tensor of this file.
    ///
    /// The slice starts at a multiple of [`alignment`](Self::alignment) from the
    /// file start, so it is aligned in memory for mapped files; owned buffers
    /// give no alignment guarantee. An info from another file whose range does
    /// not fit this file yields an empty slice.
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        let start = info.file_offset() as usize;
        self.as_bytes()
            .get(start..start.saturating_add(info.n_bytes()))
            .unwrap_or_default()
    }

    /// A tensor's elements converted to `f32` (F32, F16, BF16, Q8_0, Q4_0, Q6_K).
    pub fn tensor_to_f32(&self, info: &TensorInfo) -> Result<Vec<f32>> {
        let to_err = |cause| {
            self.err(GgufErrorKind::TensorDtype {
                tensor: info.name().to_owned(),
                cause,
            })
        };
        let n = usize::try_from(info.n_elements()).map_err(|_| {
            to_err(dtype::DtypeError::SizeOverflow {
                ty: info.ggml_type(),
            })
        })?;
        let mut out = vec![0.0f32; n];
        dtype::dequantize(info.ggml_type(), self.tensor_data(info), &mut out).map_err(to_err)?;
        Ok(out)
    }

    fn err(&self, kind: GgufErrorKind) -> GgufError {
        let e = GgufError::from(kind);
        match &self.path {
            Some(p) => e.with_path(p),
            None => e,
        }
    }

    fn attach<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| match &self.path {
            Some(p) => e.with_path(p),
            None => e,
        })
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.get(key)
    }

    /// See [`GgufMetadata::get_as`].
    pub fn get_as<'a, T: FromGgufValue<'a>>(&'a self, key: &str) -> Result<T> {
        self.attach(self.metadata.get_as(key))
    }

    /// See [`GgufMetadata::get_opt`].
    pub fn get_opt<'a, T: FromGgufValue<'a>>(&'a self, key: &str) -> Result<Option<T>> {
        self.attach(self.metadata.get_opt(key))
    }

    typed_getters!();

    /// See [`GgufMetadata::get_integer`].
    pub fn get_integer<T: TryFrom<i128>>(&self, key: &str) -> Result<T> {
        self.attach(self.metadata.get_integer(key))
    }

    /// See [`GgufMetadata::get_integer_opt`].
    pub fn get_integer_opt<T: TryFrom<i128>>(&self, key: &str) -> Result<Option<T>> {
        self.attach(self.metadata.get_integer_opt(key))
    }

    /// See [`GgufMetadata::get_integer_array`].
    pub fn get_integer_array<T: TryFrom<i128>>(&self, key: &str) -> Result<Vec<T>> {
        self.attach(self.metadata.get_integer_array(key))
    }
}
