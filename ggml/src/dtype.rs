//! ggml tensor element types, their storage geometry, and pure-Rust reference
//! conversions for the formats the engine needs without a ggml context.
//!
//! The numeric ids, names, block sizes and block byte sizes mirror `enum ggml_type`
//! and the `type_traits` table of the vendored ggml, so a [`GgmlType`] can be passed
//! to the C API with `as u32` and a size computed here always agrees with
//! `ggml_row_size`.
//!
//! The quantizers reproduce ggml's *reference* quantizers (`quantize_row_*_ref`)
//! bit for bit, which is what model converters use; the dequantizers match
//! `dequantize_row_*` bit for bit.

use std::fmt;
use std::str::FromStr;

/// Errors about element types and tensor geometry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DtypeError {
    /// A numeric type id that is not (or no longer) a ggml type.
    #[error("unknown ggml type id {0}")]
    UnknownType(u32),
    /// A type name that is not one of ggml's names.
    #[error("unknown ggml type name {0:?}")]
    UnknownTypeName(String),
    /// A row (or buffer) length that does not split into whole blocks.
    #[error(
        "{n_elements} elements of type {ty} are not a multiple of its block size {block_size}"
    )]
    NotBlockMultiple {
        /// The element type.
        ty: GgmlType,
        /// The offending element count.
        n_elements: u64,
        /// The type's block size.
        block_size: usize,
    },
    /// A size that does not fit in `usize`/`u64`.
    #[error("size of a tensor of type {ty} overflows")]
    SizeOverflow {
        /// The element type.
        ty: GgmlType,
    },
    /// Input and output buffers of a conversion disagree in length.
    #[error("{op}: expected {expected} {unit}, got {found}")]
    LengthMismatch {
        /// The conversion that was attempted.
        op: &'static str,
        /// What the other buffer implies.
        expected: usize,
        /// What was supplied.
        found: usize,
        /// "bytes" or "values".
        unit: &'static str,
    },
    /// A conversion this module does not implement.
    #[error("conversion of type {ty} to f32 is not implemented")]
    Unsupported {
        /// The element type.
        ty: GgmlType,
    },
}

/// Result alias for this module.
pub type Result<T, E = DtypeError> = std::result::Result<T, E>;

macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, $blck:expr, $size:expr, $quant:literal; )*) => {
        /// A ggml tensor element type (`enum ggml_type`).
        ///
        /// Discriminants are ggml's ids, so `ty as u32` is the value the C API and
        /// GGUF files use. Ids that ggml removed (4, 5, 31–33, 36–38) have no variant.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        #[non_exhaustive]
        pub enum GgmlType {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl GgmlType {
            /// Every type, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant),*];

            /// The type with ggml id `id`, or `None` for unknown and removed ids.
            pub const fn from_u32(id: u32) -> Option<GgmlType> {
                match id {
                    $( $id => Some(GgmlType::$variant), )*
                    _ => None,
                }
            }

            /// ggml's name for the type (`ggml_type_name`), e.g. `"q8_0"`, `"q6_K"`.
            pub const fn name(self) -> &'static str {
                match self { $( GgmlType::$variant => $name, )* }
            }

            /// Number of elements per block (`ggml_blck_size`); 1 for plain types.
            pub const fn block_size(self) -> usize {
                match self { $( GgmlType::$variant => $blck, )* }
            }

            /// Bytes per block (`ggml_type_size`).
            pub const fn type_size(self) -> usize {
                match self { $( GgmlType::$variant => $size, )* }
            }

            /// Whether ggml flags the type as quantized (`ggml_is_quantized`).
            pub const fn is_quantized(self) -> bool {
                match self { $( GgmlType::$variant => $quant, )* }
            }
        }
    };
}

const QK_K: usize = 256;

