//! Tensor operations, as methods on [`Context`](super::Context).
//!
//! Each method checks the preconditions ggml would enforce with `GGML_ASSERT` (which aborts the
//! process) and the type and layout restrictions of the CPU kernels, and returns a
//! [`GgmlError`] instead. Results are new tensors in the context the method is
//! called on; inputs may come from any context that lives at least as long.
//!
//! The families live in submodules: creation and layout (`new_tensor_*`, views, reshapes,
//! `cpy`, `concat`, `get_rows`, ...), elementwise math and reductions (`add`, `mul`, unary
//! activations, GLUs, norms, ...), and neural-network kernels (`mul_mat`, `rope_ext`,
//! `soft_max_ext`, `flash_attn_ext`, convolutions, `ssm_conv`, ...).

mod extra_encoder;
mod layout;
mod math;
mod nn;

use ggml_sys as sys;

use super::dtype::GgmlType;
use super::error::{GgmlError, Result};
use super::tensor::Tensor;

/// An elementwise activation (`enum ggml_unary_op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `|x|`.
    Abs,
    /// `sign(x)`.
    Sgn,
    /// `-x`.
    Neg,
    /// `x > 0 ? 1 : 0`.
    Step,
    /// `tanh(x)`.
    Tanh,
    /// Exponential linear unit.
    Elu,
    /// `max(x, 0)`.
    Relu,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// GELU, tanh approximation.
    Gelu,
    /// GELU, sigmoid approximation (`x * sigmoid(1.702 x)`).
    GeluQuick,
    /// `x * sigmoid(x)`.
    Silu,
    /// `x * relu6(x + 3) / 6`.
    Hardswish,
    /// `relu6(x + 3) / 6`.
    Hardsigmoid,
    /// `exp(x)`.
    Exp,
    /// `exp(x) - 1`.
    Expm1,
    /// `log(1 + exp(x))`.
    Softplus,
    /// GELU with the exact error function.
    GeluErf,
    /// `floor(x)`.
    Floor,
    /// `ceil(x)`.
    Ceil,
    /// Round half away from zero.
    Round,
    /// Truncate toward zero.
    Trunc,
}

impl UnaryOp {
    fn raw(self) -> sys::ggml_unary_op {
        match self {
            UnaryOp::Abs => sys::GGML_UNARY_OP_ABS,
            UnaryOp::Sgn => sys::GGML_UNARY_OP_SGN,
            UnaryOp::Neg => sys::GGML_UNARY_OP_NEG,
            UnaryOp::Step => sys::GGML_UNARY_OP_STEP,
            UnaryOp::Tanh => sys::GGML_UNARY_OP_TANH,
            UnaryOp::Elu => sys::GGML_UNARY_OP_ELU,
            UnaryOp::Relu => sys::GGML_UNARY_OP_RELU,
            UnaryOp::Sigmoid => sys::GGML_UNARY_OP_SIGMOID,
            UnaryOp::Gelu => sys::GGML_UNARY_OP_GELU,
            UnaryOp::GeluQuick => sys::GGML_UNARY_OP_GELU_QUICK,
            UnaryOp::Silu => sys::GGML_UNARY_OP_SILU,
            UnaryOp::Hardswish => sys::GGML_UNARY_OP_HARDSWISH,
            UnaryOp::Hardsigmoid => sys::GGML_UNARY_OP_HARDSIGMOID,
            UnaryOp::Exp => sys::GGML_UNARY_OP_EXP,
            UnaryOp::Expm1 => sys::GGML_UNARY_OP_EXPM1,
            UnaryOp::Softplus => sys::GGML_UNARY_OP_SOFTPLUS,
            UnaryOp::GeluErf => sys::GGML_UNARY_OP_GELU_ERF,
            UnaryOp::Floor => sys::GGML_UNARY_OP_FLOOR,
            UnaryOp::Ceil => sys::GGML_UNARY_OP_CEIL,
            UnaryOp::Round => sys::GGML_UNARY_OP_ROUND,
            UnaryOp::Trunc => sys::GGML_UNARY_OP_TRUNC,
        }
    }
}

