//! The four GGUF files of a model directory, found by the published naming pattern and checked
//! before any tensor is loaded:
//!
//! | file | checked |
//! |---|---|
//! | `<model>-<q>.gguf` | `lfm2` config and every tensor ([`Lfm2Backbone`]), `tokenizer.ggml.model` = `gpt2` |
//! | `mmproj-<model>-<q>.gguf` | `general.architecture` = `clip`, `clip.projector_type` = `lfm2a` |
//! | `vocoder-<model>-<q>.gguf` | `depthformer_n_layer` / `depthformer_n_embd` and every tensor ([`VocoderConfig`]) |
//! | `tokenizer-<model>-<q>.gguf` | `lfm2` config and tensors, `sliding_window`, `embedding_length_out`, `dense_2` head |
//!
//! `<q>` is `F32`, `F16`, `Q8_0` or `Q4_0`, spelled as LiquidAI's files are
//! (`LFM2.5-Audio-1.5B-Q4_0.gguf`). Dimensions come from each file's metadata and shapes; the
//! files are also checked against each other (the vocoder feeds the backbone's width, its code
//! embedding the detokenizer's). Loading tensors onto a backend is
//! [`WeightFile`](super::weights::WeightFile)'s job, later.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::ggml::gguf::GgufFile;
use crate::ggml::GgmlType;

use super::backbone::config::Lfm2Backbone;
use super::detokenizer::config::{VocoderConfig, DEPTH_LINEAR, DETOK_EMBEDDING};
use super::gguf_keys as K;
use super::load_error::{LoadError, Result};
use super::weights::open_gguf;

/// The mmproj file's `general.architecture`.
pub const MMPROJ_ARCH: &str = "clip";
/// The mmproj file's projector type key.
pub const KEY_PROJECTOR_TYPE: &str = K::CLIP_PROJECTOR_TYPE;
/// The projector type of LFM2-Audio's encoder.
pub const PROJECTOR_LFM2A: &str = "lfm2a";
/// The backbone's tokenizer model key.
pub const KEY_TOKENIZER_MODEL: &str = K::TOKENIZER_MODEL;
/// The detokenizer's attention window key.
pub const KEY_SLIDING_WINDOW: &str = K::LFM2_SLIDING_WINDOW;
/// The detokenizer's output width key.
pub const KEY_EMBEDDING_LENGTH_OUT: &str = K::LFM2_EMBEDDING_LENGTH_OUT;
/// The detokenizer's output head.
pub const DENSE_2: &str = "dense_2.weight";
/// The detokenizer's output head bias.
pub const DENSE_2_BIAS: &str = "dense_2.bias";

/// The quantization of a package: the type its matrices are stored in (norms, biases and
/// convolutions stay F32), spelled in the file names as LiquidAI publishes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quant {
    /// Everything F32.
    F32,
    /// Matrices F16.
    F16,
    /// Matrices Q8_0.
    Q8_0,
    /// Matrices Q4_0 (the tied token embedding Q6_K).
    Q4_0,
}

impl Quant {
    /// Every quantization, in the order LiquidAI lists them.
    pub const ALL: [Quant; 4] = [Quant::F32, Quant::F16, Quant::Q8_0, Quant::Q4_0];

    /// The spelling in the published file names (`LFM2.5-Audio-1.5B-Q4_0.gguf`).
    pub fn file_suffix(self) -> &'static str {
        match self {
            Quant::F32 => "F32",
            Quant::F16 => "F16",
            Quant::Q8_0 => "Q8_0",
            Quant::Q4_0 => "Q4_0",
        }
    }

    /// The inverse of [`file_suffix`](Self::file_suffix) (exact spelling only, as published).
    pub fn from_file_suffix(s: &str) -> Option<Quant> {
        Quant::ALL.into_iter().find(|t| t.file_suffix() == s)
    }

    /// llama.cpp's `llama_ftype` value written to `general.file_type`.
    pub fn llama_ftype(self) -> u32 {
        match self {
            Quant::F32 => 0,
            Quant::F16 => 1,
            Quant::Q4_0 => 2,
            Quant::Q8_0 => 7,
        }
    }

    /// The ggml type a quantizable matrix takes by default.
    pub fn matrix_type(self) -> GgmlType {
        match self {
            Quant::F32 => GgmlType::F32,
            Quant::F16 => GgmlType::F16,
            Quant::Q8_0 => GgmlType::Q8_0,
            Quant::Q4_0 => GgmlType::Q4_0,
        }
    }

    /// Whether the type is made by `llama-quantize` from the F16 file (Q8_0, Q4_0).
    pub fn is_quantized(self) -> bool {
        matches!(self, Quant::Q8_0 | Quant::Q4_0)
    }
}

