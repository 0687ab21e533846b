//! Encoder + adapter part of the converter: the `mmproj-*.gguf` file.
//!
//! Writes what llama.cpp's `convert_hf_to_gguf.py --mmproj` writes for an LFM2-Audio checkpoint
//! (its `LFM2AudioModel` / `ConformerAudioModel` / `MmprojModel` classes):
//!
//! * metadata: `general.architecture = clip`, `general.type = mmproj`, `general.name`,
//!   `general.size_label`, `general.file_type`, `clip.has_audio_encoder`,
//!   `clip.audio.{projection_dim, embedding_length, feed_forward_length, block_count,
//!   head_count, num_mel_bins, attention.layer_norm_epsilon}`, `clip.projector_type = lfm2a`,
//!   `general.quantization_version`. Note the converter writes `feed_forward_length = d_model`
//!   (not the FFN width): readers take the FFN width from the tensor shapes.
//! * every checkpoint tensor except the backbone (`lfm.`), the depthformer (`depthformer`,
//!   `depth_embeddings`, `depth_linear`), `codebook_offsets` and `audio_loss_weights`, renamed to
//!   llama.cpp's names (`a.conv1d.N`, `a.pre_encode.out`, `a.blk.N.*`, `mm.a.mlp.N`, and the
//!   audio-code embedding as `a.position_embd`, `a.position_embd_norm`, `a.embd_to_logits`);
//! * each conformer layer's BatchNorm folded (eps 1e-5) into a per-channel scale and shift,
//!   `a.blk.N.conv_norm.{weight,bias}` = `w / sqrt(var + eps)`, `b - mean * scale`;
//! * the subsampling conv biases reshaped to `[C, 1, 1]`, the depthwise and pointwise conv
//!   weights of the conformer conv module squeezed to 2-d;
//! * types: every tensor whose Hugging Face name contains `.conv` (all convolutions and their
//!   biases, the pointwise convs included), 1-d tensors, `*_norm.weight`, `a.position_embd.weight`
//!   and every tensor not named `*.weight` (biases, `pos_bias_u/v`) are F32; the remaining
//!   matrices take the output type (a row length that is not a whole number of quantization
//!   blocks falls back to F16, as gguf-py does).
//!
//! Q4_0 is not an output type of `convert_hf_to_gguf.py`; here it follows the same rules as Q8_0.
//! Shapes are written in ggml order (PyTorch order reversed).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{ConvertError, HfCheckpoint, Progress, Quant, Result};
use crate::safetensors::Dtype;
use audio_engine::ggml::dtype::{self, GgmlType};
use audio_engine::ggml::gguf::{GgufWriter, TensorData};
use audio_engine::ggml::quant;
use audio_engine::lfm2_audio::internals::gguf_keys as K;

/// BatchNorm epsilon the converter folds with (PyTorch's default, which liquid-audio uses).
const BATCH_NORM_EPS: f32 = 1e-5;
/// `clip.audio.attention.layer_norm_epsilon` as the converter writes it.
const LAYER_NORM_EPS: f32 = 1e-5;

/// Encoder hyperparameters read from `config.json`.
struct MmprojParams {
    d_model: u64,
    n_layers: u64,
    n_heads: u64,
    feat_in: u64,
    n_embd_text: u64,
}

fn read_params(ckpt: &HfCheckpoint) -> Result<MmprojParams> {
    let file = ckpt.dir.join("config.json");
    let bad = |reason: String| ConvertError::BadConfig {
        file: file.clone(),
        reason,
    };
    let enc = ckpt
        .config
        .get("encoder")
        .and_then(|v| v.as_object())
        .ok_or_else(|| bad("missing object 'encoder'".into()))?;
    let get = |key: &str| -> Result<u64> {
        enc.get(key)
            .and_then(|v| v.as_u64())
            .filter(|&v| v > 0)
            .ok_or_else(|| bad(format!("'encoder.{key}' must be a positive integer")))
    };
    // why: the converter merges the `lfm` block over the top level ("text_config") and reads
    // `hidden_size`, falling back to `n_embd`.
    let text = ckpt.config.get("lfm");
    let n_embd_text = ["hidden_size", "n_embd"]
        .iter()
        .find_map(|k| {
            text.and_then(|t| t.get(*k))
                .or_else(|| ckpt.config.get(*k))
                .and_then(|v| v.as_u64())
        })
        .filter(|&v| v > 0)
        .ok_or_else(|| bad("missing 'lfm.hidden_size' (the backbone width)".into()))?;
    Ok(MmprojParams {
        d_model: get("d_model")?,
        n_layers: get("n_layers")?,
        n_heads: get("n_heads")?,
        feat_in: get("feat_in")?,
        n_embd_text,
    })
}