/// A gated linear unit (`enum ggml_glu_op`): `act(a) * b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GluOp {
    /// `relu(a) * b`.
    Reglu,
    /// `gelu(a) * b` (tanh approximation).
    Geglu,
    /// `silu(a) * b`.
    Swiglu,
    /// `gelu_erf(a) * b`.
    GegluErf,
    /// `gelu_quick(a) * b`.
    GegluQuick,
}

impl GluOp {
    fn raw(self) -> sys::ggml_glu_op {
        match self {
            GluOp::Reglu => sys::GGML_GLU_OP_REGLU,
            GluOp::Geglu => sys::GGML_GLU_OP_GEGLU,
            GluOp::Swiglu => sys::GGML_GLU_OP_SWIGLU,
            GluOp::GegluErf => sys::GGML_GLU_OP_GEGLU_ERF,
            GluOp::GegluQuick => sys::GGML_GLU_OP_GEGLU_QUICK,
        }
    }
}

/// Rotary embedding layout (`GGML_ROPE_TYPE_*`) for [`Context::rope_ext`](super::Context::rope_ext).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// Rotate adjacent pairs `(x[2i], x[2i+1])` (GPT-J / LLaMA style).
    Normal,
    /// Rotate `(x[i], x[i + n_dims/2])` (GPT-NeoX style).
    Neox,
}

impl RopeMode {
    /// ggml's mode constant.
    pub fn raw(self) -> i32 {
        match self {
            RopeMode::Normal => sys::GGML_ROPE_TYPE_NORMAL as i32,
            RopeMode::Neox => sys::GGML_ROPE_TYPE_NEOX as i32,
        }
    }
}

/// Parameters of [`Context::rope_ext`](super::Context::rope_ext).
///
/// The defaults (`RopeParams::new`) disable YaRN scaling: `freq_scale = 1`, `ext_factor = 0`,
/// `attn_factor = 1`, `beta_fast = beta_slow = 0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    /// Number of leading dimensions of each head to rotate (even, at most `ne[0]`).
    pub n_dims: usize,
    /// Pair layout.
    pub mode: RopeMode,
    /// Training context length (only used by YaRN).
    pub n_ctx_orig: i32,
    /// Base of the frequency geometric series (e.g. 10000).
    pub freq_base: f32,
    /// Position scale (linear interpolation).
    pub freq_scale: f32,
    /// YaRN extrapolation mix factor.
    pub ext_factor: f32,
    /// Magnitude scale applied to cos/sin.
    pub attn_factor: f32,
    /// YaRN low correction dimension parameter.
    pub beta_fast: f32,
    /// YaRN high correction dimension parameter.
    pub beta_slow: f32,
}

impl RopeParams {
    /// Plain rotary embedding over `n_dims` dimensions with frequency base `freq_base`.
    pub fn new(n_dims: usize, mode: RopeMode, freq_base: f32) -> RopeParams {
        RopeParams {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 0.0,
            beta_slow: 0.0,
        }
    }
}

/// Minimum accumulator precision requested from a backend (`enum ggml_prec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Whatever the backend prefers.
    Default,
    /// Accumulate in F32.
    F32,
    /// BF16 accumulation is acceptable.
    Bf16,
    /// F16 accumulation is acceptable.
    F16,
}

