//! `<model>-<q>.gguf`: the LFM2 backbone and its BPE tokenizer, as `convert_hf_to_gguf.py`
//! (`LFM2Model`) writes it and `llama-quantize` re-encodes it. The same LFM2 writer makes the
//! detokenizer file (see [`super::detokenizer`]).

use std::path::Path;

use serde_json::{Map, Value};

use super::quantize::{hf_converter_type, llama_quantize_type};
use super::tokenizer_json::BpeVocab;
use super::write::{ggml_shape, param_count, size_label, write_gguf, Planned};
use super::{ConvertError, HfCheckpoint, Progress, Quant, Result};
use crate::safetensors::{Dtype, SafeTensors};
use audio_engine::ggml::gguf::GgufMetadata;
use audio_engine::ggml::GgmlType;
use audio_engine::lfm2_audio::internals::gguf_keys as K;
use audio_engine::lfm2_audio::internals::load_error::LFM2_ARCH;

/// `general.quantization_version` (`GGML_QNT_VERSION`).
pub const QUANTIZATION_VERSION: u32 = 2;

/// The LFM2 hyperparameters the converter writes, read from a Hugging Face config.
#[derive(Debug, Clone, PartialEq)]
pub struct Lfm2Hparams {
    /// `num_hidden_layers`.
    pub block_count: u32,
    /// `max_position_embeddings` (absent: no key).
    pub context_length: Option<u32>,
    /// `hidden_size`.
    pub embedding_length: u32,
    /// `intermediate_size` as written first (absent: no key until the adjusted one).
    pub intermediate_size: Option<u32>,
    /// The effective SwiGLU width (`block_ff_dim` auto-adjusted as `LFM2Model` does).
    pub feed_forward_length: u32,
    /// `num_attention_heads`.
    pub head_count: u32,
    /// Per layer: `num_key_value_heads` on attention layers, 0 on conv layers.
    pub head_count_kv: Vec<u32>,
    /// `rope_theta`.
    pub rope_theta: Option<f32>,
    /// `norm_eps`.
    pub norm_eps: f32,
    /// `conv_L_cache`.
    pub conv_l_cache: u32,
    /// `vocab_size`.
    pub vocab_size: u32,
    /// `head_dim`, when the config states it.
    pub head_dim: Option<u32>,
}

struct Cfg<'a> {
    map: &'a Map<String, Value>,
    file: &'a Path,
}

impl Cfg<'_> {
    fn bad(&self, reason: String) -> ConvertError {
        ConvertError::BadConfig {
            file: self.file.to_path_buf(),
            reason,
        }
    }

    fn find(&self, keys: &[&str]) -> Option<&Value> {
        keys.iter().find_map(|k| self.map.get(*k))
    }

    fn u32_opt(&self, keys: &[&str]) -> Result<Option<u32>> {
        match self.find(keys) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.bad(format!("'{}' is not a count", keys[0]))),
        }
    }

    fn u32(&self, keys: &[&str]) -> Result<u32> {
        self.u32_opt(keys)?
            .ok_or_else(|| self.bad(format!("missing '{}'", keys[0])))
    }

    fn f64_opt(&self, keys: &[&str]) -> Result<Option<f64>> {
        match self.find(keys) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.bad(format!("'{}' is not a number", keys[0]))),
        }
    }
}

