//! A GGUF file's tensors loaded for a backend (on the CPU: matrices repacked for its SIMD
//! kernels where ggml has one, everything else used in place in the file's mapping; see
//! [`WeightStore::load`]), and the name-tree walker components bind their typed layers with.
//!
//! Every model component (encoder, backbone, depthformer, detokenizer) binds its layers once at
//! load from a [`WeightFile`] through a [`VarBuilder`]: `vb.pp("blk").pp(3).get("weight", shape,
//! role)` resolves `blk.3.weight`, checks its shape and type, and returns a [`Param`] the layer
//! keeps; errors name the file and the tensor, so a misnamed or misshapen tensor fails at load,
//! never inside a graph. The file's metadata stays available through [`WeightFile::gguf`].

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::ggml::gguf::{GgufFile, TensorInfo};
use crate::ggml::weights::{LoadOptions, TensorSpec};
use crate::ggml::{quant, Backend, GgmlType, Param, WeightStore};

use super::load_error::{LoadError, Result};
use super::tensor_names::{AUDIO_CODE_TABLE, TOKEN_EMBD};

/// The tensors of one GGUF file, loaded for a backend ([`WeightFile::load_filtered`]).
pub struct WeightFile {
    file: PathBuf,
    gguf: GgufFile,
    store: WeightStore,
}

impl std::fmt::Debug for WeightFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightFile")
            .field("file", &self.file)
            .field("tensors", &self.store.len())
            .field("bytes", &self.store.size_bytes())
            .finish()
    }
}

/// The name a file is reported under: its path, or a placeholder for in-memory files.
pub fn display_path(gguf: &GgufFile) -> PathBuf {
    gguf.path()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("<in-memory gguf>"))
}

fn specs<'g>(
    infos: &[&'g TensorInfo],
    ne: &'g [[i64; 4]],
    gguf: Option<&'g GgufFile>,
) -> Vec<TensorSpec<'g>> {
    infos
        .iter()
        .zip(ne)
        .map(|(info, ne)| TensorSpec {
            name: info.name(),
            ty: info.ggml_type(),
            ne: &ne[..info.n_dims().max(1)],
            data: gguf.map(|g| g.tensor_data(info)),
        })
        .collect()
}

/// The tensors of `gguf` as a store without data: names, types and shapes, for binding a
/// component's layers to check a file before loading it.
pub fn describe(gguf: &GgufFile) -> Result<WeightStore> {
    let infos: Vec<&TensorInfo> = gguf.tensors().iter().collect();
    let ne: Vec<[i64; 4]> = infos.iter().map(|i| TensorInfo::ne(i)).collect();
    WeightStore::describe(&specs(&infos, &ne, None)).map_err(|source| LoadError::Backend {
        file: display_path(gguf),
        source,
    })
}

/// Whether the tensor `name` is a row table of some component: read by `get_rows` (the token
/// embedding, also the tied text head; the depthformer's code embeddings, also its logits heads;
/// the audio-code table), so it must stay plain rather than repacked. Every other matrix of
/// these files is only ever a matrix product's weight (`Backend::compute` refuses any other use
/// of a repacked one, so a name missing here is a typed error, never a wrong result).
pub fn is_row_table(name: &str) -> bool {
    name == TOKEN_EMBD
        || name == AUDIO_CODE_TABLE
        || name.ends_with(".embedding.weight")
        || name.contains("embd")
}

impl WeightFile {
    /// Loads every tensor of `gguf` onto `backend`: matrices repacked for the CPU's kernels
    /// where the backend repacks ([`Backend::with_weight_repack`]) and ggml has a kernel for them,
    /// except row tables ([`is_row_table`]); the rest used in place in the file's mapping on a
    /// CPU backend, else copied.
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
        // why: a file truncated since it was opened would crash the load with SIGBUS.
        gguf.check_unchanged()?;
        let infos: Vec<&TensorInfo> = gguf.tensors().iter().filter(|t| keep(t.name())).collect();
        let ne: Vec<[i64; 4]> = infos.iter().map(|i| TensorInfo::ne(i)).collect();
        let options = LoadOptions {
            mapping: gguf.mapping(),
            may_repack: &|name| !is_row_table(name),
        };
        let store = WeightStore::load(backend, &specs(&infos, &ne, Some(&gguf)), options).map_err(
            |source| LoadError::Backend {
                file: file.clone(),
                source,
            },
        )?;
        Ok(WeightFile { file, gguf, store })
    }

    /// Opens `path` and loads every tensor onto `backend`; a missing file is
    /// [`LoadError::MissingFile`].
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
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
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn size_bytes(&self) -> usize {
        self.store.size_bytes()
    }

    /// Whether a tensor named `name` was loaded.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn contains(&self, name: &str) -> bool {
        self.store.contains(name)
    }

    /// The loaded tensors.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn store(&self) -> &WeightStore {
        &self.store
    }

    /// The root of the file's name tree, for binding layers.
    pub fn vb(&self) -> VarBuilder<'_> {
        VarBuilder::new(&self.file, &self.store)
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