/// Whether the Hugging Face tensor `name` stays out of the mmproj file.
fn skipped(name: &str) -> bool {
    name.starts_with("lfm.")
        || name.contains("language_model.")
        || name.contains("audio_loss_weight")
        || [
            "codebook_offsets",
            "depth_embeddings",
            "depth_linear",
            "depthformer",
        ]
        .iter()
        .any(|p| name.contains(p))
}

/// The GGUF name of a (non-BatchNorm) Hugging Face tensor, or `None` if it has none.
fn gguf_name(name: &str) -> Option<String> {
    let (stem, suffix) = match name.rsplit_once('.') {
        Some((s, x @ ("weight" | "bias"))) => (s, format!(".{x}")),
        _ => (name, String::new()),
    };
    let mapped = if let Some(rest) = stem.strip_prefix("conformer.layers.") {
        let (bid, part) = rest.split_once('.')?;
        let bid: u32 = bid.parse().ok()?;
        let gg = match part {
            "norm_feed_forward1" => "ffn_norm",
            "feed_forward1.linear1" => "ffn_up",
            "feed_forward1.linear2" => "ffn_down",
            "norm_feed_forward2" => "ffn_norm_1",
            "feed_forward2.linear1" => "ffn_up_1",
            "feed_forward2.linear2" => "ffn_down_1",
            "norm_self_att" => "ln1",
            "self_attn.linear_q" => "attn_q",
            "self_attn.linear_k" => "attn_k",
            "self_attn.linear_v" => "attn_v",
            "self_attn.linear_out" => "attn_out",
            "self_attn.linear_pos" => "linear_pos",
            "norm_conv" => "norm_conv",
            "conv.pointwise_conv1" => "conv_pw1",
            "conv.depthwise_conv" => "conv_dw",
            "conv.pointwise_conv2" => "conv_pw2",
            "norm_out" => "ln2",
            // the bias parameters have no `.weight`/`.bias` suffix
            "self_attn.pos_bias_u" if suffix.is_empty() => "pos_bias_u",
            "self_attn.pos_bias_v" if suffix.is_empty() => "pos_bias_v",
            _ => return None,
        };
        format!("a.blk.{bid}.{gg}")
    } else if let Some(i) = stem.strip_prefix("conformer.pre_encode.conv.") {
        format!("a.conv1d.{}", i.parse::<u32>().ok()?)
    } else if let Some(i) = stem.strip_prefix("audio_adapter.model.") {
        format!("mm.a.mlp.{}", i.parse::<u32>().ok()?)
    } else {
        match stem {
            "conformer.pre_encode.out" => "a.pre_encode.out".to_owned(),
            "audio_embedding.embedding" => "a.position_embd".to_owned(),
            "audio_embedding.embedding_norm" => "a.position_embd_norm".to_owned(),
            "audio_embedding.to_logits" => "a.embd_to_logits".to_owned(),
            _ => return None,
        }
    };
    Some(mapped + &suffix)
}

/// The output type of a tensor, as the converter decides it (`hf` the Hugging Face name, `gg`
/// the GGUF name, `ne0` the row length).
fn tensor_type(hf: &str, gg: &str, n_dims: usize, ne0: u64, ty: Quant) -> GgmlType {
    // ConformerAudioModel.tensor_force_quant: `".conv" in name or "_conv" in name and ".weight"
    // in name` (Python precedence), for audio tensors.
    let is_audio = [
        "audio",
        "codebook",
        "conformer",
        "depth_embedding",
        "depthformer",
        "depth_linear",
    ]
    .iter()
    .any(|p| hf.contains(p));
    if is_audio && (hf.contains(".conv") || (hf.contains("_conv") && hf.contains(".weight"))) {
        return GgmlType::F32;
    }
    if n_dims <= 1
        || gg.ends_with("_norm.weight")
        || gg == "a.position_embd.weight"
        || !gg.ends_with(".weight")
    {
        return GgmlType::F32;
    }
    let want = match ty {
        Quant::F32 => GgmlType::F32,
        Quant::F16 => GgmlType::F16,
        Quant::Q8_0 => GgmlType::Q8_0,
        Quant::Q4_0 => GgmlType::Q4_0,
    };
    if ne0 % want.block_size() as u64 != 0 {
        // gguf-py's QuantError fallback
        return GgmlType::F16;
    }
    want
}