impl Lfm2Hparams {
    /// Reads the LFM2 fields of `config` (already merged for the backbone: root keys overlaid by
    /// the `lfm` sub-config, as `load_hparams` + `TextModel` do); `file` names it in errors.
    pub fn from_config(config: &Map<String, Value>, file: &Path) -> Result<Lfm2Hparams> {
        let c = Cfg { map: config, file };
        let block_count = c.u32(&["n_layers", "num_hidden_layers", "n_layer", "num_layers"])?;
        let embedding_length = c.u32(&["hidden_size", "n_embd", "dim"])?;
        let head_count = c.u32(&["num_attention_heads", "n_head", "n_heads"])?;
        let n_kv = c.u32(&["num_key_value_heads", "n_kv_heads"])?;
        // why: LFM2Model zeroes the KV count of every conv layer; older configs list the
        // attention layers as `full_attn_idxs` instead of `layer_types`.
        let head_count_kv = if let Some(types) = config.get("layer_types").and_then(Value::as_array)
        {
            types
                .iter()
                .map(|t| match t.as_str() {
                    Some("conv") => Ok(0),
                    Some(_) => Ok(n_kv),
                    None => Err(c.bad("'layer_types' holds a non-string".into())),
                })
                .collect::<Result<Vec<u32>>>()?
        } else if let Some(idxs) = config.get("full_attn_idxs").and_then(Value::as_array) {
            let idxs: Vec<u64> = idxs.iter().filter_map(Value::as_u64).collect();
            (0..u64::from(block_count))
                .map(|i| if idxs.contains(&i) { n_kv } else { 0 })
                .collect()
        } else {
            return Err(c.bad("missing 'layer_types'".into()));
        };
        if head_count_kv.len() != block_count as usize {
            return Err(c.bad(format!(
                "'layer_types' has {} entries for {block_count} layers",
                head_count_kv.len()
            )));
        }
        let intermediate_size = c.u32_opt(&["intermediate_size", "n_inner", "hidden_dim"])?;
        let mut ff = c.u32(&["block_ff_dim", "intermediate_size"])?;
        let auto_adjust = config
            .get("block_auto_adjust_ff_dim")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if auto_adjust {
            // LFM2Model._add_feed_forward_length, integer steps as Python's int() truncates.
            let mut d = (2.0 * f64::from(ff) / 3.0) as u64;
            if let Some(m) = c.f64_opt(&["block_ffn_dim_multiplier"])? {
                d = (m * d as f64) as u64;
            }
            let multiple = u64::from(c.u32(&["block_multiple_of"])?.max(1));
            d = multiple * d.div_ceil(multiple);
            ff =
                u32::try_from(d).map_err(|_| c.bad(format!("feed-forward width {d} overflows")))?;
        }
        let rope_theta = match c.f64_opt(&["rope_theta"])? {
            Some(t) => Some(t as f32),
            None => config
                .get("rope_parameters")
                .and_then(|r| r.get("rope_theta"))
                .and_then(Value::as_f64)
                .map(|t| t as f32),
        };
        let norm_eps = c
            .f64_opt(&["norm_eps", "rms_norm_eps"])?
            .ok_or_else(|| c.bad("missing 'norm_eps'".into()))? as f32;
        Ok(Lfm2Hparams {
            block_count,
            context_length: c.u32_opt(&[
                "max_position_embeddings",
                "n_ctx",
                "n_positions",
                "max_length",
            ])?,
            embedding_length,
            intermediate_size,
            feed_forward_length: ff,
            head_count,
            head_count_kv,
            rope_theta,
            norm_eps,
            conv_l_cache: c.u32(&["conv_L_cache"])?,
            vocab_size: c.u32(&["vocab_size"])?,
            head_dim: c.u32_opt(&["head_dim"])?,
        })
    }

