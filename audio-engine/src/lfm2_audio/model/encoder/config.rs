//! Encoder hyperparameters, read from the mmproj GGUF's metadata and tensor shapes.

use std::path::PathBuf;

use crate::ggml::gguf::GgufFile;
use crate::lfm2_audio::model::gguf_keys as K;
use crate::lfm2_audio::model::load_error::{LoadError, Result};
use crate::lfm2_audio::model::weights::{display_path, WeightFile};

/// `general.architecture` of an mmproj file.
pub const CLIP_ARCH: &str = "clip";
/// `clip.projector_type` (or `clip.audio.projector_type`) of the LFM2-Audio encoder.
pub const PROJECTOR_TYPE: &str = "lfm2a";

/// The shape of the FastConformer encoder and its adapter.
///
/// Sizes the converter writes as metadata are read from the keys; the rest (FFN width, conv
/// kernel, subsampling channels, adapter width) from the tensor shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderConfig {
    /// Mel bins per input frame (`clip.audio.num_mel_bins`).
    pub n_mels: usize,
    /// Model width (`clip.audio.embedding_length`).
    pub d_model: usize,
    /// Attention heads (`clip.audio.head_count`).
    pub n_heads: usize,
    /// Conformer layers (`clip.audio.block_count`).
    pub n_layers: usize,
    /// Feed-forward width (rows of `a.blk.0.ffn_up.weight`).
    pub ff_dim: usize,
    /// Depthwise kernel of the conv module (`a.blk.0.conv_dw.weight`), odd.
    pub conv_kernel: usize,
    /// Channels of the subsampling convolutions (`a.conv1d.0.weight`).
    pub sub_channels: usize,
    /// LayerNorm epsilon (`clip.audio.attention.layer_norm_epsilon`).
    pub eps: f32,
    /// Adapter hidden width (rows of `mm.a.mlp.1.weight`).
    pub adapter_hidden: usize,
    /// Adapter output width = backbone hidden size (`clip.audio.projection_dim`).
    pub out_dim: usize,
}

/// Frames after one stride-2, kernel-3, padding-1 convolution (PyTorch's floor formula).
pub fn stride2(n: usize) -> usize {
    (n + 2 - 3) / 2 + 1
}

impl EncoderConfig {
    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Mel bins left after the three stride-2 subsampling convolutions.
    pub fn sub_freq(&self) -> usize {
        stride2(stride2(stride2(self.n_mels)))
    }

    /// Encoder frames produced from `n_frames` feature frames: `ceil(n / 8)` for the x8
    /// subsampling (0 for no input).
    pub fn output_frames(&self, n_frames: usize) -> usize {
        if n_frames == 0 {
            0
        } else {
            stride2(stride2(stride2(n_frames)))
        }
    }

