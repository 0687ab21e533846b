//! Elementwise arithmetic, activations, gated linear units, reductions and normalisations.

use ggml_sys as sys;

use super::super::context::Context;
use super::super::dtype::GgmlType;
use super::super::error::{GgmlError, Result};
use super::super::tensor::Tensor;
use super::{
    can_repeat, check_finite, expect_contiguous, expect_contiguous_1, expect_rows_dense,
    expect_type, fmt_ne, GluOp, UnaryOp, F32_F16, F32_ONLY, FLOATS,
};

/// Checks `a (op) b` with `b` broadcast to `a` (the CPU binary kernels' type pairs).
fn check_binary(op: &'static str, a: Tensor<'_>, b: Tensor<'_>) -> Result<()> {
    if !can_repeat(b.ne(), a.ne()) {
        return Err(GgmlError::shape(
            op,
            format!(
                "{} cannot be broadcast to {} (each dimension must divide)",
                fmt_ne(b.ne()),
                fmt_ne(a.ne())
            ),
        ));
    }
    use GgmlType::{BF16, F16, F32};
    let ok = matches!(
        (a.ty(), b.ty()),
        (F32, F32) | (F16, F16) | (BF16, BF16) | (BF16, F32) | (F16, F32)
    );
    if !ok {
        return Err(GgmlError::ty(
            op,
            b.ty(),
            format!("cannot combine {} with {}", a.ty(), b.ty()),
        ));
    }
    expect_rows_dense(op, "first operand", a)
}

fn check_eps(op: &'static str, eps: f32) -> Result<()> {
    check_finite(op, "eps", eps)?;
    if eps < 0.0 {
        return Err(GgmlError::arg(
            op,
            format!("eps must be non-negative, got {eps}"),
        ));
    }
    Ok(())
}

/// Checks the input of a row normalisation (F32 with dense rows).
fn check_norm(op: &'static str, a: Tensor<'_>, eps: f32) -> Result<()> {
    expect_type(op, "input", a, F32_ONLY)?;
    expect_rows_dense(op, "input", a)?;
    check_eps(op, eps)
}