impl std::fmt::Display for Quant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.file_suffix())
    }
}

impl FromStr for Quant {
    type Err = UnknownQuant;

    /// Accepts the file spelling in any case (`q4_0`, `F16`), as the llama.cpp tools do.
    fn from_str(s: &str) -> std::result::Result<Quant, UnknownQuant> {
        Quant::ALL
            .into_iter()
            .find(|t| t.file_suffix().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownQuant(s.to_owned()))
    }
}

/// A quantization name that is none of F32, F16, Q8_0, Q4_0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown quantization '{0}' (expected F32, F16, Q8_0 or Q4_0)")]
pub struct UnknownQuant(pub String);

/// The paths of one package's four files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackagePaths {
    /// The model name (`LFM2.5-Audio-1.5B`).
    pub model: String,
    /// The quantization.
    pub quant: Quant,
    /// `<model>-<q>.gguf`.
    pub backbone: PathBuf,
    /// `mmproj-<model>-<q>.gguf`.
    pub mmproj: PathBuf,
    /// `vocoder-<model>-<q>.gguf`.
    pub vocoder: PathBuf,
    /// `tokenizer-<model>-<q>.gguf`.
    pub tokenizer: PathBuf,
}

impl PackagePaths {
    /// The four paths of `model` at `quant` in `dir`.
    pub fn new(dir: &Path, model: &str, quant: Quant) -> PackagePaths {
        let stem = format!("{model}-{}.gguf", quant.file_suffix());
        PackagePaths {
            model: model.to_owned(),
            quant,
            backbone: dir.join(&stem),
            mmproj: dir.join(format!("mmproj-{stem}")),
            vocoder: dir.join(format!("vocoder-{stem}")),
            tokenizer: dir.join(format!("tokenizer-{stem}")),
        }
    }

    /// The package's label, `<model>-<q>`.
    pub fn label(&self) -> String {
        format!("{}-{}", self.model, self.quant.file_suffix())
    }
}

/// The packages in `dir`, one per backbone file `<model>-<q>.gguf`, sorted by name.
pub fn list_packages(dir: &Path) -> Result<Vec<(String, Quant)>> {
    let rd = std::fs::read_dir(dir).map_err(|_| LoadError::MissingFile {
        file: dir.to_path_buf(),
    })?;
    let mut found = BTreeSet::new();
    for entry in rd.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(".gguf") else {
            continue;
        };
        if ["mmproj-", "vocoder-", "tokenizer-"]
            .iter()
            .any(|p| stem.starts_with(p))
        {
            continue;
        }
        let Some((model, q)) = stem.rsplit_once('-') else {
            continue;
        };
        if let (false, Some(q)) = (model.is_empty(), Quant::from_file_suffix(q)) {
            found.insert((model.to_owned(), q.file_suffix().to_owned()));
        }
    }
    Ok(found
        .into_iter()
        .filter_map(|(m, q)| Quant::from_file_suffix(&q).map(|q| (m, q)))
        .collect())
}

/// The detokenizer file: an `lfm2` model with a sliding window and a `dense_2` output head.
#[derive(Debug)]
pub struct Detokenizer {
    /// The file, its LFM2 config and validated tensor names.
    pub lfm2: Lfm2Backbone,
    /// `lfm2.attention.sliding_window`.
    pub sliding_window: u32,
    /// `lfm2.embedding_length_out`: the head's output width (log-magnitudes and phases).
    pub n_embd_out: u32,
}

/// The vocoder file.
#[derive(Debug)]
pub struct Vocoder {
    /// The opened file.
    pub gguf: GgufFile,
    /// Its dimensions.
    pub config: VocoderConfig,
}

/// The four files of a model directory, opened (memory-mapped) and validated.
#[derive(Debug)]
pub struct ModelPackage {
    /// Where the files are.
    pub paths: PackagePaths,
    /// `<model>-<q>.gguf`.
    pub backbone: Lfm2Backbone,
    /// `mmproj-<model>-<q>.gguf` (validated by its markers here; the encoder checks tensors).
    pub mmproj: GgufFile,
    /// `vocoder-<model>-<q>.gguf`.
    pub vocoder: Vocoder,
    /// `tokenizer-<model>-<q>.gguf`.
    pub detokenizer: Detokenizer,
}