    /// Reads the configuration of `file` (metadata, then the shapes of a few tensors).
    pub fn from_weights(file: &WeightFile) -> Result<EncoderConfig> {
        let gguf = file.gguf();
        let keys = Keys {
            gguf,
            file: display_path(gguf),
        };
        let arch = keys.str(K::GENERAL_ARCHITECTURE)?;
        if arch != CLIP_ARCH {
            return Err(LoadError::WrongArchitecture {
                file: keys.file.clone(),
                found: arch.to_owned(),
                expected: CLIP_ARCH.to_owned(),
            });
        }
        // why: a file with several modalities names each one's projector; ours has one.
        let proj_key = if gguf.metadata().contains_key(K::CLIP_AUDIO_PROJECTOR_TYPE) {
            K::CLIP_AUDIO_PROJECTOR_TYPE
        } else {
            K::CLIP_PROJECTOR_TYPE
        };
        let proj = keys.str(proj_key)?;
        if proj != PROJECTOR_TYPE {
            return Err(keys.bad(
                proj_key,
                format!("is '{proj}', expected '{PROJECTOR_TYPE}'"),
            ));
        }
        let n_mels = keys.usize(K::CLIP_AUDIO_NUM_MEL_BINS)?;
        let d_model = keys.usize(K::CLIP_AUDIO_EMBEDDING_LENGTH)?;
        // why: files from this project's converter before it matched upstream spell the head
        // count `clip.audio.head_count`; read them too.
        let heads_key = K::resolve(gguf.metadata(), K::CLIP_AUDIO_HEAD_COUNT, &keys.file)
            .unwrap_or(K::CLIP_AUDIO_HEAD_COUNT);
        let n_heads = keys.usize(heads_key)?;
        let n_layers = keys.usize(K::CLIP_AUDIO_BLOCK_COUNT)?;
        let out_dim = keys.usize(K::CLIP_AUDIO_PROJECTION_DIM)?;
        let eps_key = K::CLIP_AUDIO_LAYER_NORM_EPS;
        let eps = keys.f32(eps_key)?;
        if !(eps.is_finite() && eps > 0.0) {
            return Err(keys.bad(eps_key, format!("{eps} is not a positive number")));
        }
        if d_model % n_heads != 0 {
            return Err(keys.bad(
                heads_key,
                format!("{n_heads} heads do not divide the width {d_model}"),
            ));
        }
        let vb = file.vb();
        let dim = |name: &str, axis: usize| -> Result<usize> { Ok(vb.ne(name)?[axis] as usize) };
        let cfg = EncoderConfig {
            n_mels,
            d_model,
            n_heads,
            n_layers,
            ff_dim: dim("a.blk.0.ffn_up.weight", 1)?,
            conv_kernel: dim("a.blk.0.conv_dw.weight", 0)?,
            sub_channels: dim("a.conv1d.0.weight", 3)?,
            eps,
            adapter_hidden: dim("mm.a.mlp.1.weight", 1)?,
            out_dim,
        };
        if cfg.conv_kernel % 2 == 0 {
            // why: the module pads (k - 1) / 2 on both sides, which needs an odd kernel.
            return Err(LoadError::BadShape {
                file: keys.file.clone(),
                tensor: "a.blk.0.conv_dw.weight".into(),
                expected: vec![cfg.conv_kernel as u64 + 1, d_model as u64],
                found: vec![cfg.conv_kernel as u64, d_model as u64],
            });
        }
        Ok(cfg)
    }
}

/// Reads metadata keys of one file, turning absence and bad values into [`LoadError`]s.
struct Keys<'a> {
    gguf: &'a GgufFile,
    file: PathBuf,
}

impl Keys<'_> {
    fn bad(&self, key: &str, reason: impl Into<String>) -> LoadError {
        LoadError::BadValue {
            file: self.file.clone(),
            key: key.to_owned(),
            reason: reason.into(),
        }
    }

    fn get(&self, key: &str) -> Result<&crate::ggml::gguf::GgufValue> {
        self.gguf
            .metadata()
            .get(key)
            .ok_or_else(|| LoadError::MissingKey {
                file: self.file.clone(),
                key: key.to_owned(),
            })
    }

    fn str(&self, key: &str) -> Result<&str> {
        let v = self.get(key)?;
        v.as_str().ok_or_else(|| {
            self.bad(
                key,
                format!("is {}, expected a string", v.type_description()),
            )
        })
    }

    /// A positive integer of any integer type (converters differ in widths).
    fn usize(&self, key: &str) -> Result<usize> {
        let v = self.get(key)?;
        let n = v.as_integer().ok_or_else(|| {
            self.bad(
                key,
                format!("is {}, expected an integer", v.type_description()),
            )
        })?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n > 0 && n <= 1 << 24)
            .ok_or_else(|| self.bad(key, format!("{n} is not a plausible size")))
    }

    fn f32(&self, key: &str) -> Result<f32> {
        use crate::ggml::gguf::GgufValue;
        match self.get(key)? {
            GgufValue::F32(v) => Ok(*v),
            GgufValue::F64(v) => Ok(*v as f32),
            v => Err(self.bad(
                key,
                format!("is {}, expected a float", v.type_description()),
            )),
        }
    }
}
