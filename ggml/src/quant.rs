//! Quantization and dequantization through ggml, and ggml's view of each element type.

use std::ffi::CStr;

use ggml_sys as sys;

use super::dtype::GgmlType;
use super::error::{GgmlError, Result};

/// What ggml itself reports about an element type (`ggml_get_type_traits` and friends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeTraits {
    /// ggml's name (`ggml_type_name`).
    pub name: String,
    /// Elements per block (`ggml_blck_size`).
    pub block_size: usize,
    /// Bytes per block (`ggml_type_size`).
    pub type_size: usize,
    /// `ggml_is_quantized`.
    pub is_quantized: bool,
    /// Whether ggml can convert the type to `f32` (`to_float`).
    pub can_dequantize: bool,
    /// Whether [`quantize`] accepts the type.
    pub can_quantize: bool,
    /// Whether quantizing needs an importance matrix (`ggml_quantize_requires_imatrix`).
    pub requires_imatrix: bool,
}

fn traits(ty: GgmlType) -> &'static sys::ggml_type_traits {
    // SAFETY: every `GgmlType` is a valid index below GGML_TYPE_COUNT.
    let p = unsafe { sys::ggml_get_type_traits(ty as u32) };
    // SAFETY: `p` points into ggml's static, immutable type table (never null, never freed).
    unsafe { &*p }
}

fn cpu_traits(ty: GgmlType) -> &'static sys::ggml_type_traits_cpu {
    // SAFETY: every `GgmlType` is a valid index below GGML_TYPE_COUNT.
    let p = unsafe { sys::ggml_get_type_traits_cpu(ty as u32) };
    // SAFETY: `p` points into the CPU backend's static, immutable table.
    unsafe { &*p }
}

/// ggml's own traits of `ty`.
pub fn type_traits(ty: GgmlType) -> TypeTraits {
    let t = traits(ty);
    let name = if t.type_name.is_null() {
        String::new()
    } else {
        // SAFETY: type names are static NUL-terminated strings.
        unsafe { CStr::from_ptr(t.type_name) }
            .to_string_lossy()
            .into_owned()
    };
    // SAFETY: a pure function of the type id.
    let block_size = unsafe { sys::ggml_blck_size(ty as u32) };
    // SAFETY: a pure function of the type id.
    let type_size = unsafe { sys::ggml_type_size(ty as u32) };
    // SAFETY: a pure function of the type id.
    let is_quantized = unsafe { sys::ggml_is_quantized(ty as u32) };
    TypeTraits {
        name,
        block_size: usize::try_from(block_size).unwrap_or(0),
        type_size,
        is_quantized,
        can_dequantize: t.to_float.is_some() || ty == GgmlType::F32,
        can_quantize: QUANTIZABLE.contains(&ty),
        requires_imatrix: requires_imatrix(ty),
    }
}

/// Whether ggml can convert `ty` to `f32` (`to_float`).
pub(crate) fn can_dequantize(ty: GgmlType) -> bool {
    traits(ty).to_float.is_some()
}

/// The type the CPU backend converts the second operand of a `mul_mat` with a first operand of
/// type `ty` to, if it has a dot-product kernel for `ty`.
pub fn cpu_vec_dot_type(ty: GgmlType) -> Option<GgmlType> {
    let t = cpu_traits(ty);
    t.vec_dot?;
    GgmlType::from_u32(t.vec_dot_type)
}

/// Whether the CPU backend can convert `f32` rows to `ty` (`from_float`).
pub(crate) fn cpu_can_quantize(ty: GgmlType) -> bool {
    cpu_traits(ty).from_float.is_some()
}

/// Types [`quantize`] supports (`ggml_quantize_chunk`).
const QUANTIZABLE: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q1_0,
    GgmlType::Q2_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ2_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// Whether quantizing to `ty` needs an importance matrix.
pub fn requires_imatrix(ty: GgmlType) -> bool {
    // SAFETY: a pure function of the type id.
    unsafe { sys::ggml_quantize_requires_imatrix(ty as u32) }
}

/// Quantizes rows of `n_per_row` values of `src` to `ty` with ggml's quantizers.
pub fn quantize(ty: GgmlType, src: &[f32], n_per_row: usize) -> Result<Vec<u8>> {
    quantize_with_imatrix(ty, src, n_per_row, None)
}