fn str_key<'a>(gguf: &'a GgufFile, file: &Path, key: &str) -> Result<&'a str> {
    let v = gguf
        .metadata()
        .get(key)
        .ok_or_else(|| LoadError::MissingKey {
            file: file.to_path_buf(),
            key: key.to_owned(),
        })?;
    v.as_str().ok_or_else(|| LoadError::BadValue {
        file: file.to_path_buf(),
        key: key.to_owned(),
        reason: format!("is {}, expected a string", v.type_description()),
    })
}

fn positive_key(gguf: &GgufFile, file: &Path, key: &str) -> Result<u32> {
    let v = gguf
        .metadata()
        .get(key)
        .ok_or_else(|| LoadError::MissingKey {
            file: file.to_path_buf(),
            key: key.to_owned(),
        })?;
    v.as_integer()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| LoadError::BadValue {
            file: file.to_path_buf(),
            key: key.to_owned(),
            reason: format!("is {}, expected a positive integer", v.type_description()),
        })
}

/// Checks tensor `name` of `gguf` has `shape` and (when `f32_only`) type F32.
fn expect_tensor(
    gguf: &GgufFile,
    file: &Path,
    name: &str,
    shape: &[u64],
    f32_only: bool,
) -> Result<()> {
    let t = gguf.tensor(name).ok_or_else(|| LoadError::MissingTensor {
        file: file.to_path_buf(),
        tensor: name.to_owned(),
    })?;
    if t.shape() != shape {
        return Err(LoadError::BadShape {
            file: file.to_path_buf(),
            tensor: name.to_owned(),
            expected: shape.to_vec(),
            found: t.shape().to_vec(),
        });
    }
    let ok = if f32_only {
        t.ggml_type() == GgmlType::F32
    } else {
        matches!(
            t.ggml_type(),
            GgmlType::F32 | GgmlType::F16 | GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q6_K
        )
    };
    if !ok {
        return Err(LoadError::BadType {
            file: file.to_path_buf(),
            tensor: name.to_owned(),
            found: t.ggml_type(),
        });
    }
    Ok(())
}

/// Opens and validates the backbone file.
pub fn open_backbone(path: &Path) -> Result<Lfm2Backbone> {
    let bb = Lfm2Backbone::open(path)?;
    let model = str_key(&bb.gguf, path, KEY_TOKENIZER_MODEL)?;
    if model != "gpt2" {
        return Err(LoadError::BadValue {
            file: path.to_path_buf(),
            key: KEY_TOKENIZER_MODEL.to_owned(),
            reason: format!("is '{model}', expected 'gpt2' (a BPE vocabulary)"),
        });
    }
    Ok(bb)
}

/// Opens the mmproj file and checks its markers.
pub fn open_mmproj(path: &Path) -> Result<GgufFile> {
    let gguf = open_gguf(path)?;
    let arch = str_key(&gguf, path, K::GENERAL_ARCHITECTURE)?;
    if arch != MMPROJ_ARCH {
        return Err(LoadError::WrongArchitecture {
            file: path.to_path_buf(),
            found: arch.to_owned(),
            expected: MMPROJ_ARCH.to_owned(),
        });
    }
    let proj = str_key(&gguf, path, KEY_PROJECTOR_TYPE)?;
    if proj != PROJECTOR_LFM2A {
        return Err(LoadError::BadValue {
            file: path.to_path_buf(),
            key: KEY_PROJECTOR_TYPE.to_owned(),
            reason: format!("is '{proj}', expected '{PROJECTOR_LFM2A}'"),
        });
    }
    Ok(gguf)
}

/// Opens the vocoder file and validates its tensors.
pub fn open_vocoder(path: &Path) -> Result<Vocoder> {
    let gguf = open_gguf(path)?;
    let config = VocoderConfig::from_gguf(&gguf)?;
    Ok(Vocoder { gguf, config })
}

