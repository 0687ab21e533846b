//! Matrix products, attention, rotary embeddings, convolutions and state-space kernels.

use ggml_sys as sys;

use super::super::context::Context;
use super::super::dtype::GgmlType;
use super::super::error::{GgmlError, Result};
use super::super::quant;
use super::super::tensor::Tensor;
use super::{
    c_int, check_finite, check_new_shape, divides, expect_contiguous, expect_rows_dense,
    expect_type, fmt_ne, Precision, RopeParams, F32_F16, F32_ONLY,
};

/// Checks `ggml_mul_mat(a, b)` for the CPU backend: shapes, `a` not transposed, dense rows, and a
/// type pair with a dot-product kernel.
fn check_mul_mat(op: &'static str, a: Tensor<'_>, b: Tensor<'_>) -> Result<()> {
    let (na, nb) = (a.ne(), b.ne());
    if na[0] != nb[0] || !divides(na[2], nb[2]) || !divides(na[3], nb[3]) {
        return Err(GgmlError::shape(
            op,
            format!(
                "cannot multiply {} by {} (ne[0] must match, batch dims of the first must divide)",
                fmt_ne(na),
                fmt_ne(nb)
            ),
        ));
    }
    let (sa, _) = (a.nb(), b.nb());
    if sa[0] > sa[1] {
        return Err(GgmlError::layout(
            op,
            "the first operand must not be transposed",
        ));
    }
    expect_rows_dense(op, "first operand", a)?;
    expect_rows_dense(op, "second operand", b)?;
    let Some(vdt) = quant::cpu_vec_dot_type(a.ty()) else {
        return Err(GgmlError::ty(
            op,
            a.ty(),
            "no dot-product kernel for this type",
        ));
    };
    let bt = b.ty();
    let ok = bt == GgmlType::F32
        || bt == vdt
        || (matches!(bt, GgmlType::F16 | GgmlType::BF16) && vdt == GgmlType::F32);
    if !ok {
        return Err(GgmlError::ty(
            op,
            bt,
            format!(
                "the second operand of a {} product must be f32 or {vdt}",
                a.ty()
            ),
        ));
    }
    if bt != vdt && nb[0] % vdt.block_size() as i64 != 0 {
        return Err(GgmlError::shape(
            op,
            format!("ne[0] = {} is not a multiple of {vdt}'s block size", nb[0]),
        ));
    }
    Ok(())
}

/// ggml's `ggml_calc_conv_output_size` (C integer division, truncating toward zero).
fn conv_out(ins: i64, ks: i64, s: i64, p: i64, d: i64) -> i64 {
    (ins + 2 * p - d * (ks - 1) - 1) / s + 1
}

fn check_conv_params(op: &'static str, s: &[i64], p: &[i64], d: &[i64]) -> Result<()> {
    if s.iter().any(|&v| v < 1) || d.iter().any(|&v| v < 1) || p.iter().any(|&v| v < 0) {
        return Err(GgmlError::arg(
            op,
            format!("strides {s:?} and dilations {d:?} must be >= 1, paddings {p:?} >= 0"),
        ));
    }
    for &v in s.iter().chain(p).chain(d) {
        c_int(op, "convolution parameter", v)?;
    }
    Ok(())
}

/// Output type of the `im2col` inside ggml's composite convolutions.
fn im2col_type(kernel: GgmlType) -> GgmlType {
    if kernel == GgmlType::BF16 {
        GgmlType::F32
    } else {
        GgmlType::F16
    }
}

/// Checks the data operand of an `im2col` producing `dst_ty`.
fn check_im2col_data(op: &'static str, b: Tensor<'_>, dst_ty: GgmlType) -> Result<()> {
    let allowed: &[GgmlType] = if dst_ty == GgmlType::F32 {
        F32_ONLY
    } else {
        F32_F16
    };
    expect_type(op, "data", b, allowed)?;
    expect_rows_dense(op, "data", b)
}

