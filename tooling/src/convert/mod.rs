//! Hugging Face checkpoint (the layout liquid-audio loads) to the four published GGUF files.
//!
//! LiquidAI makes its packages with llama.cpp's tools; this module reproduces their output:
//!
//! | file | made by | here |
//! |---|---|---|
//! | `<model>-<q>.gguf` | `convert_hf_to_gguf.py --outtype f16` (+ `llama-quantize`) | [`backbone`] |
//! | `mmproj-<model>-<q>.gguf` | `convert_hf_to_gguf.py --mmproj` (+ `llama-quantize`) | [`mmproj`] |
//! | `vocoder-<model>-<q>.gguf` | `tools/liquid-audio/convert_vocoder_to_gguf.py` | [`vocoder`] |
//! | `tokenizer-<model>-<q>.gguf` | `convert_hf_to_gguf.py CKPT/audio_detokenizer` (+ `llama-quantize`) | [`detokenizer`] |
//!
//! The quantized backbone and detokenizer are what `llama-quantize` makes from the F16 file, so
//! their matrices are rounded to F16 before being quantized, and the per-tensor types follow the
//! pinned `src/llama-quant.cpp` (see [`quantize`]).

use std::path::{Path, PathBuf};

use super::safetensors::{SafeTensors, SafeTensorsError};
use audio_engine::ggml::gguf::GgufError;
use audio_engine::lfm2_audio::PackagePaths;

pub mod backbone;
pub mod detokenizer;
pub mod mmproj;
pub mod quantize;
pub mod tokenizer_json;
pub mod vocoder;
mod write;

pub use audio_engine::lfm2_audio::{Quant, UnknownQuant};

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
    /// An argument of the conversion itself is unusable (model name, output type).
    #[error("{reason}")]
    BadArgument {
        /// What is wrong.
        reason: String,
    },
    /// Creating the output directory or reading a side file failed.
    #[error("{}: {source}", file.display())]
    Io {
        /// The path.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
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

impl From<UnknownQuant> for ConvertError {
    fn from(e: UnknownQuant) -> ConvertError {
        ConvertError::BadArgument {
            reason: e.to_string(),
        }
    }
}

/// Reports conversion progress, one call per tensor written.
pub trait Progress {
    /// `done` of `total` tensors of `file` are converted; `tensor` is the latest.
    fn tensor(&mut self, file: &Path, tensor: &str, done: usize, total: usize);
}

/// A [`Progress`] that reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn tensor(&mut self, _file: &Path, _tensor: &str, _done: usize, _total: usize) {}
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

/// Reads and parses a JSON file, naming it in errors.
pub(crate) fn read_json(file: &Path) -> Result<serde_json::Value> {
    if !file.is_file() {
        return Err(ConvertError::MissingFile {
            file: file.to_path_buf(),
        });
    }
    let text = std::fs::read_to_string(file).map_err(|source| ConvertError::Io {
        file: file.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ConvertError::BadConfig {
        file: file.to_path_buf(),
        reason: format!("not valid JSON: {e}"),
    })
}

/// Opens a safetensors file, turning absence into [`ConvertError::MissingFile`].
pub(crate) fn open_safetensors(file: &Path) -> Result<SafeTensors> {
    if !file.is_file() {
        return Err(ConvertError::MissingFile {
            file: file.to_path_buf(),
        });
    }
    Ok(SafeTensors::open(file)?)
}

impl HfCheckpoint {
    /// Opens `dir`: parses `config.json` and maps `model.safetensors` (the detokenizer and the
    /// tokenizer files are read by the converters that need them).
    pub fn open(dir: impl AsRef<Path>) -> Result<HfCheckpoint> {
        let dir = dir.as_ref().to_path_buf();
        let config = read_json(&dir.join("config.json"))?;
        if !config.is_object() {
            return Err(ConvertError::BadConfig {
                file: dir.join("config.json"),
                reason: "not a JSON object".into(),
            });
        }
        let model = open_safetensors(&dir.join("model.safetensors"))?;
        Ok(HfCheckpoint { dir, config, model })
    }

    /// `config.json`'s path (for errors).
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("config.json")
    }

    /// The detokenizer's directory, `audio_detokenizer/`.
    pub fn detokenizer_dir(&self) -> PathBuf {
        self.dir.join("audio_detokenizer")
    }
}

/// Which of the four files [`convert_files`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// `<model>-<q>.gguf`.
    pub backbone: bool,
    /// `mmproj-<model>-<q>.gguf`.
    pub mmproj: bool,
    /// `vocoder-<model>-<q>.gguf`.
    pub vocoder: bool,
    /// `tokenizer-<model>-<q>.gguf`.
    pub tokenizer: bool,
}