impl Precision {
    fn raw(self) -> sys::ggml_prec {
        match self {
            Precision::Default => sys::GGML_PREC_DEFAULT,
            Precision::F32 => sys::GGML_PREC_F32,
            Precision::Bf16 => sys::GGML_PREC_BF16,
            Precision::F16 => sys::GGML_PREC_F16,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared precondition checks
// ---------------------------------------------------------------------------------------------

fn fmt_ne(ne: [i64; 4]) -> String {
    format!("[{}, {}, {}, {}]", ne[0], ne[1], ne[2], ne[3])
}

/// Fails unless `t`'s type is one of `allowed`.
fn expect_type(op: &'static str, what: &str, t: Tensor<'_>, allowed: &[GgmlType]) -> Result<()> {
    let ty = t.ty();
    if allowed.contains(&ty) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
    Err(GgmlError::ty(
        op,
        ty,
        format!("{what} must be one of {}", names.join(", ")),
    ))
}

/// `n % d == 0` without ggml's division by zero.
fn divides(d: i64, n: i64) -> bool {
    d > 0 && n % d == 0
}

fn is_empty(ne: [i64; 4]) -> bool {
    ne.contains(&0)
}

/// ggml's `ggml_can_repeat(b, a)`: `a` is a whole number of repetitions of `b`.
fn can_repeat(b: [i64; 4], a: [i64; 4]) -> bool {
    if is_empty(b) {
        return is_empty(a);
    }
    (0..4).all(|i| divides(b[i], a[i]))
}

/// Whether elements within a row are adjacent (`nb[0]` equals the type's block size in bytes).
fn rows_dense(t: Tensor<'_>) -> bool {
    t.nb()[0] == t.ty().type_size()
}

fn expect_rows_dense(op: &'static str, what: &str, t: Tensor<'_>) -> Result<()> {
    if rows_dense(t) {
        Ok(())
    } else {
        Err(GgmlError::layout(
            op,
            format!("{what} must have contiguous rows (nb[0] = type size)"),
        ))
    }
}

fn expect_contiguous(op: &'static str, what: &str, t: Tensor<'_>) -> Result<()> {
    if t.is_contiguous() {
        Ok(())
    } else {
        Err(GgmlError::layout(op, format!("{what} must be contiguous")))
    }
}

/// Whether all dimensions above the first are packed (`ggml_is_contiguous_1`), with dense rows.
fn expect_contiguous_1(op: &'static str, what: &str, t: Tensor<'_>) -> Result<()> {
    // SAFETY: the handle keeps the tensor live; the predicate only reads metadata.
    let ok = unsafe { sys::ggml_is_contiguous_1(t.as_ptr()) };
    if ok && rows_dense(t) {
        Ok(())
    } else {
        Err(GgmlError::layout(
            op,
            format!("{what} must have contiguous rows"),
        ))
    }
}

/// Converts a count or size argument to C `int`.
fn c_int(op: &'static str, what: &str, v: i64) -> Result<i32> {
    i32::try_from(v)
        .map_err(|_| GgmlError::arg(op, format!("{what} = {v} does not fit in a C int")))
}

fn check_finite(op: &'static str, what: &str, v: f32) -> Result<()> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(GgmlError::arg(
            op,
            format!("{what} must be finite, got {v}"),
        ))
    }
}

/// Element count of a shape, failing on negative dimensions or overflow of `i64`.
fn checked_nelements(op: &'static str, ne: &[i64]) -> Result<i64> {
    let mut n: i64 = 1;
    for &d in ne {
        if d < 0 {
            return Err(GgmlError::arg(op, format!("negative dimension {d}")));
        }
        n = n
            .checked_mul(d)
            .ok_or_else(|| GgmlError::arg(op, "element count overflows"))?;
    }
    Ok(n)
}

/// Checks a new shape for a tensor of type `ty`: 1–4 non-negative dimensions, `ne[0]` a whole
/// number of blocks, element and byte counts in range.
fn check_new_shape(op: &'static str, ty: GgmlType, ne: &[i64]) -> Result<()> {
    if ne.is_empty() || ne.len() > 4 {
        return Err(GgmlError::arg(
            op,
            format!("tensors have 1 to 4 dimensions, got {}", ne.len()),
        ));
    }
    checked_nelements(op, ne)?;
    let block = ty.block_size() as i64;
    if ne[0] % block != 0 {
        return Err(GgmlError::shape(
            op,
            format!(
                "ne[0] = {} is not a multiple of {ty}'s block size {block}",
                ne[0]
            ),
        ));
    }
    let dims: Vec<u64> = ne.iter().map(|&d| d as u64).collect();
    let bytes = ty.tensor_size(&dims)?;
    if bytes > isize::MAX as usize {
        return Err(GgmlError::arg(op, "tensor size overflows"));
    }
    Ok(())
}

const FLOATS: &[GgmlType] = &[GgmlType::F32, GgmlType::F16, GgmlType::BF16];
const F32_ONLY: &[GgmlType] = &[GgmlType::F32];
const F32_F16: &[GgmlType] = &[GgmlType::F32, GgmlType::F16];