/// Opens the detokenizer file and validates its config, tensors and head.
pub fn open_detokenizer(path: &Path) -> Result<Detokenizer> {
    let gguf = open_gguf(path)?;
    let sliding_window = positive_key(&gguf, path, KEY_SLIDING_WINDOW)?;
    let n_embd_out = positive_key(&gguf, path, KEY_EMBEDDING_LENGTH_OUT)?;
    let lfm2 = Lfm2Backbone::from_gguf(gguf)?;
    let h = u64::from(lfm2.config.hidden_size);
    let out = u64::from(n_embd_out);
    expect_tensor(&lfm2.gguf, path, DENSE_2, &[h, out], false)?;
    expect_tensor(&lfm2.gguf, path, DENSE_2_BIAS, &[out], true)?;
    Ok(Detokenizer {
        lfm2,
        sliding_window,
        n_embd_out,
    })
}

impl ModelPackage {
    /// Opens the only package in `dir`; a directory with several quantizations or models is an
    /// [`LoadError::AmbiguousPackage`] listing them (choose with [`open_quant`](Self::open_quant)).
    pub fn open(dir: impl AsRef<Path>) -> Result<ModelPackage> {
        let dir = dir.as_ref();
        let found = list_packages(dir)?;
        match found.as_slice() {
            [(model, q)] => ModelPackage::open_paths(PackagePaths::new(dir, model, *q)),
            [] => Err(LoadError::NoPackage {
                dir: dir.to_path_buf(),
                wanted: None,
                found: Vec::new(),
            }),
            _ => Err(LoadError::AmbiguousPackage {
                dir: dir.to_path_buf(),
                found: labels(&found),
            }),
        }
    }

    /// Opens the package of quantization `quant` in `dir` (several models at that quantization
    /// are an [`LoadError::AmbiguousPackage`]).
    pub fn open_quant(dir: impl AsRef<Path>, quant: Quant) -> Result<ModelPackage> {
        let dir = dir.as_ref();
        let found = list_packages(dir)?;
        let matching: Vec<_> = found.iter().filter(|(_, q)| *q == quant).cloned().collect();
        match matching.as_slice() {
            [(model, q)] => ModelPackage::open_paths(PackagePaths::new(dir, model, *q)),
            [] => Err(LoadError::NoPackage {
                dir: dir.to_path_buf(),
                wanted: Some(quant.file_suffix().to_owned()),
                found: labels(&found),
            }),
            _ => Err(LoadError::AmbiguousPackage {
                dir: dir.to_path_buf(),
                found: labels(&matching),
            }),
        }
    }

    /// Opens the four files at `paths` and validates each and their agreement.
    pub fn open_paths(paths: PackagePaths) -> Result<ModelPackage> {
        let backbone = open_backbone(&paths.backbone)?;
        let mmproj = open_mmproj(&paths.mmproj)?;
        let vocoder = open_vocoder(&paths.vocoder)?;
        let detokenizer = open_detokenizer(&paths.tokenizer)?;
        // why: the depthformer reads the backbone's hidden state and the detokenizer reads the
        // vocoder's code embedding; files from different models would fail deep in a graph.
        let vc = &vocoder.config;
        if vc.backbone_embd != backbone.config.hidden_size {
            let t = vocoder
                .gguf
                .tensor(DEPTH_LINEAR)
                .map(|t| t.shape().to_vec());
            return Err(LoadError::BadShape {
                file: paths.vocoder.clone(),
                tensor: DEPTH_LINEAR.to_owned(),
                expected: vec![
                    u64::from(backbone.config.hidden_size),
                    u64::from(vc.codebooks) * u64::from(vc.n_embd),
                ],
                found: t.unwrap_or_default(),
            });
        }
        if vc.detok_embd != detokenizer.lfm2.config.hidden_size {
            let t = vocoder
                .gguf
                .tensor(DETOK_EMBEDDING)
                .map(|t| t.shape().to_vec());
            return Err(LoadError::BadShape {
                file: paths.vocoder.clone(),
                tensor: DETOK_EMBEDDING.to_owned(),
                expected: vec![
                    u64::from(detokenizer.lfm2.config.hidden_size),
                    u64::from(vc.codebooks) * u64::from(vc.detok_codes),
                ],
                found: t.unwrap_or_default(),
            });
        }
        Ok(ModelPackage {
            paths,
            backbone,
            mmproj,
            vocoder,
            detokenizer,
        })
    }
}

fn labels(found: &[(String, Quant)]) -> Vec<String> {
    found
        .iter()
        .map(|(m, q)| format!("{m}-{}", q.file_suffix()))
        .collect()
}