ggml_types! {
    /// 32-bit IEEE float.
    F32 = 0, "f32", 1, 4, false;
    /// 16-bit IEEE half float.
    F16 = 1, "f16", 1, 2, false;
    /// 4-bit, blocks of 32 with one f16 scale.
    Q4_0 = 2, "q4_0", 32, 18, true;
    /// 4-bit, blocks of 32 with f16 scale and min.
    Q4_1 = 3, "q4_1", 32, 20, true;
    /// 5-bit, blocks of 32 with one f16 scale.
    Q5_0 = 6, "q5_0", 32, 22, true;
    /// 5-bit, blocks of 32 with f16 scale and min.
    Q5_1 = 7, "q5_1", 32, 24, true;
    /// 8-bit, blocks of 32 with one f16 scale.
    Q8_0 = 8, "q8_0", 32, 34, true;
    /// 8-bit, blocks of 32 with f16 scale and sum (activation format).
    Q8_1 = 9, "q8_1", 32, 36, true;
    /// 2-bit k-quant, super-blocks of 256.
    Q2_K = 10, "q2_K", QK_K, 84, true;
    /// 3-bit k-quant, super-blocks of 256.
    Q3_K = 11, "q3_K", QK_K, 110, true;
    /// 4-bit k-quant, super-blocks of 256.
    Q4_K = 12, "q4_K", QK_K, 144, true;
    /// 5-bit k-quant, super-blocks of 256.
    Q5_K = 13, "q5_K", QK_K, 176, true;
    /// 6-bit k-quant, super-blocks of 256.
    Q6_K = 14, "q6_K", QK_K, 210, true;
    /// 8-bit k-quant (activation format), super-blocks of 256.
    Q8_K = 15, "q8_K", QK_K, 292, true;
    /// 2.06 bpw i-quant.
    IQ2_XXS = 16, "iq2_xxs", QK_K, 66, true;
    /// 2.31 bpw i-quant.
    IQ2_XS = 17, "iq2_xs", QK_K, 74, true;
    /// 3.06 bpw i-quant.
    IQ3_XXS = 18, "iq3_xxs", QK_K, 98, true;
    /// 1.56 bpw i-quant.
    IQ1_S = 19, "iq1_s", QK_K, 50, true;
    /// 4.5 bpw non-linear quant, blocks of 32.
    IQ4_NL = 20, "iq4_nl", 32, 18, true;
    /// 3.44 bpw i-quant.
    IQ3_S = 21, "iq3_s", QK_K, 110, true;
    /// 2.56 bpw i-quant.
    IQ2_S = 22, "iq2_s", QK_K, 82, true;
    /// 4.25 bpw non-linear quant, super-blocks of 256.
    IQ4_XS = 23, "iq4_xs", QK_K, 136, true;
    /// 8-bit signed integer.
    I8 = 24, "i8", 1, 1, false;
    /// 16-bit signed integer.
    I16 = 25, "i16", 1, 2, false;
    /// 32-bit signed integer.
    I32 = 26, "i32", 1, 4, false;
    /// 64-bit signed integer.
    I64 = 27, "i64", 1, 8, false;
    /// 64-bit IEEE float.
    F64 = 28, "f64", 1, 8, false;
    /// 1.75 bpw i-quant.
    IQ1_M = 29, "iq1_m", QK_K, 56, true;
    /// bfloat16.
    BF16 = 30, "bf16", 1, 2, false;
    /// Ternary quant, 1.69 bpw.
    TQ1_0 = 34, "tq1_0", QK_K, 54, true;
    /// Ternary quant, 2.06 bpw.
    TQ2_0 = 35, "tq2_0", QK_K, 66, true;
    /// Microscaling FP4, blocks of 32 with an E8M0 scale.
    MXFP4 = 39, "mxfp4", 32, 17, true;
    /// NVIDIA FP4, blocks of 64 with four E4M3 scales.
    NVFP4 = 40, "nvfp4", 64, 36, true;
    /// 1-bit, blocks of 128 with one f16 scale.
    Q1_0 = 41, "q1_0", 128, 18, true;
    /// 2-bit, blocks of 64 with one f16 scale.
    Q2_0 = 42, "q2_0", 64, 18, true;
}