/// `general.file_type` (llama_ftype) of an output type.
fn file_type(ty: Quant) -> u32 {
    match ty {
        Quant::F32 => 0,
        Quant::F16 => 1,
        Quant::Q4_0 => 2,
        Quant::Q8_0 => 7,
    }
}

/// Where a planned tensor's values come from.
enum Source {
    /// A checkpoint tensor, as stored (reshaped only).
    Tensor(String),
    /// Values computed at planning time (the folded BatchNorm).
    Values(Vec<f32>),
}

struct Planned {
    name: String,
    ty: GgmlType,
    /// ggml order.
    shape: Vec<u64>,
    source: Source,
}

fn bad_tensor(file: &Path, tensor: &str, reason: impl Into<String>) -> ConvertError {
    ConvertError::BadTensor {
        file: file.to_path_buf(),
        tensor: tensor.to_owned(),
        reason: reason.into(),
    }
}

/// Folds one layer's BatchNorm into `(scale, shift)`, computed in f32 as the converter does.
fn fold_batch_norm(
    ckpt: &HfCheckpoint,
    prefix: &str,
    width: usize,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let file = ckpt.model.path();
    let get = |part: &str| -> Result<Vec<f32>> {
        let name = format!("{prefix}.{part}");
        if !ckpt.model.contains(&name) {
            return Err(bad_tensor(
                file,
                &name,
                "missing (needed to fold the BatchNorm)",
            ));
        }
        let v = ckpt.model.f32(&name)?;
        if v.len() != width {
            return Err(bad_tensor(
                file,
                &name,
                format!("has {} elements, expected {width}", v.len()),
            ));
        }
        Ok(v)
    };
    let (w, b) = (get("weight")?, get("bias")?);
    let (mean, var) = (get("running_mean")?, get("running_var")?);
    let scale: Vec<f32> = w
        .iter()
        .zip(&var)
        .map(|(&w, &v)| w / (v + BATCH_NORM_EPS).sqrt())
        .collect();
    let shift = b
        .iter()
        .zip(&mean)
        .zip(&scale)
        .map(|((&b, &m), &a)| b - m * a)
        .collect();
    Ok((scale, shift))
}

/// Lists the tensors to write, in checkpoint (sorted-name) order, with their types and shapes.
fn plan(ckpt: &HfCheckpoint, ty: Quant, p: &MmprojParams) -> Result<Vec<Planned>> {
    let file = ckpt.model.path().to_path_buf();
    let names: Vec<String> = ckpt
        .model
        .names()
        .filter(|n| !skipped(n))
        .map(str::to_owned)
        .collect();
    // why: the converter emits the folded pair when the last BatchNorm tensor of a layer arrives.
    let mut last_bn: BTreeMap<String, usize> = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some((prefix, _)) = n.rsplit_once('.').filter(|_| n.contains("batch_norm")) {
            last_bn.insert(prefix.to_owned(), i);
        }
    }
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if name.contains("batch_norm") {
            let Some((prefix, _)) = name.rsplit_once('.') else {
                continue;
            };
            if last_bn.get(prefix) != Some(&i) {
                continue;
            }
            let bid = prefix
                .strip_prefix("conformer.layers.")
                .and_then(|r| r.split_once('.'))
                .filter(|(_, rest)| *rest == "conv.batch_norm")
                .and_then(|(b, _)| b.parse::<u32>().ok())
                .ok_or_else(|| bad_tensor(&file, name, "unexpected BatchNorm tensor"))?;
            let (scale, shift) = fold_batch_norm(ckpt, prefix, p.d_model as usize)?;
            for (part, values) in [("weight", scale), ("bias", shift)] {
                out.push(Planned {
                    name: format!("a.blk.{bid}.conv_norm.{part}"),
                    ty: GgmlType::F32,
                    shape: vec![values.len() as u64],
                    source: Source::Values(values),
                });
            }
            continue;
        }
        let gg = gguf_name(name)
            .ok_or_else(|| bad_tensor(&file, name, "no mmproj (GGUF) name for this tensor"))?;
        let view = ckpt.model.tensor(name)?;
        if !matches!(view.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return Err(bad_tensor(
                &file,
                name,
                format!("dtype {} is not a float type", view.dtype.as_str()),
            ));
        }
        let mut shape: Vec<usize> = view.shape.to_vec();
        if name.starts_with("conformer.pre_encode.conv.") && name.ends_with(".bias") {
            shape.extend([1, 1]);
        }
        let squeeze = |shape: &mut Vec<usize>, axis: usize| -> Result<()> {
            if shape.len() != 3 || shape[axis] != 1 {
                return Err(bad_tensor(
                    &file,
                    name,
                    format!("shape {shape:?} is not a 3-d kernel with size 1 on axis {axis}"),
                ));
            }
            shape.remove(axis);
            Ok(())
        };
        if name.contains("conv.depthwise_conv") && name.ends_with(".weight") {
            squeeze(&mut shape, 1)?;
        }
        if name.contains("conv.pointwise_conv") && name.ends_with(".weight") {
            squeeze(&mut shape, 2)?;
        }
        if shape.is_empty() || shape.len() > 4 {
            return Err(bad_tensor(
                &file,
                name,
                format!("shape {shape:?} has no GGUF form"),
            ));
        }
        let ggml_shape: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
        let ty = tensor_type(name, &gg, shape.len(), ggml_shape[0], ty);
        out.push(Planned {
            name: gg,
            ty,
            shape: ggml_shape,
            source: Source::Tensor(name.clone()),
        });
    }
    let n_conv_norm = out
        .iter()
        .filter(|t| t.name.ends_with(".conv_norm.weight"))
        .count() as u64;
    if n_conv_norm != p.n_layers {
        return Err(ConvertError::BadTensor {
            file,
            tensor: "conformer.layers.*.conv.batch_norm".into(),
            reason: format!(
                "{n_conv_norm} BatchNorm layers found, config.json says {} layers",
                p.n_layers
            ),
        });
    }
    Ok(out)
}

