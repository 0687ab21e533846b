//! The error every model-file loader returns: it names the file and the key or tensor at fault.

use std::path::PathBuf;

use crate::ggml::gguf::GgufError;
use crate::ggml::{GgmlError, GgmlType};

/// The `general.architecture` a backbone (and detokenizer) file must declare.
pub const LFM2_ARCH: &str = "lfm2";

/// Why a model file could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file does not exist.
    #[error("{}: file not found", file.display())]
    MissingFile {
        /// The path asked for.
        file: PathBuf,
    },
    /// `general.architecture` is not `lfm2`.
    #[error("{}: general.architecture is '{found}', expected '{expected}'", file.display())]
    WrongArchitecture {
        /// The file.
        file: PathBuf,
        /// The architecture it declares.
        found: String,
        /// The architecture this file must declare.
        expected: String,
    },
    /// A required metadata key is absent.
    #[error("{}: missing metadata key '{key}'", file.display())]
    MissingKey {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
    },
    /// A metadata key holds a value of the wrong type or an inconsistent value.
    #[error("{}: metadata key '{key}': {reason}", file.display())]
    BadValue {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A required tensor is absent.
    #[error("{}: missing tensor '{tensor}'", file.display())]
    MissingTensor {
        /// The file.
        file: PathBuf,
        /// The tensor name.
        tensor: String,
    },
    /// A tensor's shape (ggml order) differs from the one the config implies.
    #[error("{}: tensor '{tensor}' has shape {found:?}, expected {expected:?} (ggml order)", file.display())]
    BadShape {
        /// The file.
        file: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The expected shape, ggml order.
        expected: Vec<u64>,
        /// The stored shape, ggml order.
        found: Vec<u64>,
    },
    /// A tensor is stored in a type the engine does not accept for it.
    #[error("{}: tensor '{tensor}' has unsupported type {}", file.display(), found.name())]
    BadType {
        /// The file.
        file: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The stored type.
        found: GgmlType,
    },
    /// The backend could not hold or initialise the file's tensors.
    #[error("{}: loading tensors: {source}", file.display())]
    Backend {
        /// The file.
        file: PathBuf,
        /// What ggml reported.
        source: GgmlError,
    },
    /// A model directory holds no `<model>-<q>.gguf` backbone (or none of the asked quantization).
    #[error("{}: no model package{} (expected <model>-<F32|F16|Q8_0|Q4_0>.gguf with its mmproj-, vocoder- and tokenizer- files){}", dir.display(), wanted.as_ref().map(|q| format!(" at {q}")).unwrap_or_default(), if found.is_empty() { String::new() } else { format!("; found: {}", found.join(", ")) })]
    NoPackage {
        /// The directory.
        dir: PathBuf,
        /// The quantization asked for, if any.
        wanted: Option<String>,
        /// The packages present (`<model>-<q>`), if any.
        found: Vec<String>,
    },
    /// A model directory holds several packages and the caller did not choose one.
    #[error("{}: several model packages, choose one: {}", dir.display(), found.join(", "))]
    AmbiguousPackage {
        /// The directory.
        dir: PathBuf,
        /// The packages present (`<model>-<q>`).
        found: Vec<String>,
    },
    /// The GGUF container itself is malformed or unreadable.
    #[error(transparent)]
    Gguf(#[from] GgufError),
}

/// Result of model loading.
pub type Result<T> = std::result::Result<T, LoadError>;
