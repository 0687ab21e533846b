//! Per-tensor type choice and encoding, as llama.cpp's converters and `llama-quantize` do it.
//!
//! Three tools decide types in a published package:
//! - `convert_hf_to_gguf.py` ([`hf_converter_type`]): 1-D tensors, `*_norm.weight`, the short-conv
//!   kernels and anything not ending in `.weight` are F32; the rest take the output type.
//! - `llama-quantize` ([`llama_quantize_type`], pinned `src/llama-quant.cpp`): re-encodes the F16
//!   file's quantizable matrices; a tied `token_embd` takes Q6_K unless the file is Q8_0, and a
//!   type whose block does not divide the row falls back (Q6_K to Q8_0, a 32-block type to F16).
//! - `convert_vocoder_to_gguf.py` ([`vocoder_type`]): 1-D tensors and biases F32, the rest the
//!   output type, F16 when a row is not a whole number of blocks.
//!
//! Encoding goes through ggml's own quantizers (`ggml_quantize_chunk`), so the bytes are what
//! the C tools write.

use audio_engine::ggml::dtype::{f16_to_f32, f32_to_f16};
use audio_engine::ggml::{quant, GgmlError, GgmlType};

use super::Quant;

/// Whether a row of `n_per_row` values is a whole number of `ty` blocks.
pub fn row_fits(ty: GgmlType, n_per_row: u64) -> bool {
    let b = ty.block_size() as u64;
    b != 0 && n_per_row % b == 0
}

/// The type `convert_hf_to_gguf.py` gives tensor `name` (its GGUF name) with `n_dims` dimensions
/// when asked for `outtype` (F32 or F16; the quantized packages start from the F16 file).
pub fn hf_converter_type(name: &str, n_dims: usize, outtype: Quant) -> GgmlType {
    let keep_f32 = n_dims <= 1
        || name.ends_with("_norm.weight")
        || name.contains("shortconv.conv.")
        || !name.ends_with(".weight");
    if keep_f32 || outtype == Quant::F32 {
        GgmlType::F32
    } else {
        GgmlType::F16
    }
}

/// Whether `llama-quantize` re-encodes tensor `name` with `n_dims` dimensions
/// (`tensor_allows_quantization` for the tensors an LFM2 file holds).
pub fn llama_quantize_allows(name: &str, n_dims: usize) -> bool {
    n_dims >= 2
        && name.ends_with("weight")
        && !name.contains("_norm.weight")
        && !name.contains("ffn_gate_inp.weight")
        && !name.contains("shortconv.conv.weight")
        && !name.contains("ssm_conv1d")
        && !name.contains(".position_embd")
        && name != "position_embd.weight"
        && name != "token_types.weight"
}

/// The type `llama-quantize <in> <out> Q8_0|Q4_0` gives tensor `name` (ggml `shape`, stored as
/// `input` in the F16 file); `tied` says the file has no `output.weight`.
pub fn llama_quantize_type(
    name: &str,
    shape: &[u64],
    input: GgmlType,
    ftype: Quant,
    tied: bool,
) -> GgmlType {
    if !ftype.is_quantized() || !llama_quantize_allows(name, shape.len()) {
        return input;
    }
    let ncols = shape.first().copied().unwrap_or(0);
    let default = ftype.matrix_type();
    let is_output = name == "output.weight" || (tied && name == "token_embd.weight");
    let mut ty = default;
    if is_output {
        // llama_tensor_get_type_impl: the output (or tied embedding) keeps more bits.
        ty = if !row_fits(default, ncols) {
            GgmlType::Q8_0
        } else if default != GgmlType::Q8_0 {
            GgmlType::Q6_K
        } else {
            default
        };
    }
    // tensor_type_fallback: a 256-block type falls back to a 32-block one, then to F16.
    if !row_fits(ty, ncols) {
        if ty == GgmlType::Q6_K {
            ty = GgmlType::Q8_0;
        }
        if !row_fits(ty, ncols) {
            ty = GgmlType::F16;
        }
    }
    ty
}

/// The type `convert_vocoder_to_gguf.py --outtype <ty>` gives tensor `name` with ggml `shape`.
pub fn vocoder_type(name: &str, shape: &[u64], ty: Quant) -> GgmlType {
    let can_quantize = shape.len() > 1 && !name.contains(".bias") && !name.contains(".conv.weight");
    if !can_quantize {
        return GgmlType::F32;
    }
    let t = ty.matrix_type();
    // gguf-py's quantizer raises on a partial block; the script then writes F16.
    if row_fits(t, shape.first().copied().unwrap_or(0)) {
        t
    } else {
        GgmlType::F16
    }
}

/// Rounds every value to F16 and back, as reading the F16 file does for `llama-quantize`.
pub fn round_through_f16(values: &mut [f32]) {
    for v in values {
        *v = f16_to_f32(f32_to_f16(*v));
    }
}

/// Encodes `values` (rows of `n_per_row`) as `ty`: little-endian F32, F16 (round to nearest even),
/// or ggml's quantizer for the block types.
pub fn encode(ty: GgmlType, values: &[f32], n_per_row: usize) -> Result<Vec<u8>, GgmlError> {
    match ty {
        GgmlType::F32 => Ok(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        GgmlType::F16 => Ok(values
            .iter()
            .flat_map(|v| f32_to_f16(*v).to_le_bytes())
            .collect()),
        _ => quant::quantize(ty, values, n_per_row),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tied_embedding_takes_q6_k_only_for_q4_0() {
        let s = [256u64, 100];
        let f16 = GgmlType::F16;
        assert_eq!(
            llama_quantize_type("token_embd.weight", &s, f16, Quant::Q4_0, true),
            GgmlType::Q6_K
        );
        assert_eq!(
            llama_quantize_type("token_embd.weight", &s, f16, Quant::Q8_0, true),
            GgmlType::Q8_0
        );
        assert_eq!(
            llama_quantize_type("token_embd.weight", &s, f16, Quant::Q4_0, false),
            GgmlType::Q4_0
        );
        // 64 columns: Q6_K does not fit, Q8_0 does.
        assert_eq!(
            llama_quantize_type("token_embd.weight", &[64, 10], f16, Quant::Q4_0, true),
            GgmlType::Q8_0
        );
        // 48 columns: no block type fits.
        assert_eq!(
            llama_quantize_type("blk.0.ffn_up.weight", &[48, 10], f16, Quant::Q4_0, true),
            GgmlType::F16
        );
        assert_eq!(
            llama_quantize_type(
                "blk.0.attn_norm.weight",
                &[64],
                GgmlType::F32,
                Quant::Q4_0,
                true
            ),
            GgmlType::F32
        );
        assert_eq!(
            llama_quantize_type(
                "blk.0.shortconv.conv.weight",
                &[3, 64],
                GgmlType::F32,
                Quant::Q4_0,
                true
            ),
            GgmlType::F32
        );
        assert_eq!(
            llama_quantize_type("dense_2.bias", &[18], GgmlType::F32, Quant::Q4_0, true),
            GgmlType::F32
        );
    }
}