impl GgmlType {
    /// Bytes needed by `n_elements` consecutive elements (`ggml_row_size`).
    ///
    /// Fails when `n_elements` does not split into whole blocks, because ggml
    /// cannot address a partial block.
    pub fn row_size(self, n_elements: u64) -> Result<usize> {
        let block = self.block_size() as u64;
        let blocks = n_elements / block;
        if blocks * block != n_elements {
            return Err(DtypeError::NotBlockMultiple {
                ty: self,
                n_elements,
                block_size: self.block_size(),
            });
        }
        blocks
            .checked_mul(self.type_size() as u64)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(DtypeError::SizeOverflow { ty: self })
    }

    /// Bytes of a contiguous tensor with ggml shape `ne` (`ne[0]` fastest), as
    /// `ggml_nbytes` computes it. Only `ne[0]` has to be a multiple of the block size.
    pub fn tensor_size(self, ne: &[u64]) -> Result<usize> {
        // A 0-dimensional tensor is a scalar, i.e. one element (GGUF allows n_dims = 0).
        let (&ne0, rest) = ne.split_first().unwrap_or((&1, &[]));
        let row = self.row_size(ne0)?;
        rest.iter()
            .try_fold(row, |acc, &n| {
                usize::try_from(n).ok().and_then(|n| acc.checked_mul(n))
            })
            .ok_or(DtypeError::SizeOverflow { ty: self })
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl TryFrom<u32> for GgmlType {
    type Error = DtypeError;
    fn try_from(id: u32) -> Result<Self> {
        GgmlType::from_u32(id).ok_or(DtypeError::UnknownType(id))
    }
}

impl From<GgmlType> for u32 {
    fn from(ty: GgmlType) -> u32 {
        ty as u32
    }
}

impl FromStr for GgmlType {
    type Err = DtypeError;
    /// Parses ggml's name of a type, ignoring ASCII case (`"Q8_0"` and `"q8_0"` both work).
    fn from_str(s: &str) -> Result<Self> {
        GgmlType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| DtypeError::UnknownTypeName(s.to_owned()))
    }
}

// ---------------------------------------------------------------------------
// Scalar float conversions
// ---------------------------------------------------------------------------

/// Converts IEEE half bits to `f32`, matching ggml's `GGML_FP16_TO_FP32`: exact for
/// numbers; NaN payloads are kept and the NaN is quieted.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from(h >> 10) & 0x1f;
    let man = u32::from(h) & 0x3ff;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal half: the value is man * 2^-24, exactly representable in f32.
            let v = man as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Converts `f32` to IEEE half bits with round-to-nearest-even, matching
/// ggml's `GGML_FP32_TO_FP16` for every input (overflow gives ±inf, any NaN
/// becomes the quiet NaN `0x7e00` with the input's sign).
pub fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let abs = x & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        return sign | 0x7e00;
    }
    // 65520 is the midpoint between the largest half (65504) and 2^16; ties go to
    // the even neighbour, which is infinity.
    if abs >= 0x477f_f000 {
        return sign | 0x7c00;
    }
    if abs >= 0x3880_0000 {
        // Normal half: rebias the exponent (127 -> 15) and round away the 13 extra
        // mantissa bits; a mantissa carry correctly bumps the exponent.
        let rebased = abs - (112 << 23);
        let round = 0x0fff + ((rebased >> 13) & 1);
        return sign | ((rebased + round) >> 13) as u16;
    }
    if abs <= 0x3300_0000 {
        // At most half of the smallest subnormal (2^-25): rounds to (signed) zero.
        return sign;
    }
    // Subnormal half: value = mant * 2^(exp - 150), unit 2^-24.
    let exp = abs >> 23;
    let mant = (abs & 0x007f_ffff) | 0x0080_0000;
    let shift = 126 - exp;
    let mut h = mant >> shift;
    let rem = mant & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if rem > half || (rem == half && (h & 1) == 1) {
        h += 1;
    }
    sign | h as u16
}

/// Converts bfloat16 bits to `f32` (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// Converts `f32` to bfloat16 bits with round-to-nearest-even and quieted NaNs,
/// matching ggml's `GGML_FP32_TO_BF16`.
pub fn f32_to_bf16(f: f32) -> u16 {
    let x = f.to_bits();
    if x & 0x7fff_ffff > 0x7f80_0000 {
        return ((x >> 16) | 0x40) as u16;
    }
    ((x + (0x7fff + ((x >> 16) & 1))) >> 16) as u16
}

