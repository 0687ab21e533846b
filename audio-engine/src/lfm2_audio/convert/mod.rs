//! Hugging Face checkpoint (the layout liquid-audio loads) to the four published GGUF files.
//!
//! Work in progress: the shared types below are what every per-file converter uses.

use std::path::{Path, PathBuf};

use super::safetensors::{SafeTensors, SafeTensorsError};
use crate::ggml::gguf::GgufError;

pub mod mmproj;

/// The tensor type a package is quantized to (norms, biases, convolutions stay F32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutType {
    /// Everything F32.
    F32,
    /// Matrices F16.
    F16,
    /// Matrices Q8_0.
    Q8_0,
    /// Matrices Q4_0 (the tied token embedding Q6_K).
    Q4_0,
}

/// Why a conversion failed.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A checkpoint file is missing.
    #[error("{}: file not found", file.display())]
    MissingFile {
        /// The path.
        file: PathBuf,
    },
    /// `config.json` is unreadable or lacks a field.
    #[error("{}: {reason}", file.display())]
    BadConfig {
        /// The config file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A tensor is missing or misshapen in the checkpoint.
    #[error("{}: tensor '{tensor}': {reason}", file.display())]
    BadTensor {
        /// The safetensors file.
        file: PathBuf,
        /// The tensor.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// Reading a safetensors file failed.
    #[error(transparent)]
    SafeTensors(#[from] SafeTensorsError),
    /// Writing a GGUF file failed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
}

/// Result of conversion.
pub type Result<T> = std::result::Result<T, ConvertError>;

/// Reports conversion progress, one call per tensor written.
pub trait Progress {
    /// `done` of `total` tensors of `file` are converted; `tensor` is the latest.
    fn tensor(&mut self, file: &Path, tensor: &str, done: usize, total: usize);
}

/// A Hugging Face LFM2-Audio checkpoint directory: `config.json`, `model.safetensors`,
/// `audio_detokenizer/` (and the tokenizer files).
#[derive(Debug)]
pub struct HfCheckpoint {
    /// The directory.
    pub dir: PathBuf,
    /// `config.json`, parsed.
    pub config: serde_json::Value,
    /// `model.safetensors`.
    pub model: SafeTensors,
}