impl Parts {
    /// All four files.
    pub const ALL: Parts = Parts {
        backbone: true,
        mmproj: true,
        vocoder: true,
        tokenizer: true,
    };
}

/// Converts the checkpoint in `ckpt_dir` into the four files of `model_name` at `ty` in `out_dir`
/// (created if needed) and returns their paths.
///
/// The mmproj file is written by [`mmproj`]'s converter.
pub fn convert(
    ckpt_dir: &Path,
    out_dir: &Path,
    model_name: &str,
    ty: Quant,
    progress: &mut dyn Progress,
) -> Result<PackagePaths> {
    convert_files(ckpt_dir, out_dir, model_name, ty, Parts::ALL, progress)
}

/// Like [`convert`], writing only the files `parts` selects (the paths of all four are returned).
pub fn convert_files(
    ckpt_dir: &Path,
    out_dir: &Path,
    model_name: &str,
    ty: Quant,
    parts: Parts,
    progress: &mut dyn Progress,
) -> Result<PackagePaths> {
    // why: the name becomes part of four file names; a separator would write elsewhere and an
    // empty name would make `-F16.gguf`, which the package loader cannot attribute.
    if model_name.is_empty() || model_name.contains(['/', '\\']) || model_name.starts_with('.') {
        return Err(ConvertError::BadArgument {
            reason: format!("model name '{model_name}' is empty or not a plain file name"),
        });
    }
    let ckpt = HfCheckpoint::open(ckpt_dir)?;
    // why: fail before writing anything when a file a later step needs is absent.
    let detok = ckpt.detokenizer_dir();
    let mut needed = Vec::new();
    if parts.backbone {
        needed.push(ckpt.dir.join("tokenizer.json"));
    }
    if parts.vocoder || parts.tokenizer {
        needed.push(detok.join("model.safetensors"));
    }
    if parts.tokenizer {
        needed.push(detok.join("config.json"));
    }
    if let Some(file) = needed.into_iter().find(|f| !f.is_file()) {
        return Err(ConvertError::MissingFile { file });
    }
    std::fs::create_dir_all(out_dir).map_err(|source| ConvertError::Io {
        file: out_dir.to_path_buf(),
        source,
    })?;
    let paths = PackagePaths::new(out_dir, model_name, ty);
    if parts.backbone {
        backbone::convert_backbone(&ckpt, &paths.backbone, model_name, ty, progress)?;
    }
    if parts.mmproj {
        mmproj_step(&ckpt, &paths.mmproj, model_name, ty, progress)?;
    }
    if parts.vocoder {
        vocoder::convert_vocoder(&ckpt, &paths.vocoder, ty, progress)?;
    }
    if parts.tokenizer {
        detokenizer::convert_detokenizer(&ckpt, &paths.tokenizer, model_name, ty, progress)?;
    }
    Ok(paths)
}

/// Writes the mmproj file through the encoder converter.
fn mmproj_step(
    ckpt: &HfCheckpoint,
    out: &Path,
    model_name: &str,
    ty: Quant,
    progress: &mut dyn Progress,
) -> Result<()> {
    mmproj::convert_mmproj(ckpt, out, model_name, ty, progress)
}