impl Context {
    /// Matrix product: `a` is `[k, n, ...]`, `b` is `[k, m, ...]`, the result is F32 `[n, m, ...]`
    /// (`result[i, j] = sum_k a[k, i] * b[k, j]`, i.e. `b · aᵀ`). `a`'s dims 2 and 3 are
    /// broadcast over `b`'s.
    pub fn mul_mat<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        check_mul_mat("mul_mat", a, b)?;
        // SAFETY: `a` and `b` are live, `ggml_can_mul_mat(a, b)` holds and `a` is not
        // transposed (ggml's asserts), and the CPU kernel's layout and type needs are met.
        self.build(|ctx| unsafe { sys::ggml_mul_mat(ctx, a.as_ptr(), b.as_ptr()) })
    }

    /// Requests an accumulator precision for a `mul_mat` or `flash_attn_ext` result.
    pub fn set_precision(&self, t: Tensor<'_>, prec: Precision) -> Result<()> {
        let raw = prec.raw();
        // SAFETY: `t` is live; `ggml_prec_set_acc` only writes an op parameter of MUL_MAT,
        // MUL_MAT_ID and FLASH_ATTN_EXT nodes and returns false for any other op.
        let ok = unsafe { sys::ggml_prec_set_acc(t.as_ptr(), raw) };
        if ok {
            Ok(())
        } else {
            Err(GgmlError::arg(
                "set_precision",
                format!("{} does not take a precision", t.op_name()),
            ))
        }
    }

    /// Rotary position embedding of `a` (`[head_dim, n_head, n_tokens, ne3]`, F32 or F16) with
    /// one I32 position per token in `pos` and optional F32 frequency factors
    /// (`theta_i /= freq_factors[i]`).
    pub fn rope_ext<'a>(
        &'a self,
        a: Tensor<'a>,
        pos: Tensor<'a>,
        freq_factors: Option<Tensor<'a>>,
        params: RopeParams,
    ) -> Result<Tensor<'a>> {
        const OP: &str = "rope_ext";
        expect_type(OP, "input", a, F32_F16)?;
        expect_rows_dense(OP, "input", a)?;
        expect_type(OP, "positions", pos, &[GgmlType::I32])?;
        expect_contiguous(OP, "positions", pos)?;
        let (na, np) = (a.ne(), pos.ne());
        if np[1] != 1 || np[2] != 1 || np[3] != 1 || np[0] != na[2] {
            return Err(GgmlError::shape(
                OP,
                format!(
                    "positions {} must be a vector with one entry per token (ne[2] of {})",
                    fmt_ne(np),
                    fmt_ne(na)
                ),
            ));
        }
        let n_dims = params.n_dims as i64;
        if n_dims == 0 || n_dims % 2 != 0 || n_dims > na[0] {
            return Err(GgmlError::arg(
                OP,
                format!(
                    "n_dims = {n_dims} must be even, positive and at most {}",
                    na[0]
                ),
            ));
        }
        let n_dims = c_int(OP, "n_dims", n_dims)?;
        if let Some(ff) = freq_factors {
            expect_type(OP, "freq_factors", ff, F32_ONLY)?;
            expect_contiguous(OP, "freq_factors", ff)?;
            if ff.ne()[0] < i64::from(n_dims / 2) {
                return Err(GgmlError::shape(
                    OP,
                    "freq_factors needs n_dims / 2 entries",
                ));
            }
        }
        for (name, v) in [
            ("freq_base", params.freq_base),
            ("freq_scale", params.freq_scale),
            ("ext_factor", params.ext_factor),
            ("attn_factor", params.attn_factor),
            ("beta_fast", params.beta_fast),
            ("beta_slow", params.beta_slow),
        ] {
            check_finite(OP, name, v)?;
        }
        if params.freq_base <= 0.0 {
            return Err(GgmlError::arg(OP, "freq_base must be positive"));
        }
        let ff = freq_factors.map_or(std::ptr::null_mut(), |t| t.as_ptr());
        let mode = params.mode.raw();
        let p = params;
        // SAFETY: all tensors are live; the mode is NORMAL or NEOX, positions are an I32 vector
        // with ne[2] entries, freq factors are F32 with enough entries, and n_dims is even and at
        // most ne[0]: every assert of `ggml_rope_impl` and of the CPU kernel is ruled out.
        self.build(|ctx| unsafe {
            sys::ggml_rope_ext(
                ctx,
                a.as_ptr(),
                pos.as_ptr(),
                ff,
                n_dims,
                mode,
                p.n_ctx_orig,
                p.freq_base,
                p.freq_scale,
                p.ext_factor,
                p.attn_factor,
                p.beta_fast,
                p.beta_slow,
            )
        })
    }

    /// Softmax over each row of `a` (contiguous F32).
    pub fn soft_max<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.soft_max_ext(a, None, 1.0, 0.0)
    }

    /// Fused `softmax(a * scale + mask * slope)` over rows.
    ///
    /// `a` is `[n_kv, n_rows, ne2, ne3]` contiguous F32; `mask` (F16 or F32, contiguous) is
    /// `[n_kv, >= n_rows, ne12, ne13]` and broadcast over dims 2 and 3. `max_bias > 0` enables
    /// ALiBi slopes (and needs a mask).
    pub fn soft_max_ext<'a>(
        &'a self,
        a: Tensor<'a>,
        mask: Option<Tensor<'a>>,
        scale: f32,
        max_bias: f32,
    ) -> Result<Tensor<'a>> {
        const OP: &str = "soft_max_ext";
        expect_type(OP, "input", a, F32_ONLY)?;
        expect_contiguous(OP, "input", a)?;
        check_finite(OP, "scale", scale)?;
        check_finite(OP, "max_bias", max_bias)?;
        if max_bias < 0.0 {
            return Err(GgmlError::arg(OP, "max_bias must be non-negative"));
        }
        if let Some(m) = mask {
            expect_type(OP, "mask", m, F32_F16)?;
            expect_contiguous(OP, "mask", m)?;
            let (na, nm) = (a.ne(), m.ne());
            if nm[0] != na[0] || nm[1] < na[1] || !divides(nm[2], na[2]) || !divides(nm[3], na[3]) {
                return Err(GgmlError::shape(
                    OP,
                    format!("mask {} does not fit scores {}", fmt_ne(nm), fmt_ne(na)),
                ));
            }
        } else if max_bias > 0.0 {
            return Err(GgmlError::arg(OP, "max_bias > 0 needs a mask"));
        }
        let m = mask.map_or(std::ptr::null_mut(), |t| t.as_ptr());
        // SAFETY: `a` (and the mask, if any) are live and satisfy every assert of
        // `ggml_soft_max_impl`; the CPU kernel handles F32 input and F16/F32 masks.
        self.build(|ctx| unsafe { sys::ggml_soft_max_ext(ctx, a.as_ptr(), m, scale, max_bias) })
    }

    /// Sets the elements above the diagonal shifted by `n_past` to `-inf`
    /// (`a[i, j] = -inf` for `i > n_past + j`); contiguous F32 input.
    pub fn diag_mask_inf<'a>(&'a self, a: Tensor<'a>, n_past: usize) -> Result<Tensor<'a>> {
        expect_type("diag_mask_inf", "input", a, F32_ONLY)?;
        expect_contiguous("diag_mask_inf", "input", a)?;
        let n = c_int("diag_mask_inf", "n_past", n_past as i64)?;
        // SAFETY: `a` is live, contiguous F32 and `n_past >= 0` (the kernel's asserts).
        self.build(|ctx| unsafe { sys::ggml_diag_mask_inf(ctx, a.as_ptr(), n) })
    }

    /// Fused attention `softmax(q·kᵀ * scale + mask) · v`.
    ///
    /// * `q`: `[d_k, n_batch, n_head, ne3]`, F32
    /// * `k`: `[d_k, n_kv, n_head_kv, ne3]`, `v`: `[d_v, n_kv, n_head_kv, ne3]` (not transposed)
    /// * `mask`: `[>= n_kv, >= n_batch, ne32, ne33]`, F16, contiguous, broadcast over heads
    /// * result: `[d_v, n_head, n_batch, ne3]` F32 (heads and tokens swapped)
    ///
    /// `n_head` must be a multiple of `n_head_kv` (grouped-query attention). `logit_softcap > 0`
    /// applies `softcap * tanh(x / softcap)` to the scores; `max_bias > 0` adds ALiBi slopes.
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attn_ext<'a>(
        &'a self,
        q: Tensor<'a>,
        k: Tensor<'a>,
        v: Tensor<'a>,
        mask: Option<Tensor<'a>>,
        scale: f32,
        max_bias: f32,
        logit_softcap: f32,
    ) -> Result<Tensor<'a>> {
        const OP: &str = "flash_attn_ext";
        expect_type(OP, "q", q, F32_ONLY)?;
        for (name, t) in [("q", q), ("k", k), ("v", v)] {
            expect_rows_dense(OP, name, t)?;
        }
        let (nq, nk, nv) = (q.ne(), k.ne(), v.ne());
        let ok = nk[0] == nq[0]
            && divides(nk[2], nq[2])
            && nq[3] == nk[3]
            && nq[3] == nv[3]
            && nv[1] == nk[1]
            && nv[2] == nk[2];
        if !ok {
            return Err(GgmlError::shape(
                OP,
                format!(
                    "q {}, k {} and v {} do not fit together",
                    fmt_ne(nq),
                    fmt_ne(nk),
                    fmt_ne(nv)
                ),
            ));
        }
        let k_ok = quant::cpu_vec_dot_type(k.ty())
            .is_some_and(|vdt| vdt == GgmlType::F32 || quant::cpu_can_quantize(vdt));
        if !k_ok {
            return Err(GgmlError::ty(
                OP,
                k.ty(),
                "no attention kernel for this K type",
            ));
        }
        if v.ty() != GgmlType::F32 && !quant::can_dequantize(v.ty()) {
            return Err(GgmlError::ty(
                OP,
                v.ty(),
                "no attention kernel for this V type",
            ));
        }
        for (name, x) in [
            ("scale", scale),
            ("max_bias", max_bias),
            ("logit_softcap", logit_softcap),
        ] {
            check_finite(OP, name, x)?;
        }
        if max_bias < 0.0 || logit_softcap < 0.0 {
            return Err(GgmlError::arg(
                OP,
                "max_bias and logit_softcap must be non-negative",
            ));
        }
        if let Some(m) = mask {
            expect_type(OP, "mask", m, &[GgmlType::F16])?;
            expect_contiguous(OP, "mask", m)?;
            let nm = m.ne();
            if nm[0] < nk[1] || nm[1] < nq[1] || !divides(nm[2], nq[2]) || !divides(nm[3], nq[3]) {
                return Err(GgmlError::shape(
                    OP,
                    format!(
                        "mask {} does not cover q {} and k {}",
                        fmt_ne(nm),
                        fmt_ne(nq),
                        fmt_ne(nk)
                    ),
                ));
            }
        } else if max_bias > 0.0 {
            return Err(GgmlError::arg(OP, "max_bias > 0 needs a mask"));
        }
        check_new_shape(OP, GgmlType::F32, &[nv[0], nq[2], nq[1], nq[3]])?;
        let m = mask.map_or(std::ptr::null_mut(), |t| t.as_ptr());
        // SAFETY: q, k, v (and the mask) are live and satisfy every assert of
        // `ggml_flash_attn_ext` and of the CPU kernel (dense rows, F32 q, supported K/V types,
        // a mask covering every score it reads).
        self.build(|ctx| unsafe {
            sys::ggml_flash_attn_ext(
                ctx,
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                m,
                scale,
                max_bias,
                logit_softcap,
            )
        })
    }

    /// Depthwise causal convolution of Mamba-style state-space layers.
    ///
    /// `sx` is `[d_conv - 1 + n_t, d_inner, n_seqs]` (the previous `d_conv - 1` inputs followed by
    /// the `n_t` new ones, per channel), `c` is `[d_conv, d_inner]`; the result is
    /// `[d_inner, n_t, n_seqs]` with `result[ch, t, s] = sum_i sx[t + i, ch, s] * c[i, ch]`.
    pub fn ssm_conv<'a>(&'a self, sx: Tensor<'a>, c: Tensor<'a>) -> Result<Tensor<'a>> {
        const OP: &str = "ssm_conv";
        expect_type(OP, "sx", sx, F32_ONLY)?;
        expect_type(OP, "c", c, F32_ONLY)?;
        let (ns, nc) = (sx.ne(), c.ne());
        let n_t = ns[0] - nc[0] + 1;
        if ns[3] != 1 || nc[2] != 1 || nc[3] != 1 || ns[1] != nc[1] || n_t < 1 || nc[0] < 1 {
            return Err(GgmlError::shape(
                OP,
                format!("sx {} and c {} do not fit together", fmt_ne(ns), fmt_ne(nc)),
            ));
        }
        let sb = sx.nb();
        if sb[0] != 4 || sb[1] != ns[0] as usize * 4 {
            return Err(GgmlError::layout(
                OP,
                "sx must have contiguous rows and channels",
            ));
        }
        expect_contiguous(OP, "c", c)?;
        // SAFETY: `sx` is a live 3-d F32 tensor and `c` a live contiguous F32 matrix whose
        // shapes match (ggml's asserts); the layout is what the CPU kernel indexes.
        self.build(|ctx| unsafe { sys::ggml_ssm_conv(ctx, sx.as_ptr(), c.as_ptr()) })
    }

    /// Unfolds convolution patches of `b` for kernel shape `a` (only `a`'s shape is used).
    ///
    /// 1-d (`is_2d == false`): `a` is `[K, IC, ...]`, `b` is `[L, IC, N]`; the result is
    /// `[IC*K, OL, N]`. 2-d: `a` is `[KW, KH, IC, ...]`, `b` is `[W, H, IC, N]`; the result is
    /// `[IC*KH*KW, OW, OH, N]`. For 1-d only `s0`, `p0`, `d0` are used.
    #[allow(clippy::too_many_arguments)]
    pub fn im2col<'a>(
        &'a self,
        a: Tensor<'a>,
        b: Tensor<'a>,
        stride: [i64; 2],
        padding: [i64; 2],
        dilation: [i64; 2],
        is_2d: bool,
        dst_ty: GgmlType,
    ) -> Result<Tensor<'a>> {
        const OP: &str = "im2col";
        if !matches!(dst_ty, GgmlType::F32 | GgmlType::F16) {
            return Err(GgmlError::ty(OP, dst_ty, "output must be f32 or f16"));
        }
        let dims = if is_2d { 2 } else { 1 };
        check_conv_params(OP, &stride[..dims], &padding[..dims], &dilation[..dims])?;
        check_im2col_data(OP, b, dst_ty)?;
        let (na, nb) = (a.ne(), b.ne());
        let out = if is_2d {
            if na[2] != nb[2] {
                return Err(GgmlError::shape(
                    OP,
                    format!(
                        "kernel {} and data {} differ in channels",
                        fmt_ne(na),
                        fmt_ne(nb)
                    ),
                ));
            }
            let ow = conv_out(nb[0], na[0], stride[0], padding[0], dilation[0]);
            let oh = conv_out(nb[1], na[1], stride[1], padding[1], dilation[1]);
            if ow <= 0 || oh <= 0 {
                return Err(GgmlError::shape(OP, "data too small for the kernel"));
            }
            [na[2] * na[1] * na[0], ow, oh, nb[3]]
        } else {
            if nb[1] != na[1] || nb[3] != 1 {
                return Err(GgmlError::shape(
                    OP,
                    format!(
                        "kernel {} and data {} differ in channels",
                        fmt_ne(na),
                        fmt_ne(nb)
                    ),
                ));
            }
            let ow = conv_out(nb[0], na[0], stride[0], padding[0], dilation[0]);
            if ow <= 0 {
                return Err(GgmlError::shape(OP, "data too small for the kernel"));
            }
            [na[1] * na[0], ow, nb[2], 1]
        };
        check_new_shape(OP, dst_ty, &out)?;
        let [s0, s1] = stride.map(|v| v as i32);
        let [p0, p1] = padding.map(|v| v as i32);
        let [d0, d1] = dilation.map(|v| v as i32);
        let (s1, p1, d1) = if is_2d { (s1, p1, d1) } else { (0, 0, 0) };
        let id = dst_ty as u32;
        // SAFETY: `a` and `b` are live; channel counts match, the output is non-empty, strides
        // and dilations are positive (no division by zero) and the data type and layout are what
        // the CPU kernel accepts.
        self.build(|ctx| unsafe {
            sys::ggml_im2col(
                ctx,
                a.as_ptr(),
                b.as_ptr(),
                s0,
                s1,
                p0,
                p1,
                d0,
                d1,
                is_2d,
                id,
            )
        })
    }

    /// 1-d convolution: kernel `a` `[K, IC, OC]` (contiguous F32/F16/BF16) over data `b`
    /// `[L, IC, N]`; the result is F32 `[OL, OC, N]`.
    ///
    /// ggml computes it as `im2col` (to F16, or F32 for BF16 kernels) followed by `mul_mat`, so
    /// inputs are rounded to half precision unless the kernel is BF16.
    pub fn conv_1d<'a>(
        &'a self,
        a: Tensor<'a>,
        b: Tensor<'a>,
        s0: i64,
        p0: i64,
        d0: i64,
    ) -> Result<Tensor<'a>> {
        const OP: &str = "conv_1d";
        expect_type(
            OP,
            "kernel",
            a,
            &[GgmlType::F32, GgmlType::F16, GgmlType::BF16],
        )?;
        expect_contiguous(OP, "kernel", a)?;
        check_conv_params(OP, &[s0], &[p0], &[d0])?;
        let col = im2col_type(a.ty());
        check_im2col_data(OP, b, col)?;
        let (na, nb) = (a.ne(), b.ne());
        if nb[1] != na[1] || nb[3] != 1 || na[3] != 1 {
            return Err(GgmlError::shape(
                OP,
                format!(
                    "kernel {} and data {} do not fit together",
                    fmt_ne(na),
                    fmt_ne(nb)
                ),
            ));
        }
        let ol = conv_out(nb[0], na[0], s0, p0, d0);
        if ol <= 0 {
            return Err(GgmlError::shape(OP, "data too small for the kernel"));
        }
        check_new_shape(OP, col, &[na[1] * na[0], ol, nb[2]])?;
        let (s0, p0, d0) = (s0 as i32, p0 as i32, d0 as i32);
        // SAFETY: `a` and `b` are live; the inner im2col's asserts hold (channels match, N is the
        // last non-trivial dim, output non-empty), the kernel is contiguous for the inner
        // reshape, and the inner mul_mat multiplies an F16/F32 im2col by an F32/F16/BF16 kernel.
        self.build(|ctx| unsafe { sys::ggml_conv_1d(ctx, a.as_ptr(), b.as_ptr(), s0, p0, d0) })
    }

    /// Depthwise 1-d convolution: kernel `a` `[K, 1, C]` over data `b` `[L, C]` (contiguous, one
    /// sequence); the result is F32 `[OL, C, 1]`.
    ///
    /// Like [`Context::conv_1d`], the data is rounded to F16 inside (unless the kernel is BF16).
    pub fn conv_1d_dw<'a>(
        &'a self,
        a: Tensor<'a>,
        b: Tensor<'a>,
        s0: i64,
        p0: i64,
        d0: i64,
    ) -> Result<Tensor<'a>> {
        const OP: &str = "conv_1d_dw";
        expect_type(
            OP,
            "kernel",
            a,
            &[GgmlType::F32, GgmlType::F16, GgmlType::BF16],
        )?;
        expect_rows_dense(OP, "kernel", a)?;
        check_conv_params(OP, &[s0], &[p0], &[d0])?;
        let col = im2col_type(a.ty());
        check_im2col_data(OP, b, col)?;
        expect_contiguous(OP, "data", b)?;
        let (na, nb) = (a.ne(), b.ne());
        if na[1] != 1 || na[3] != 1 || nb[2] != 1 || nb[3] != 1 || na[2] != nb[1] {
            return Err(GgmlError::shape(
                OP,
                format!(
                    "kernel {} must be [K, 1, C] for data {} = [L, C]",
                    fmt_ne(na),
                    fmt_ne(nb)
                ),
            ));
        }
        let ol = conv_out(nb[0], na[0], s0, p0, d0);
        if ol <= 0 {
            return Err(GgmlError::shape(OP, "data too small for the kernel"));
        }
        check_new_shape(OP, col, &[na[0], ol, nb[1]])?;
        let (s0, p0, d0) = (s0 as i32, p0 as i32, d0 as i32);
        // SAFETY: `a` and `b` are live; `b` is contiguous for the inner reshape, the inner
        // im2col's asserts hold (kernel ne[1] == 1, one sequence, non-empty output), the inner
        // mul_mat's shapes match (kernel channels == data channels) and its types are supported.
        self.build(|ctx| unsafe { sys::ggml_conv_1d_dw(ctx, a.as_ptr(), b.as_ptr(), s0, p0, d0) })
    }

    /// 2-d convolution: kernel `a` `[KW, KH, IC, OC]` (contiguous F32/F16/BF16) over data `b`
    /// `[W, H, IC, N]`; the result is F32 `[OW, OH, OC, N]`.
    pub fn conv_2d<'a>(
        &'a self,
        a: Tensor<'a>,
        b: Tensor<'a>,
        stride: [i64; 2],
        padding: [i64; 2],
        dilation: [i64; 2],
    ) -> Result<Tensor<'a>> {
        const OP: &str = "conv_2d";
        expect_type(
            OP,
            "kernel",
            a,
            &[GgmlType::F32, GgmlType::F16, GgmlType::BF16],
        )?;
        expect_contiguous(OP, "kernel", a)?;
        check_conv_params(OP, &stride, &padding, &dilation)?;
        let col = im2col_type(a.ty());
        check_im2col_data(OP, b, col)?;
        let (na, nb) = (a.ne(), b.ne());
        if na[2] != nb[2] {
            return Err(GgmlError::shape(
                OP,
                format!(
                    "kernel {} and data {} differ in channels",
                    fmt_ne(na),
                    fmt_ne(nb)
                ),
            ));
        }
        let ow = conv_out(nb[0], na[0], stride[0], padding[0], dilation[0]);
        let oh = conv_out(nb[1], na[1], stride[1], padding[1], dilation[1]);
        if ow <= 0 || oh <= 0 {
            return Err(GgmlError::shape(OP, "data too small for the kernel"));
        }
        check_new_shape(OP, col, &[na[0] * na[1] * na[2], ow, oh, nb[3]])?;
        let [s0, s1] = stride.map(|v| v as i32);
        let [p0, p1] = padding.map(|v| v as i32);
        let [d0, d1] = dilation.map(|v| v as i32);
        // SAFETY: `a` and `b` are live; the inner im2col's asserts hold, the kernel is contiguous
        // for the inner reshape, and the inner mul_mat and cont see supported types and shapes.
        self.build(|ctx| unsafe {
            sys::ggml_conv_2d(ctx, a.as_ptr(), b.as_ptr(), s0, s1, p0, p1, d0, d1)
        })
    }

    /// Depthwise 2-d convolution: kernel `a` `[KW, KH, 1, C]` (contiguous F16, or BF16) over
    /// data `b` `[W, H, C, N]` (contiguous); the result is F32 `[OW, OH, C, N]`.
    pub fn conv_2d_dw<'a>(
        &'a self,
        a: Tensor<'a>,
        b: Tensor<'a>,
        stride: [i64; 2],
        padding: [i64; 2],
        dilation: [i64; 2],
    ) -> Result<Tensor<'a>> {
        const OP: &str = "conv_2d_dw";
        expect_type(OP, "kernel", a, &[GgmlType::F16, GgmlType::BF16])?;
        expect_contiguous(OP, "kernel", a)?;
        expect_contiguous(OP, "data", b)?;
        check_conv_params(OP, &stride, &padding, &dilation)?;
        let col = im2col_type(a.ty());
        check_im2col_data(OP, b, col)?;
        let (na, nb) = (a.ne(), b.ne());
        if na[2] != 1 || na[3] != nb[2] {
            return Err(GgmlError::shape(
                OP,
                format!(
                    "kernel {} must be [KW, KH, 1, C] for data {}",
                    fmt_ne(na),
                    fmt_ne(nb)
                ),
            ));
        }
        let ow = conv_out(nb[0], na[0], stride[0], padding[0], dilation[0]);
        let oh = conv_out(nb[1], na[1], stride[1], padding[1], dilation[1]);
        if ow <= 0 || oh <= 0 {
            return Err(GgmlError::shape(OP, "data too small for the kernel"));
        }
        check_new_shape(OP, col, &[na[0] * na[1], ow, oh, nb[2] * nb[3]])?;
        let [s0, s1] = stride.map(|v| v as i32);
        let [p0, p1] = padding.map(|v| v as i32);
        let [d0, d1] = dilation.map(|v| v as i32);
        // SAFETY: `a` and `b` are live and contiguous for the inner reshapes; the inner im2col's
        // asserts hold and the inner mul_mat multiplies an F16/BF16 kernel by its matching
        // im2col type with kernel channels equal to data channels.
        self.build(|ctx| unsafe {
            sys::ggml_conv_2d_dw(ctx, a.as_ptr(), b.as_ptr(), s0, s1, p0, p1, d0, d1)
        })
    }

    /// Sinusoidal embeddings of the F32 `timesteps` vector (`[n]`): result `[dim, n]`.
    pub fn timestep_embedding<'a>(
        &'a self,
        timesteps: Tensor<'a>,
        dim: usize,
        max_period: i32,
    ) -> Result<Tensor<'a>> {
        const OP: &str = "timestep_embedding";
        expect_type(OP, "timesteps", timesteps, F32_ONLY)?;
        expect_contiguous(OP, "timesteps", timesteps)?;
        let n = timesteps.ne();
        if n[1] != 1 || n[2] != 1 || n[3] != 1 {
            return Err(GgmlError::shape(OP, "timesteps must be a vector"));
        }
        if dim == 0 || max_period <= 0 {
            return Err(GgmlError::arg(OP, "dim and max_period must be positive"));
        }
        let dim = c_int(OP, "dim", dim as i64)?;
        check_new_shape(OP, GgmlType::F32, &[i64::from(dim), n[0]])?;
        // SAFETY: `timesteps` is a live contiguous F32 vector; `dim` and `max_period` are
        // positive.
        self.build(|ctx| unsafe {
            sys::ggml_timestep_embedding(ctx, timesteps.as_ptr(), dim, max_period)
        })
    }
}