/// What a tensor is used as, which decides the types a graph accepts for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// First operand of a matrix product or a row lookup: any type with a CPU dot-product
    /// kernel (F32, F16, BF16, the Q and K quants).
    Matrix,
    /// A convolution kernel (`conv_2d` family): F32 or F16.
    Kernel,
    /// Added or multiplied elementwise (norm weights, biases), or a depthwise kernel of
    /// `ssm_conv`: F32 only (every published quantization keeps these F32).
    Vector,
}

impl Role {
    /// Whether a tensor in this role may be stored as `ty`.
    pub fn allows(self, ty: GgmlType) -> bool {
        match self {
            Role::Matrix => quant::cpu_vec_dot_type(ty).is_some(),
            Role::Kernel => matches!(ty, GgmlType::F32 | GgmlType::F16),
            Role::Vector => ty == GgmlType::F32,
        }
    }
}

/// A prefix in a file's tensor names (candle's `VarBuilder`): [`pp`](Self::pp) descends,
/// [`get`](Self::get) binds one tensor after checking its shape and type.
#[derive(Clone)]
pub struct VarBuilder<'a> {
    file: &'a Path,
    store: &'a WeightStore,
    prefix: String,
    /// Every full name bound through this tree (shared by all prefixes of one root).
    bound: Rc<RefCell<BTreeSet<String>>>,
}

impl std::fmt::Debug for VarBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VarBuilder")
            .field("file", &self.file)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl<'a> VarBuilder<'a> {
    /// The root of `store`'s names; errors report `file`.
    pub fn new(file: &'a Path, store: &'a WeightStore) -> VarBuilder<'a> {
        VarBuilder {
            file,
            store,
            prefix: String::new(),
            bound: Rc::default(),
        }
    }

    /// The sub-tree `prefix.part` (`part` alone at the root).
    pub fn pp(&self, part: impl Display) -> VarBuilder<'a> {
        VarBuilder {
            prefix: self.name(&part.to_string()),
            ..self.clone()
        }
    }

    /// The full name of `leaf` under this prefix.
    pub fn name(&self, leaf: &str) -> String {
        if self.prefix.is_empty() {
            leaf.to_owned()
        } else {
            format!("{}.{leaf}", self.prefix)
        }
    }

    /// The file errors name.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn path(&self) -> &'a Path {
        self.file
    }

    /// Whether the file has `leaf` under this prefix.
    pub fn contains(&self, leaf: &str) -> bool {
        self.store.contains(&self.name(leaf))
    }

    /// The tensor `leaf`, checked to have `shape` (ggml order, trailing 1s optional) and a type
    /// `role` allows: [`LoadError::MissingTensor`], [`LoadError::BadShape`] or
    /// [`LoadError::BadType`] otherwise.
    pub fn get(&self, leaf: &str, shape: &[usize], role: Role) -> Result<Param> {
        let name = self.name(leaf);
        let p = self.lookup(&name)?;
        let mut want = [1i64; 4];
        for (w, &d) in want.iter_mut().zip(shape) {
            *w = d as i64;
        }
        if shape.len() > 4 || p.ne() != want {
            return Err(LoadError::BadShape {
                file: self.file.to_path_buf(),
                tensor: name,
                expected: shape.iter().map(|&d| d as u64).collect(),
                found: p.ne()[..p.n_dims()].iter().map(|&d| d as u64).collect(),
            });
        }
        self.check_role(name, p, role)
    }

    /// The tensor `leaf` of any shape (for tensors whose shape sets a dimension), of a type
    /// `role` allows.
    pub fn get_any_shape(&self, leaf: &str, role: Role) -> Result<Param> {
        let name = self.name(leaf);
        let p = self.lookup(&name)?;
        self.check_role(name, p, role)
    }

    /// The shape of `leaf` (ggml order, padded with 1s), for dimensions a file sets; it is not
    /// bound (and not checked) by this.
    pub fn ne(&self, leaf: &str) -> Result<[i64; 4]> {
        let name = self.name(leaf);
        self.store
            .get(&name)
            .map(|p| p.ne())
            .ok_or_else(|| LoadError::MissingTensor {
                file: self.file.to_path_buf(),
                tensor: name,
            })
    }

    fn lookup(&self, name: &str) -> Result<Param> {
        let p = self
            .store
            .get(name)
            .ok_or_else(|| LoadError::MissingTensor {
                file: self.file.to_path_buf(),
                tensor: name.to_owned(),
            })?;
        self.bound.borrow_mut().insert(name.to_owned());
        Ok(p)
    }

    fn check_role(&self, name: String, p: Param, role: Role) -> Result<Param> {
        if !role.allows(p.ty()) {
            return Err(LoadError::BadType {
                file: self.file.to_path_buf(),
                tensor: name,
                found: p.ty(),
            });
        }
        Ok(p)
    }

    /// The file's tensors no `get` of this tree has bound yet, sorted.
    pub fn unbound(&self) -> Vec<String> {
        let bound = self.bound.borrow();
        let mut out: Vec<String> = self
            .store
            .names()
            .filter(|n| !bound.contains(*n))
            .map(str::to_owned)
            .collect();
        out.sort();
        out
    }
}
