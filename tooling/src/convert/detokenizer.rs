//! `tokenizer-<model>-<q>.gguf`: the LFM2.5 audio detokenizer as an `lfm2` model, as
//! `convert_hf_to_gguf.py CKPT/audio_detokenizer` (`LFM25AudioTokenizer`) writes it and
//! `llama-quantize` re-encodes it: the LFM2 keys plus `lfm2.attention.sliding_window` and
//! `lfm2.embedding_length_out`, no vocabulary (`tokenizer.ggml.model` = `none`), and the output
//! head `lin` stored as `dense_2.weight` / `dense_2.bias`. `emb.emb` and `istft.window` belong to
//! the vocoder file.

use std::path::Path;

use serde_json::Value;

use super::backbone::{finish_keys, general_keys, plan_lfm2, Lfm2Hparams, QUANTIZATION_VERSION};
use super::write::write_gguf;
use super::{open_safetensors, read_json, ConvertError, HfCheckpoint, Progress, Quant, Result};
use audio_engine::ggml::gguf::GgufMetadata;
use audio_engine::lfm2_audio::internals::gguf_keys as K;

/// Key of the detokenizer's attention window.
pub const KEY_SLIDING_WINDOW: &str = K::LFM2_SLIDING_WINDOW;
/// Key of the output head's width.
pub const KEY_EMBEDDING_LENGTH_OUT: &str = K::LFM2_EMBEDDING_LENGTH_OUT;

/// Writes `tokenizer-<model>-<q>.gguf` to `out` from `ckpt`'s `audio_detokenizer/`.
pub fn convert_detokenizer(
    ckpt: &HfCheckpoint,
    out: &Path,
    model_name: &str,
    ty: Quant,
    progress: &mut dyn Progress,
) -> Result<()> {
    let dir = ckpt.detokenizer_dir();
    let cfg_file = dir.join("config.json");
    let config = read_json(&cfg_file)?;
    let map = config.as_object().ok_or_else(|| ConvertError::BadConfig {
        file: cfg_file.clone(),
        reason: "not a JSON object".into(),
    })?;
    let hp = Lfm2Hparams::from_config(map, &cfg_file)?;
    let need = |k: &str| {
        map.get(k)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| ConvertError::BadConfig {
                file: cfg_file.clone(),
                reason: format!("missing or non-count '{k}'"),
            })
    };
    let sliding_window = need("sliding_window")?;
    let st = open_safetensors(&dir.join("model.safetensors"))?;
    // why: liquid-audio's detokenizer class hard-codes its head (`lin`, 512 -> 1282) and its
    // config.json need not carry `output_size`; the head's shape is the ground truth then.
    let output_size = match map.get("output_size") {
        Some(_) => need("output_size")?,
        None => {
            let head = st.tensor("lin.weight")?;
            match head.shape {
                [out, _] => u32::try_from(*out).map_err(|_| ConvertError::BadConfig {
                    file: cfg_file.clone(),
                    reason: "lin.weight is too large".into(),
                })?,
                other => {
                    return Err(ConvertError::BadTensor {
                        file: dir.join("model.safetensors"),
                        tensor: "lin.weight".into(),
                        reason: format!("expected a matrix, found shape {other:?}"),
                    })
                }
            }
        }
    };
    let mut entries = Vec::new();
    for n in st.names() {
        // LFM25AudioTokenizer.filter_tensors: the code embedding and the ISTFT window are the
        // vocoder's; `lin` is the output head.
        if n == "istft.window" || n.starts_with("emb.emb") {
            continue;
        }
        let hf = if n.starts_with("lin") {
            n.replacen("lin", "dense_2_out", 1)
        } else if let Some(rest) = n.strip_prefix("lfm.") {
            rest.to_owned()
        } else if let Some(rest) = n.strip_prefix("model.") {
            rest.to_owned()
        } else {
            n.to_owned()
        };
        entries.push((n.to_owned(), hf));
    }
    let plan = plan_lfm2(&st, &entries, ty)?;
    let mut md = GgufMetadata::new();
    general_keys(&mut md, model_name, &plan)?;
    hp.write_keys(&mut md, ty)?;
    md.insert(KEY_SLIDING_WINDOW, sliding_window)?;
    md.insert(KEY_EMBEDDING_LENGTH_OUT, output_size)?;
    md.insert(K::GENERAL_QUANTIZATION_VERSION, QUANTIZATION_VERSION)?;
    md.insert(K::TOKENIZER_MODEL, "none")?;
    finish_keys(&mut md, ty)?;
    write_gguf(out, &md, plan, progress)
}