/// Quantizes rows of `n_per_row` values of `src` to `ty`, weighting each column's error by
/// `imatrix` (one weight per column) when given.
pub fn quantize_with_imatrix(
    ty: GgmlType,
    src: &[f32],
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> Result<Vec<u8>> {
    const OP: &str = "quantize";
    if !QUANTIZABLE.contains(&ty) {
        return Err(GgmlError::ty(OP, ty, "ggml has no quantizer for this type"));
    }
    let whole_rows = src.len().checked_div(n_per_row).map(|r| r * n_per_row);
    if whole_rows != Some(src.len()) {
        return Err(GgmlError::shape(
            OP,
            format!("{} values do not split into rows of {n_per_row}", src.len()),
        ));
    }
    let row_size = ty.row_size(n_per_row as u64)?;
    // Some of ggml's quantizers (the grid searches of the i-quants) abort on NaN or infinity.
    if ty.is_quantized() && src.iter().any(|v| !v.is_finite()) {
        return Err(GgmlError::arg(OP, "values must be finite"));
    }
    if let Some(w) = imatrix {
        if w.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(GgmlError::arg(
                OP,
                "importance weights must be finite and >= 0",
            ));
        }
    }
    match imatrix {
        Some(w) if w.len() != n_per_row => {
            return Err(GgmlError::shape(
                OP,
                format!(
                    "importance matrix has {} weights for rows of {n_per_row}",
                    w.len()
                ),
            ));
        }
        None if requires_imatrix(ty) => {
            return Err(GgmlError::arg(
                OP,
                format!("{ty} needs an importance matrix"),
            ));
        }
        _ => {}
    }
    let nrows = src.len() / n_per_row;
    let total = row_size
        .checked_mul(nrows)
        .ok_or_else(|| GgmlError::arg(OP, "output size overflows"))?;
    let mut out = vec![0u8; total];
    if nrows == 0 {
        return Ok(out);
    }
    let (nrows_i, n_i) = (nrows as i64, n_per_row as i64);
    let imat = imatrix.map_or(std::ptr::null(), |w| w.as_ptr());
    // SAFETY: `src` holds `nrows * n_per_row` values, `out` holds `nrows` rows of `row_size`
    // bytes, `n_per_row` is a whole number of blocks (`row_size` succeeded), start 0 satisfies
    // the start asserts, the type has a quantizer, and the importance matrix is present with
    // `n_per_row` weights when the type needs it.
    let written = unsafe {
        sys::ggml_quantize_chunk(
            ty as u32,
            src.as_ptr(),
            out.as_mut_ptr().cast(),
            0,
            nrows_i,
            n_i,
            imat,
        )
    };
    debug_assert_eq!(written, total);
    Ok(out)
}

/// Dequantizes `n` values of type `ty` from `src` (exactly `ty.row_size(n)` bytes).
pub fn dequantize(ty: GgmlType, src: &[u8], n: usize) -> Result<Vec<f32>> {
    const OP: &str = "dequantize";
    let need = ty.row_size(n as u64)?;
    if src.len() != need {
        return Err(GgmlError::shape(
            OP,
            format!("{n} values of {ty} take {need} bytes, got {}", src.len()),
        ));
    }
    let mut out = vec![0f32; n];
    if ty == GgmlType::F32 {
        for (o, c) in out.iter_mut().zip(src.chunks_exact(4)) {
            *o = f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
        }
        return Ok(out);
    }
    let Some(to_float) = traits(ty).to_float else {
        return Err(GgmlError::ty(
            OP,
            ty,
            "ggml cannot convert this type to f32",
        ));
    };
    if n > 0 {
        // SAFETY: `src` holds exactly the bytes of `n` values (a whole number of blocks) and
        // `out` has room for `n` floats; `to_float` is ggml's converter for this type.
        unsafe { to_float(src.as_ptr().cast(), out.as_mut_ptr(), n as i64) };
    }
    Ok(out)
}

/// Whether `data` is valid row data of type `ty` (no NaN/Inf scales, whole blocks), as ggml
/// checks when loading models (`ggml_validate_row_data`).
pub fn validate_row_data(ty: GgmlType, data: &[u8]) -> bool {
    let ts = ty.type_size();
    if data.len() / ts * ts != data.len() {
        return false;
    }
    // SAFETY: `data` is valid for `len` reads and a whole number of blocks.
    unsafe { sys::ggml_validate_row_data(ty as u32, data.as_ptr().cast(), data.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ggml_type_sizes_match_dtype() {
        for &ty in GgmlType::ALL {
            let t = type_traits(ty);
            assert_eq!(t.block_size, ty.block_size(), "block size of {ty}");
            assert_eq!(t.type_size, ty.type_size(), "type size of {ty}");
            assert_eq!(t.is_quantized, ty.is_quantized(), "is_quantized of {ty}");
            assert_eq!(t.name, ty.name(), "name of {ty}");
        }
    }
}