impl Context {
    /// `a + b`, with `b` broadcast (repeated) to `a`'s shape.
    pub fn add<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        check_binary("add", a, b)?;
        // SAFETY: `a` and `b` are live and `b` can be repeated to `a` (ggml's assert); the type
        // pair and layout are ones the CPU kernel handles.
        self.build(|ctx| unsafe { sys::ggml_add(ctx, a.as_ptr(), b.as_ptr()) })
    }

    /// `a - b`, with `b` broadcast to `a`'s shape.
    pub fn sub<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        check_binary("sub", a, b)?;
        // SAFETY: as for `add`.
        self.build(|ctx| unsafe { sys::ggml_sub(ctx, a.as_ptr(), b.as_ptr()) })
    }

    /// `a * b` elementwise, with `b` broadcast to `a`'s shape.
    pub fn mul<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        check_binary("mul", a, b)?;
        // SAFETY: as for `add`.
        self.build(|ctx| unsafe { sys::ggml_mul(ctx, a.as_ptr(), b.as_ptr()) })
    }

    /// `a / b` elementwise, with `b` broadcast to `a`'s shape.
    pub fn div<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        check_binary("div", a, b)?;
        // SAFETY: as for `add`.
        self.build(|ctx| unsafe { sys::ggml_div(ctx, a.as_ptr(), b.as_ptr()) })
    }

    /// `a * s` (contiguous F32 or BF16 `a`).
    pub fn scale<'a>(&'a self, a: Tensor<'a>, s: f32) -> Result<Tensor<'a>> {
        self.scale_bias(a, s, 0.0)
    }

    /// `a * s + b` (contiguous F32 or BF16 `a`).
    pub fn scale_bias<'a>(&'a self, a: Tensor<'a>, s: f32, b: f32) -> Result<Tensor<'a>> {
        expect_type("scale", "input", a, &[GgmlType::F32, GgmlType::BF16])?;
        expect_contiguous("scale", "input", a)?;
        // SAFETY: `a` is live and contiguous (implies ggml's padded-1d assert and the kernel's
        // contiguity asserts) and of a type the CPU kernel supports.
        self.build(|ctx| unsafe { sys::ggml_scale_bias(ctx, a.as_ptr(), s, b) })
    }

    /// `a` clamped to `[min, max]` elementwise (F32 or F16).
    pub fn clamp<'a>(&'a self, a: Tensor<'a>, min: f32, max: f32) -> Result<Tensor<'a>> {
        expect_type("clamp", "input", a, F32_F16)?;
        expect_rows_dense("clamp", "input", a)?;
        // SAFETY: `a` is live with dense rows of a type the CPU kernel supports.
        self.build(|ctx| unsafe { sys::ggml_clamp(ctx, a.as_ptr(), min, max) })
    }

    /// The activation `op` applied elementwise (F32, F16 or BF16 with contiguous rows).
    pub fn unary<'a>(&'a self, a: Tensor<'a>, op: UnaryOp) -> Result<Tensor<'a>> {
        expect_type("unary", "input", a, FLOATS)?;
        expect_contiguous_1("unary", "input", a)?;
        let raw = op.raw();
        // SAFETY: `a` is live with contiguous rows (ggml's assert and the kernels') and of a
        // type every unary kernel supports; `raw` is a valid `ggml_unary_op`.
        self.build(|ctx| unsafe { sys::ggml_unary(ctx, a.as_ptr(), raw) })
    }

    /// `x * sigmoid(x)`.
    pub fn silu<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::Silu)
    }

    /// GELU (tanh approximation).
    pub fn gelu<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::Gelu)
    }

    /// GELU with the exact error function.
    pub fn gelu_erf<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::GeluErf)
    }

    /// `max(x, 0)`.
    pub fn relu<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::Relu)
    }

    /// `1 / (1 + exp(-x))`.
    pub fn sigmoid<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::Sigmoid)
    }

    /// `tanh(x)`.
    pub fn tanh<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::Tanh)
    }

    /// `exp(x)`.
    pub fn exp<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::Exp)
    }

    /// `-x`.
    pub fn neg<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::Neg)
    }

    /// `|x|`.
    pub fn abs<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(a, UnaryOp::Abs)
    }

    /// `x * x` elementwise.
    pub fn sqr<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        expect_type("sqr", "input", a, FLOATS)?;
        expect_contiguous_1("sqr", "input", a)?;
        // SAFETY: `a` is live with contiguous rows of a type the CPU kernel supports.
        self.build(|ctx| unsafe { sys::ggml_sqr(ctx, a.as_ptr()) })
    }

    /// `sqrt(x)` elementwise.
    pub fn sqrt<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        expect_type("sqrt", "input", a, FLOATS)?;
        expect_contiguous_1("sqrt", "input", a)?;
        // SAFETY: `a` is live with contiguous rows of a type the CPU kernel supports.
        self.build(|ctx| unsafe { sys::ggml_sqrt(ctx, a.as_ptr()) })
    }

    /// Gated linear unit over the halves of each row: with `swapped == false` the result is
    /// `act(a[.., :n/2]) * a[.., n/2:]`; `ne[0]` must be even.
    pub fn glu<'a>(&'a self, a: Tensor<'a>, op: GluOp, swapped: bool) -> Result<Tensor<'a>> {
        expect_type("glu", "input", a, F32_F16)?;
        expect_contiguous_1("glu", "input", a)?;
        if a.ne()[0] % 2 != 0 {
            return Err(GgmlError::shape("glu", "ne[0] must be even"));
        }
        let raw = op.raw();
        // SAFETY: `a` is live with contiguous rows (ggml's assert) of a supported type.
        self.build(|ctx| unsafe { sys::ggml_glu(ctx, a.as_ptr(), raw, swapped) })
    }

    /// `silu(a[.., :n/2]) * a[.., n/2:]`.
    pub fn swiglu<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.glu(a, GluOp::Swiglu, false)
    }

    /// Gated linear unit of two tensors: `act(a) * b` (same shape and type).
    pub fn glu_split<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>, op: GluOp) -> Result<Tensor<'a>> {
        expect_type("glu_split", "gate", a, F32_F16)?;
        expect_contiguous_1("glu_split", "gate", a)?;
        expect_contiguous_1("glu_split", "value", b)?;
        if a.ne() != b.ne() || a.ty() != b.ty() {
            return Err(GgmlError::shape(
                "glu_split",
                format!(
                    "{} {} and {} {} differ",
                    a.ty(),
                    fmt_ne(a.ne()),
                    b.ty(),
                    fmt_ne(b.ne())
                ),
            ));
        }
        let raw = op.raw();
        // SAFETY: `a` and `b` are live, contiguous in rows, of equal shape and type (ggml's
        // asserts).
        self.build(|ctx| unsafe { sys::ggml_glu_split(ctx, a.as_ptr(), b.as_ptr(), raw) })
    }

    /// `silu(a) * b`.
    pub fn swiglu_split<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        self.glu_split(a, b, GluOp::Swiglu)
    }

    /// Sum of all elements (a 1-element tensor).
    pub fn sum<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        expect_type("sum", "input", a, FLOATS)?;
        expect_rows_dense("sum", "input", a)?;
        // SAFETY: `a` is live with dense rows of a type the CPU kernel supports.
        self.build(|ctx| unsafe { sys::ggml_sum(ctx, a.as_ptr()) })
    }

    /// Sum of each row: `[n, a, b, c]` becomes `[1, a, b, c]` (F32).
    pub fn sum_rows<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        expect_type("sum_rows", "input", a, F32_ONLY)?;
        expect_rows_dense("sum_rows", "input", a)?;
        // SAFETY: `a` is live, F32 with dense rows (the CPU kernel's asserts).
        self.build(|ctx| unsafe { sys::ggml_sum_rows(ctx, a.as_ptr()) })
    }

    /// Mean of each row: `[n, a, b, c]` becomes `[1, a, b, c]` (F32).
    pub fn mean<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        expect_type("mean", "input", a, F32_ONLY)?;
        expect_rows_dense("mean", "input", a)?;
        // SAFETY: `a` is live, F32 with dense rows.
        self.build(|ctx| unsafe { sys::ggml_mean(ctx, a.as_ptr()) })
    }

    /// Index of the largest element of each row of a matrix (I32 result with `ne[1]` entries).
    pub fn argmax<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        expect_type("argmax", "input", a, F32_ONLY)?;
        expect_rows_dense("argmax", "input", a)?;
        let ne = a.ne();
        if ne[2] != 1 || ne[3] != 1 || ne[0] > i32::MAX as i64 {
            return Err(GgmlError::shape(
                "argmax",
                format!(
                    "input {} must be a matrix with rows shorter than 2^31",
                    fmt_ne(ne)
                ),
            ));
        }
        // SAFETY: `a` is a live F32 matrix with rows that fit in `int` (ggml's asserts).
        self.build(|ctx| unsafe { sys::ggml_argmax(ctx, a.as_ptr()) })
    }

    /// Each row normalised to zero mean and unit variance: `(x - mean) / sqrt(var + eps)`.
    pub fn norm<'a>(&'a self, a: Tensor<'a>, eps: f32) -> Result<Tensor<'a>> {
        check_norm("norm", a, eps)?;
        // SAFETY: `a` is live, F32 with dense rows, and `eps >= 0` (the kernel's assert).
        self.build(|ctx| unsafe { sys::ggml_norm(ctx, a.as_ptr(), eps) })
    }

    /// Each row divided by its root mean square: `x / sqrt(mean(x^2) + eps)`.
    pub fn rms_norm<'a>(&'a self, a: Tensor<'a>, eps: f32) -> Result<Tensor<'a>> {
        check_norm("rms_norm", a, eps)?;
        // SAFETY: `a` is live, F32 with dense rows, and `eps >= 0` (the kernel's assert).
        self.build(|ctx| unsafe { sys::ggml_rms_norm(ctx, a.as_ptr(), eps) })
    }

    /// Each row divided by its L2 norm: `x / max(||x||, eps)`.
    pub fn l2_norm<'a>(&'a self, a: Tensor<'a>, eps: f32) -> Result<Tensor<'a>> {
        check_norm("l2_norm", a, eps)?;
        // SAFETY: `a` is live, F32 with dense rows, and `eps >= 0` (the kernel's assert).
        self.build(|ctx| unsafe { sys::ggml_l2_norm(ctx, a.as_ptr(), eps) })
    }

    /// Group normalisation over `ne[0] * ne[1] * (ne[2] / n_groups)` elements per group.
    pub fn group_norm<'a>(
        &'a self,
        a: Tensor<'a>,
        n_groups: usize,
        eps: f32,
    ) -> Result<Tensor<'a>> {
        check_norm("group_norm", a, eps)?;
        if n_groups == 0 || n_groups > i32::MAX as usize {
            return Err(GgmlError::arg("group_norm", "n_groups must be positive"));
        }
        let g = n_groups as i32;
        // SAFETY: `a` is live, F32 with dense rows, `eps >= 0` and `n_groups > 0`.
        self.build(|ctx| unsafe { sys::ggml_group_norm(ctx, a.as_ptr(), g, eps) })
    }
}
