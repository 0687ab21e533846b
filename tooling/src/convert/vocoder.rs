//! `vocoder-<model>-<q>.gguf`, as `tools/liquid-audio/convert_vocoder_to_gguf.py` writes it:
//! `general.architecture` is a sentence that keeps llama.cpp from loading it as an LLM, u32 keys
//! `depthformer_n_layer` / `depthformer_n_embd`, then every detokenizer tensor except the LFM2
//! and its head (`emb.emb.weight`, `istft.window`) followed by every `model.safetensors` tensor
//! of the audio-out path (`depthformer*`, `depth_embeddings*`, `depth_linear*`,
//! `audio_embedding*`), under their Hugging Face names with `bounded_attention` shortened to
//! `attention`.

use std::path::Path;

use serde_json::Value;

use super::quantize::vocoder_type;
use super::write::{ggml_shape, write_gguf, Planned};
use super::{open_safetensors, ConvertError, HfCheckpoint, Progress, Quant, Result};
use crate::safetensors::{Dtype, SafeTensors};
use audio_engine::ggml::gguf::GgufMetadata;
use audio_engine::lfm2_audio::internals::gguf_keys as K;

/// The vocoder file's `general.architecture`.
pub const VOCODER_ARCH: &str =
    "this model cannot be used as LLM, use it via --model-vocoder in TTS examples";
/// Depthformer layer count key.
pub const KEY_N_LAYER: &str = K::DEPTHFORMER_N_LAYER;
/// Depthformer width key.
pub const KEY_N_EMBD: &str = K::DEPTHFORMER_N_EMBD;
/// Text steps per interleaved turn (written when `config.json` has it).
pub const KEY_INTERLEAVED_N_TEXT: &str = K::INTERLEAVED_N_TEXT;
/// Audio frames per interleaved turn (written when `config.json` has it).
pub const KEY_INTERLEAVED_N_AUDIO: &str = K::INTERLEAVED_N_AUDIO;

/// Prefixes of the `model.safetensors` tensors the vocoder takes.
const DECODER_PREFIXES: [&str; 4] = [
    "depthformer",
    "depth_embeddings",
    "depth_linear",
    "audio_embedding",
];

fn plan_one<'a>(src: &'a SafeTensors, src_name: &str, ty: Quant) -> Result<Planned<'a>> {
    let view = src.tensor(src_name)?;
    if !matches!(view.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
        return Err(ConvertError::BadTensor {
            file: src.path().to_path_buf(),
            tensor: src_name.to_owned(),
            reason: format!("dtype {} is not a float type", view.dtype.as_str()),
        });
    }
    let shape = ggml_shape(view.shape, src_name.contains(".conv.weight"));
    // why: ggml names hold at most 63 bytes; the script shortens the longest ones this way.
    let name = src_name.replace("bounded_attention", "attention");
    let t = vocoder_type(&name, &shape, ty);
    Ok(Planned {
        src,
        src_name: src_name.to_owned(),
        name,
        shape,
        ty: t,
        via_f16: false,
    })
}

/// Writes `vocoder-<model>-<q>.gguf` to `out`.
pub fn convert_vocoder(
    ckpt: &HfCheckpoint,
    out: &Path,
    ty: Quant,
    progress: &mut dyn Progress,
) -> Result<()> {
    let cfg = &ckpt.config;
    let dep = cfg
        .get("depthformer")
        .ok_or_else(|| ConvertError::BadConfig {
            file: ckpt.config_path(),
            reason: "missing the 'depthformer' section".into(),
        })?;
    let count = |v: Option<&Value>, what: &str| {
        v.and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| ConvertError::BadConfig {
                file: ckpt.config_path(),
                reason: format!("missing or non-count '{what}'"),
            })
    };
    let n_layer = count(dep.get("layers"), "depthformer.layers")?;
    let n_embd = count(dep.get("dim"), "depthformer.dim")?;

    let detok = open_safetensors(&ckpt.detokenizer_dir().join("model.safetensors"))?;
    let mut plan = Vec::new();
    for n in detok.names() {
        if n.starts_with("lfm") || n.starts_with("lin") {
            continue;
        }
        plan.push(plan_one(&detok, n, ty)?);
    }
    let n_detok = plan.len();
    for n in ckpt.model.names() {
        if DECODER_PREFIXES.iter().any(|p| n.starts_with(p)) {
            plan.push(plan_one(&ckpt.model, n, ty)?);
        }
    }
    if plan.len() == n_detok {
        return Err(ConvertError::BadTensor {
            file: ckpt.model.path().to_path_buf(),
            tensor: "depthformer.*".into(),
            reason: "the checkpoint has no audio-output tensors".into(),
        });
    }
    let mut md = GgufMetadata::new();
    md.insert(K::GENERAL_ARCHITECTURE, VOCODER_ARCH)?;
    md.insert(KEY_N_LAYER, n_layer)?;
    md.insert(KEY_N_EMBD, n_embd)?;
    for key in [KEY_INTERLEAVED_N_TEXT, KEY_INTERLEAVED_N_AUDIO] {
        if cfg.get(key).is_some() {
            md.insert(key, count(cfg.get(key), key)?)?;
        }
    }
    write_gguf(out, &md, plan, progress)
}