/// Converts f32 values to the bytes of `ty` (rows of `ne0`).
fn encode(values: &[f32], ty: GgmlType, ne0: usize) -> io::Result<Vec<u8>> {
    let err = |e: String| io::Error::other(e);
    match ty {
        GgmlType::F32 => Ok(dtype::f32_to_le_bytes(values)),
        GgmlType::F16 => {
            let mut b = vec![0u8; values.len() * 2];
            dtype::f32_to_f16_bytes(values, &mut b).map_err(|e| err(e.to_string()))?;
            Ok(b)
        }
        _ => quant::quantize(ty, values, ne0).map_err(|e| err(e.to_string())),
    }
}

/// Writes the mmproj GGUF of `ckpt` to `out` (atomically), matrices in `ty`.
///
/// Fails with [`ConvertError::BadConfig`] when `config.json` lacks an encoder field and with
/// [`ConvertError::BadTensor`] (naming `model.safetensors` and the tensor) when a tensor the
/// converter needs is missing, misshapen, not a float type or has no mmproj name.
pub fn convert_mmproj(
    ckpt: &HfCheckpoint,
    out: &Path,
    model_name: &str,
    ty: Quant,
    progress: &mut dyn Progress,
) -> Result<()> {
    let p = read_params(ckpt)?;
    let planned = plan(ckpt, ty, &p)?;
    let total_params: u64 = planned
        .iter()
        .map(|t| t.shape.iter().product::<u64>())
        .sum();
    // why: declared before the writer, whose deferred tensor callbacks borrow them.
    let out_path: PathBuf = out.to_path_buf();
    let progress = RefCell::new(progress);
    let model = &ckpt.model;

    let mut w = GgufWriter::new();
    w.add_kv(K::GENERAL_ARCHITECTURE, "clip")?;
    w.add_kv(K::GENERAL_TYPE, "mmproj")?;
    w.add_kv(K::GENERAL_NAME, model_name)?;
    w.add_kv(
        K::GENERAL_SIZE_LABEL,
        super::write::size_label(total_params),
    )?;
    w.add_kv(K::GENERAL_FILE_TYPE, file_type(ty))?;
    w.add_kv(K::CLIP_HAS_AUDIO_ENCODER, true)?;
    let u32_of = |key: &str, v: u64| -> Result<u32> {
        u32::try_from(v).map_err(|_| ConvertError::BadConfig {
            file: ckpt.dir.join("config.json"),
            reason: format!("{key} = {v} does not fit in u32"),
        })
    };
    w.add_kv(
        K::CLIP_AUDIO_PROJECTION_DIM,
        u32_of("lfm.hidden_size", p.n_embd_text)?,
    )?;
    w.add_kv(
        K::CLIP_AUDIO_EMBEDDING_LENGTH,
        u32_of("encoder.d_model", p.d_model)?,
    )?;
    // why: LFM2AudioModel sets `intermediate_size = d_model` before the base class writes it.
    w.add_kv(
        K::CLIP_AUDIO_FEED_FORWARD_LENGTH,
        u32_of("encoder.d_model", p.d_model)?,
    )?;
    w.add_kv(
        K::CLIP_AUDIO_BLOCK_COUNT,
        u32_of("encoder.n_layers", p.n_layers)?,
    )?;
    w.add_kv(
        K::CLIP_AUDIO_HEAD_COUNT,
        u32_of("encoder.n_heads", p.n_heads)?,
    )?;
    w.add_kv(K::CLIP_PROJECTOR_TYPE, "lfm2a")?;
    w.add_kv(
        K::CLIP_AUDIO_NUM_MEL_BINS,
        u32_of("encoder.feat_in", p.feat_in)?,
    )?;
    w.add_kv(K::CLIP_AUDIO_LAYER_NORM_EPS, LAYER_NORM_EPS)?;
    w.add_kv(K::GENERAL_QUANTIZATION_VERSION, 2u32)?;

    let total = planned.len();
    for (i, t) in planned.into_iter().enumerate() {
        let (name, ty, ne0) = (t.name.clone(), t.ty, t.shape[0] as usize);
        let progress = &progress;
        let out_path = &out_path;
        let data = TensorData::deferred(move |sink: &mut dyn Write| {
            let values = match t.source {
                Source::Values(v) => v,
                Source::Tensor(hf) => model
                    .f32(&hf)
                    .map_err(|e| io::Error::other(e.to_string()))?,
            };
            sink.write_all(&encode(&values, ty, ne0)?)?;
            progress.borrow_mut().tensor(out_path, &name, i + 1, total);
            Ok(())
        });
        w.add_tensor(t.name, t.ty, &t.shape, data)?;
    }
    w.write_to_path(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_llama_cpp() {
        let cases = [
            (
                "conformer.layers.3.self_attn.pos_bias_u",
                "a.blk.3.pos_bias_u",
            ),
            (
                "conformer.layers.0.norm_self_att.weight",
                "a.blk.0.ln1.weight",
            ),
            ("conformer.layers.10.norm_out.bias", "a.blk.10.ln2.bias"),
            (
                "conformer.layers.1.conv.depthwise_conv.weight",
                "a.blk.1.conv_dw.weight",
            ),
            ("conformer.pre_encode.conv.5.bias", "a.conv1d.5.bias"),
            ("conformer.pre_encode.out.weight", "a.pre_encode.out.weight"),
            ("audio_adapter.model.3.weight", "mm.a.mlp.3.weight"),
            ("audio_embedding.embedding.weight", "a.position_embd.weight"),
        ];
        for (hf, gg) in cases {
            assert_eq!(gguf_name(hf).as_deref(), Some(gg), "{hf}");
        }
        assert_eq!(gguf_name("conformer.layers.0.self_attn.bogus.weight"), None);
    }

    #[test]
    fn types_follow_the_converter() {
        let t = |hf, gg, n, ne0| tensor_type(hf, gg, n, ne0, Quant::Q8_0);
        assert_eq!(
            t(
                "conformer.layers.0.conv.pointwise_conv1.weight",
                "a.blk.0.conv_pw1.weight",
                2,
                512
            ),
            GgmlType::F32
        );
        assert_eq!(
            t(
                "conformer.layers.0.self_attn.linear_q.weight",
                "a.blk.0.attn_q.weight",
                2,
                512
            ),
            GgmlType::Q8_0
        );
        assert_eq!(
            t(
                "conformer.layers.0.self_attn.linear_q.weight",
                "a.blk.0.attn_q.weight",
                2,
                48
            ),
            GgmlType::F16
        );
        assert_eq!(
            t(
                "conformer.layers.0.self_attn.pos_bias_u",
                "a.blk.0.pos_bias_u",
                2,
                64
            ),
            GgmlType::F32
        );
        assert_eq!(
            t(
                "audio_embedding.embedding.weight",
                "a.position_embd.weight",
                2,
                2048
            ),
            GgmlType::F32
        );
        assert_eq!(
            t(
                "audio_embedding.to_logits.weight",
                "a.embd_to_logits.weight",
                2,
                2048
            ),
            GgmlType::Q8_0
        );
    }
}