// ---------------------------------------------------------------------------
// Buffer conversions
// ---------------------------------------------------------------------------

fn check_len(op: &'static str, expected: usize, found: usize, unit: &'static str) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(DtypeError::LengthMismatch {
            op,
            expected,
            found,
            unit,
        })
    }
}

fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Encodes `src` as little-endian f16 into `dst` (`dst.len() == 2 * src.len()`).
pub fn f32_to_f16_bytes(src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_len("f32_to_f16_bytes", src.len() * 2, dst.len(), "bytes")?;
    for (x, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&f32_to_f16(*x).to_le_bytes());
    }
    Ok(())
}

/// Encodes `src` as little-endian bf16 into `dst` (`dst.len() == 2 * src.len()`).
pub fn f32_to_bf16_bytes(src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_len("f32_to_bf16_bytes", src.len() * 2, dst.len(), "bytes")?;
    for (x, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&f32_to_bf16(*x).to_le_bytes());
    }
    Ok(())
}

/// Encodes `src` as little-endian f32 bytes, the layout of an F32 tensor.
pub fn f32_to_le_bytes(src: &[f32]) -> Vec<u8> {
    src.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Decodes `src`, stored as `ty`, into `dst` as f32.
///
/// Supports F32, F16, BF16, Q8_0, Q4_0 and Q6_K. `src` must hold exactly
/// `dst.len()` elements; it need not be aligned.
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = ty.row_size(dst.len() as u64)?;
    check_len("dequantize", need, src.len(), "bytes")?;
    match ty {
        GgmlType::F32 => {
            for (out, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *out = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        GgmlType::F16 => {
            for (out, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *out = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            }
        }
        GgmlType::BF16 => {
            for (out, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *out = bf16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            }
        }
        GgmlType::Q8_0 => dequantize_q8_0(src, dst)?,
        GgmlType::Q4_0 => dequantize_q4_0(src, dst)?,
        GgmlType::Q6_K => dequantize_q6_k(src, dst)?,
        ty => return Err(DtypeError::Unsupported { ty }),
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Q8_0: struct { f16 d; i8 qs[32]; }
// ---------------------------------------------------------------------------

/// Elements per Q8_0 block.
pub const QK8_0: usize = 32;
/// Elements per Q4_0 block.
pub const QK4_0: usize = 32;
const Q8_0_BYTES: usize = 34;
const Q4_0_BYTES: usize = 18;
const Q6_K_BYTES: usize = 210;

// ggml converts scaled values to `int8_t`. For finite inputs the value is in
// range; otherwise (NaN/inf inputs, or a scale that underflows so its
// reciprocal is infinite) C leaves the conversion undefined. x86-64 truncates to
// 32 bits, giving 0x8000_0000 for NaN and out-of-range values, then keeps the
// low byte; this reproduces that so the output matches ggml for every input.
fn float_to_int8_x86(x: f32) -> i8 {
    let wide = if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        x as i32
    } else {
        i32::MIN
    };
    wide as i8
}

/// Quantizes `src` to Q8_0 blocks in `dst`, bit-identical to ggml's
/// `quantize_row_q8_0_ref` for every input (for NaN/inf, to ggml on x86-64). `src.len()` must be a multiple of 32 and
/// `dst.len()` must be `src.len() / 32 * 34`.
pub fn quantize_q8_0(src: &[f32], dst: &mut [u8]) -> Result<()> {
    let need = GgmlType::Q8_0.row_size(src.len() as u64)?;
    check_len("quantize_q8_0", need, dst.len(), "bytes")?;
    for (x, block) in src
        .chunks_exact(QK8_0)
        .zip(dst.chunks_exact_mut(Q8_0_BYTES))
    {
        // Written as `amax > v ? amax : v`, ggml's MAX, so NaN inputs behave as there.
        let amax = x
            .iter()
            .fold(0.0f32, |m, v| if m > v.abs() { m } else { v.abs() });
        // The quants use the unrounded f32 scale; only the stored scale is f16.
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        block[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        for (q, v) in block[2..].iter_mut().zip(x) {
            *q = float_to_int8_x86((v * id).round()) as u8;
        }
    }
    Ok(())
}

/// Dequantizes Q8_0 blocks, bit-identical to ggml's `dequantize_row_q8_0`.
/// `dst.len()` must be a multiple of 32 and `src.len() == dst.len() / 32 * 34`.
pub fn dequantize_q8_0(src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = GgmlType::Q8_0.row_size(dst.len() as u64)?;
    check_len("dequantize_q8_0", need, src.len(), "bytes")?;
    for (block, y) in src
        .chunks_exact(Q8_0_BYTES)
        .zip(dst.chunks_exact_mut(QK8_0))
    {
        let d = f16_to_f32(read_u16(block, 0));
        for (out, &q) in y.iter_mut().zip(&block[2..]) {
            *out = f32::from(q as i8) * d;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Q4_0: struct { f16 d; u8 qs[16]; }, low nibbles hold elements 0..16,
// high nibbles elements 16..32, each stored as q + 8.
// ---------------------------------------------------------------------------

/// Quantizes `src` to Q4_0 blocks in `dst`, bit-identical to ggml's
/// `quantize_row_q4_0_ref` for every input (for NaN/inf, to ggml on x86-64). `src.len()` must be a multiple of 32 and
/// `dst.len()` must be `src.len() / 32 * 18`.
pub fn quantize_q4_0(src: &[f32], dst: &mut [u8]) -> Result<()> {
    let need = GgmlType::Q4_0.row_size(src.len() as u64)?;
    check_len("quantize_q4_0", need, dst.len(), "bytes")?;
    for (x, block) in src
        .chunks_exact(QK4_0)
        .zip(dst.chunks_exact_mut(Q4_0_BYTES))
    {
        // Keep the signed value of the first element with the largest magnitude:
        // mapping it to -8 uses the asymmetric end of the 4-bit range fully.
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        block[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        let (lo, hi) = x.split_at(QK4_0 / 2);
        for ((q, &a), &b) in block[2..].iter_mut().zip(lo).zip(hi) {
            // Truncation toward zero of x + 8.5 rounds to nearest, as in ggml.
            let qa = float_to_int8_x86(a * id + 8.5).min(15) as u8;
            let qb = float_to_int8_x86(b * id + 8.5).min(15) as u8;
            *q = qa | (qb << 4);
        }
    }
    Ok(())
}

/// Dequantizes Q4_0 blocks, bit-identical to ggml's `dequantize_row_q4_0`.
/// `dst.len()` must be a multiple of 32 and `src.len() == dst.len() / 32 * 18`.
pub fn dequantize_q4_0(src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = GgmlType::Q4_0.row_size(dst.len() as u64)?;
    check_len("dequantize_q4_0", need, src.len(), "bytes")?;
    for (block, y) in src
        .chunks_exact(Q4_0_BYTES)
        .zip(dst.chunks_exact_mut(QK4_0))
    {
        let d = f16_to_f32(read_u16(block, 0));
        let (lo, hi) = y.split_at_mut(QK4_0 / 2);
        for ((&q, a), b) in block[2..].iter().zip(lo).zip(hi) {
            *a = f32::from(i16::from(q & 0x0f) - 8) * d;
            *b = f32::from(i16::from(q >> 4) - 8) * d;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Q6_K: struct { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d; } per 256 values.
// ---------------------------------------------------------------------------

/// Dequantizes Q6_K super-blocks, bit-identical to ggml's `dequantize_row_q6_K`.
/// `dst.len()` must be a multiple of 256 and `src.len() == dst.len() / 256 * 210`.
pub fn dequantize_q6_k(src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = GgmlType::Q6_K.row_size(dst.len() as u64)?;
    check_len("dequantize_q6_k", need, src.len(), "bytes")?;
    for (block, y) in src.chunks_exact(Q6_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let (ql, rest) = block.split_at(128);
        let (qh, rest) = rest.split_at(64);
        let (scales, d) = rest.split_at(16);
        let d = f16_to_f32(read_u16(d, 0));
        // Each half of the super-block covers 128 values with 64 ql bytes,
        // 32 qh bytes and 8 scales; qh packs four 2-bit high parts per byte.
        for half in 0..2 {
            let ql = &ql[half * 64..];
            let qh = &qh[half * 32..];
            let sc = &scales[half * 8..];
            let y = &mut y[half * 128..];
            for l in 0..32 {
                let is = l / 16;
                let h = qh[l];
                let q1 = ((ql[l] & 0x0f) | ((h & 3) << 4)) as i8 - 32;
                let q2 = ((ql[l + 32] & 0x0f) | (((h >> 2) & 3) << 4)) as i8 - 32;
                let q3 = ((ql[l] >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((h >> 6) & 3) << 4)) as i8 - 32;
                // Same association as ggml, `(d * scale) * q`, to stay bit-exact.
                let s = |i: usize| f32::from(sc[is + i] as i8);
                y[l] = d * s(0) * f32::from(q1);
                y[l + 32] = d * s(2) * f32::from(q2);
                y[l + 64] = d * s(4) * f32::from(q3);
                y[l + 96] = d * s(6) * f32::from(q4);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_names_parse() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_u32(t as u32), Some(t));
            assert_eq!(t.name().parse::<GgmlType>().unwrap(), t);
            assert_eq!(t.is_quantized(), t.block_size() > 1, "{t}");
        }
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 43] {
            assert_eq!(GgmlType::from_u32(removed), None);
        }
        assert_eq!("Q8_0".parse::<GgmlType>().unwrap(), GgmlType::Q8_0);
    }

    #[test]
    fn row_sizes() {
        assert_eq!(GgmlType::F32.row_size(10).unwrap(), 40);
        assert_eq!(GgmlType::Q8_0.row_size(64).unwrap(), 68);
        assert_eq!(GgmlType::Q6_K.row_size(512).unwrap(), 420);
        assert!(matches!(
            GgmlType::Q4_0.row_size(33),
            Err(DtypeError::NotBlockMultiple { .. })
        ));
        assert_eq!(GgmlType::Q4_0.tensor_size(&[64, 3, 2]).unwrap(), 2 * 18 * 6);
        assert!(GgmlType::F64.tensor_size(&[u64::MAX, 2]).is_err());
    }

    #[test]
    fn f16_all_bit_patterns_round_trip() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert_eq!(f32_to_f16(f) & 0x8000, h & 0x8000);
                assert_eq!(f32_to_f16(f) & 0x7fff, 0x7e00);
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#06x}");
            }
        }
    }

    #[test]
    fn f16_rounding_edges() {
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(65519.99), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        // 2^-25 ties to even zero; just above it rounds up to the smallest subnormal.
        assert_eq!(f32_to_f16(f32::from_bits(0x3300_0000)), 0);
        assert_eq!(f32_to_f16(f32::from_bits(0x3300_0001)), 1);
        // 1 + 2^-11 is a tie between 1.0 and the next half: even mantissa wins.
        assert_eq!(f32_to_f16(1.0 + f32::EPSILON * 4096.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + f32::EPSILON * 12288.0), 0x3c02);
        assert_eq!(f32_to_f16(1.0 + f32::EPSILON * 4097.0), 0x3c01);
    }

    #[test]
    fn bf16_matches_definition() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80); // tie, even
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82); // tie, odd
        assert_eq!(f32_to_bf16(f32::from_bits(0x7f80_0001)), 0x7fc0);
    }

    #[test]
    fn q6_k_simple_block() {
        // d = 1.0, every scale = 2, every 6-bit quant = 33 (value 1): all outputs 2.
        let mut block = vec![0u8; Q6_K_BYTES];
        block[..128].fill(0x11);
        block[128..192].fill(0b1010_1010);
        block[192..208].fill(2);
        block[208..].copy_from_slice(&0x3c00u16.to_le_bytes());
        let mut out = vec![0.0; 256];
        dequantize_q6_k(&block, &mut out).unwrap();
        assert!(out.iter().all(|&v| v == 2.0), "{out:?}");
    }
}