    /// Appends `TextModel.set_gguf_parameters` + `LFM2Model`'s keys, in the converter's order.
    pub fn write_keys(
        &self,
        md: &mut GgufMetadata,
        ty: Quant,
    ) -> audio_engine::ggml::gguf::Result<()> {
        md.insert(K::LFM2_BLOCK_COUNT, self.block_count)?;
        if let Some(n) = self.context_length {
            md.insert(K::LFM2_CONTEXT_LENGTH, n)?;
        }
        md.insert(K::LFM2_EMBEDDING_LENGTH, self.embedding_length)?;
        if let Some(n) = self.intermediate_size {
            md.insert(K::LFM2_FEED_FORWARD_LENGTH, n)?;
        }
        md.insert(K::LFM2_HEAD_COUNT, self.head_count)?;
        // gguf-py writes a Python int list as INT32 elements.
        let kv: Vec<i32> = self.head_count_kv.iter().map(|&n| n as i32).collect();
        md.insert(K::LFM2_HEAD_COUNT_KV, kv)?;
        if let Some(t) = self.rope_theta {
            md.insert(K::LFM2_ROPE_FREQ_BASE, t)?;
        }
        md.insert(K::LFM2_RMS_EPS, self.norm_eps)?;
        if let Some(d) = self.head_dim {
            md.insert(K::LFM2_KEY_LENGTH, d)?;
            md.insert(K::LFM2_VALUE_LENGTH, d)?;
        }
        md.insert(K::GENERAL_FILE_TYPE, ty.llama_ftype())?;
        md.insert(K::LFM2_VOCAB_SIZE, self.vocab_size)?;
        md.insert(K::LFM2_SHORTCONV_L_CACHE, self.conv_l_cache)?;
        md.set(K::LFM2_RMS_EPS, self.norm_eps)?;
        md.set(K::LFM2_FEED_FORWARD_LENGTH, self.feed_forward_length)?;
        Ok(())
    }
}

/// The llama.cpp name of an LFM2 tensor given its Hugging Face name without the `model.`/`lfm.`
/// prefix (`gguf-py`'s tensor map for `MODEL_ARCH.LFM2`), or `None` if it has none.
pub fn lfm2_tensor_name(hf: &str) -> Option<String> {
    let fixed = match hf {
        "embed_tokens.weight" => Some("token_embd.weight"),
        "embedding_norm.weight" => Some("token_embd_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        "dense_2_out.weight" => Some("dense_2.weight"),
        "dense_2_out.bias" => Some("dense_2.bias"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_owned());
    }
    let rest = hf.strip_prefix("layers.")?;
    let (bid, rest) = rest.split_once('.')?;
    let bid: u32 = bid.parse().ok()?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let name = match module {
        "operator_norm" => "attn_norm",
        "ffn_norm" => "ffn_norm",
        "feed_forward.w1" => "ffn_gate",
        "feed_forward.w3" => "ffn_up",
        "feed_forward.w2" => "ffn_down",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.out_proj" => "attn_output",
        "self_attn.q_layernorm" => "attn_q_norm",
        "self_attn.k_layernorm" => "attn_k_norm",
        "conv.conv" => "shortconv.conv",
        "conv.in_proj" => "shortconv.in_proj",
        "conv.out_proj" => "shortconv.out_proj",
        _ => return None,
    };
    Some(format!("blk.{bid}.{name}.{suffix}"))
}

/// Plans the tensors of an LFM2 file from `src` entries (`(source name, name without prefix)`):
/// names, shapes (conv kernels squeezed), and types as the converter and `llama-quantize` give
/// them.
pub(crate) fn plan_lfm2<'a>(
    src: &'a SafeTensors,
    entries: &[(String, String)],
    ty: Quant,
) -> Result<Vec<Planned<'a>>> {
    let mut out = Vec::with_capacity(entries.len());
    let mut named = Vec::with_capacity(entries.len());
    for (src_name, hf) in entries {
        let name = lfm2_tensor_name(hf).ok_or_else(|| ConvertError::BadTensor {
            file: src.path().to_path_buf(),
            tensor: src_name.clone(),
            reason: "no llama.cpp LFM2 name for it".into(),
        })?;
        named.push((src_name, name));
    }
    let tied = !named.iter().any(|(_, n)| n == "output.weight");
    // The quantized files are made from the F16 one.
    let base = if ty == Quant::F32 {
        Quant::F32
    } else {
        Quant::F16
    };
    for (src_name, name) in named {
        let view = src.tensor(src_name)?;
        if !matches!(view.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return Err(ConvertError::BadTensor {
                file: src.path().to_path_buf(),
                tensor: src_name.clone(),
                reason: format!("dtype {} is not a float type", view.dtype.as_str()),
            });
        }
        let shape = ggml_shape(view.shape, src_name.contains("conv.conv"));
        let first = hf_converter_type(&name, shape.len(), base);
        let final_ty = llama_quantize_type(&name, &shape, first, ty, tied);
        out.push(Planned {
            src,
            src_name: src_name.clone(),
            name,
            shape,
            ty: final_ty,
            via_f16: first == GgmlType::F16,
        });
    }
    Ok(out)
}

