//! A GGUF file's tensors loaded into one backend buffer, looked up by llama.cpp name.
//!
//! Every model component (encoder, backbone, depthformer, detokenizer) builds its graphs from a
//! [`WeightFile`]: the file's metadata stays available through [`WeightFile::gguf`], and the
//! tensors are resolved by name through a [`Weights`] view, whose errors name the file and the
//! tensor, so a misnamed or misshapen tensor fails at load, never inside a graph.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::ggml::gguf::{GgufFile, TensorInfo};
use crate::ggml::{Backend, BackendBuffer, Context, Tensor};

use super::load_error::{LoadError, Result};

/// The tensors of one GGUF file, resident in a backend buffer.
pub struct WeightFile {
    file: PathBuf,
    gguf: GgufFile,
    // why: declared before `ctx` is not needed for soundness (the context retains the buffer);
    // the field keeps the buffer's size queryable.
    buffer: BackendBuffer,
    ctx: Context,
    index: HashMap<String, usize>,
}

impl std::fmt::Debug for WeightFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightFile")
            .field("file", &self.file)
            .field("tensors", &self.index.len())
            .field("bytes", &self.buffer.size())
            .finish()
    }
}

/// The name a file is reported under: its path, or a placeholder for in-memory files.
pub fn display_path(gguf: &GgufFile) -> PathBuf {
    gguf.path()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("<in-memory gguf>"))
}

impl WeightFile {
    /// Loads every tensor of `gguf` onto `backend`.
    pub fn load(gguf: GgufFile, backend: &Backend) -> Result<WeightFile> {
        WeightFile::load_filtered(gguf, backend, |_| true)
    }

    /// Loads the tensors of `gguf` whose names `keep` accepts onto `backend`.
    pub fn load_filtered(
        gguf: GgufFile,
        backend: &Backend,
        keep: impl Fn(&str) -> bool,
    ) -> Result<WeightFile> {
        let file = display_path(&gguf);
        let backend_err = |source| LoadError::Backend {
            file: file.clone(),
            source,
        };
        let infos: Vec<_> = gguf.tensors().iter().filter(|t| keep(t.name())).collect();
        let ctx = Context::metadata_with_graph(infos.len().max(1), 0).map_err(backend_err)?;
        let mut index = HashMap::with_capacity(infos.len());
        for (i, info) in infos.iter().enumerate() {
            let ne = TensorInfo::ne(info);
            let t = ctx
                .new_tensor(info.ggml_type(), &ne[..info.n_dims().max(1)])
                .map_err(backend_err)?;
            t.set_name(info.name()).map_err(backend_err)?;
            index.insert(info.name().to_owned(), i);
        }
        let buffer = ctx.alloc_tensors(backend).map_err(backend_err)?;
        for (t, info) in ctx.tensors().into_iter().zip(&infos) {
            t.set_bytes(0, gguf.tensor_data(info))
                .map_err(backend_err)?;
        }
        Ok(WeightFile {
            file,
            gguf,
            buffer,
            ctx,
            index,
        })
    }

    /// Opens `path` and loads every tensor onto `backend`; a missing file is
    /// [`LoadError::MissingFile`].
    pub fn open(path: impl AsRef<Path>, backend: &Backend) -> Result<WeightFile> {
        WeightFile::load(open_gguf(path)?, backend)
    }

    /// The file's path (as reported in errors).
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// The file's metadata and tensor directory.
    pub fn gguf(&self) -> &GgufFile {
        &self.gguf
    }

    /// Bytes of backend memory the tensors take.
    pub fn size_bytes(&self) -> usize {
        self.buffer.size()
    }

    /// Whether a tensor named `name` was loaded.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// A lookup view for building graphs (resolves the tensor handles once).
    pub fn view(&self) -> Weights<'_> {
        Weights {
            file: self,
            tensors: self.ctx.tensors(),
        }
    }
}

/// Opens a GGUF file, reporting a missing file (or a directory) as [`LoadError::MissingFile`].
pub fn open_gguf(path: impl AsRef<Path>) -> Result<GgufFile> {
    let path = path.as_ref();
    // why: a clear "not found" naming the file beats an I/O error buried in the GGUF error.
    if !path.is_file() {
        return Err(LoadError::MissingFile {
            file: path.to_path_buf(),
        });
    }
    Ok(GgufFile::open(path)?)
}

/// Tensor handles of a [`WeightFile`], by name.
pub struct Weights<'a> {
    file: &'a WeightFile,
    tensors: Vec<Tensor<'a>>,
}

impl<'a> Weights<'a> {
    /// The tensor `name`, or [`LoadError::MissingTensor`].
    pub fn get(&self, name: &str) -> Result<Tensor<'a>> {
        self.opt(name).ok_or_else(|| LoadError::MissingTensor {
            file: self.file.file.clone(),
            tensor: name.to_owned(),
        })
    }

    /// The tensor `name` if the file has it.
    pub fn opt(&self, name: &str) -> Option<Tensor<'a>> {
        self.file.index.get(name).map(|&i| self.tensors[i])
    }

    /// The tensor `name`, checked to have `shape` (ggml order, trailing 1s optional).
    pub fn shaped(&self, name: &str, shape: &[i64]) -> Result<Tensor<'a>> {
        let t = self.get(name)?;
        let mut want = [1i64; 4];
        want[..shape.len()].copy_from_slice(shape);
        if t.ne() != want {
            return Err(LoadError::BadShape {
                file: self.file.file.clone(),
                tensor: name.to_owned(),
                expected: shape.iter().map(|&d| d as u64).collect(),
                found: t.ne()[..t.n_dims().max(1)]
                    .iter()
                    .map(|&d| d as u64)
                    .collect(),
            });
        }
        Ok(t)
    }

    /// The file these handles belong to.
    pub fn file(&self) -> &'a WeightFile {
        self.file
    }
}