/// The common head of an LFM2 file's metadata: architecture, type, name and gguf-py's size
/// label of the tensors in `plan`.
pub(crate) fn general_keys(
    md: &mut GgufMetadata,
    name: &str,
    plan: &[Planned<'_>],
) -> audio_engine::ggml::gguf::Result<()> {
    md.insert(K::GENERAL_ARCHITECTURE, LFM2_ARCH)?;
    md.insert(K::GENERAL_TYPE, "model")?;
    md.insert(K::GENERAL_NAME, name)?;
    md.insert(K::GENERAL_SIZE_LABEL, size_label(param_count(plan)))?;
    Ok(())
}

/// `llama-quantize` re-sets `general.quantization_version` and `general.file_type`, which moves
/// them to the end of the metadata; the converter's own files keep them in place.
pub(crate) fn finish_keys(
    md: &mut GgufMetadata,
    ty: Quant,
) -> audio_engine::ggml::gguf::Result<()> {
    if ty.is_quantized() {
        md.remove(K::GENERAL_QUANTIZATION_VERSION);
        md.remove(K::GENERAL_FILE_TYPE);
        md.insert(K::GENERAL_QUANTIZATION_VERSION, QUANTIZATION_VERSION)?;
        md.insert(K::GENERAL_FILE_TYPE, ty.llama_ftype())?;
    }
    Ok(())
}

/// The backbone's config: the root of `config.json` overlaid by its `lfm` section.
pub fn backbone_config(ckpt: &HfCheckpoint) -> Result<Map<String, Value>> {
    let root = ckpt
        .config
        .as_object()
        .ok_or_else(|| ConvertError::BadConfig {
            file: ckpt.config_path(),
            reason: "not a JSON object".into(),
        })?;
    let mut merged = root.clone();
    let lfm =
        root.get("lfm")
            .and_then(Value::as_object)
            .ok_or_else(|| ConvertError::BadConfig {
                file: ckpt.config_path(),
                reason: "missing the 'lfm' section".into(),
            })?;
    for (k, v) in lfm {
        merged.insert(k.clone(), v.clone());
    }
    Ok(merged)
}

/// Writes `<model>-<q>.gguf` to `out`.
pub fn convert_backbone(
    ckpt: &HfCheckpoint,
    out: &Path,
    model_name: &str,
    ty: Quant,
    progress: &mut dyn Progress,
) -> Result<()> {
    let config = backbone_config(ckpt)?;
    let hp = Lfm2Hparams::from_config(&config, &ckpt.config_path())?;
    let vocab = BpeVocab::from_dir(&ckpt.dir, Some(hp.vocab_size))?;
    let entries: Vec<(String, String)> = ckpt
        .model
        .names()
        .filter_map(|n| n.strip_prefix("lfm.").map(|h| (n.to_owned(), h.to_owned())))
        .collect();
    if entries.is_empty() {
        return Err(ConvertError::BadTensor {
            file: ckpt.model.path().to_path_buf(),
            tensor: "lfm.*".into(),
            reason: "the checkpoint has no backbone tensors".into(),
        });
    }
    let plan = plan_lfm2(&ckpt.model, &entries, ty)?;
    let mut md = GgufMetadata::new();
    general_keys(&mut md, model_name, &plan)?;
    hp.write_keys(&mut md, ty)?;
    md.insert(K::GENERAL_QUANTIZATION_VERSION, QUANTIZATION_VERSION)?;
    vocab.write_keys(&mut md, "lfm2")?;
    finish_keys(&mut md, ty)?;
    write_gguf(out, &md, plan, progress)
}
