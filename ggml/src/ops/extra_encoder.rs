//! Operations the FastConformer audio encoder needs beyond the common set: the direct (F32)
//! 2-d convolutions of its `dw_striding` subsampling. ggml's `ggml_conv_2d` and
//! `ggml_conv_2d_dw` go through an F16 `im2col` even for F32 kernels; the direct variants keep
//! F32 activations when the kernel is F32.

use ggml_sys as sys;

use super::super::context::Context;
use super::super::dtype::GgmlType;
use super::super::error::{GgmlError, Result};
use super::super::tensor::Tensor;
use super::{c_int, check_new_shape, expect_contiguous, expect_type, fmt_ne, F32_F16, F32_ONLY};

/// ggml's `ggml_calc_conv_output_size` (C integer division, truncating toward zero).
fn conv_out(ins: i64, ks: i64, s: i64, p: i64, d: i64) -> i64 {
    (ins + 2 * p - d * (ks - 1) - 1) / s + 1
}

/// Checks stride, padding and dilation (and that they fit C `int`s).
fn check_params(op: &'static str, s: [i64; 2], p: [i64; 2], d: [i64; 2]) -> Result<()> {
    if s.iter().any(|&v| v < 1) || d.iter().any(|&v| v < 1) || p.iter().any(|&v| v < 0) {
        return Err(GgmlError::arg(
            op,
            format!("strides {s:?} and dilations {d:?} must be >= 1, paddings {p:?} >= 0"),
        ));
    }
    for &v in s.iter().chain(&p).chain(&d) {
        c_int(op, "convolution parameter", v)?;
    }
    Ok(())
}

/// The checks every direct convolution makes first: an F32 or F16 kernel and F32 data, both
/// contiguous (the CPU kernels abort on anything else), and valid parameters.
fn check_direct(
    op: &'static str,
    kernel: Tensor<'_>,
    data: Tensor<'_>,
    s: [i64; 2],
    p: [i64; 2],
    d: [i64; 2],
) -> Result<()> {
    expect_type(op, "kernel", kernel, F32_F16)?;
    expect_type(op, "data", data, F32_ONLY)?;
    expect_contiguous(op, "kernel", kernel)?;
    expect_contiguous(op, "data", data)?;
    check_params(op, s, p, d)
}

/// Stride, padding and dilation as the C `int`s ggml takes (checked by [`check_params`]).
fn c_params(s: [i64; 2], p: [i64; 2], d: [i64; 2]) -> [i32; 6] {
    [s[0], s[1], p[0], p[1], d[0], d[1]].map(|v| v as i32)
}

/// Output width and height of a 2-d convolution of `data` by `kernel`, both positive.
fn out_size(
    op: &'static str,
    kernel: [i64; 4],
    data: [i64; 4],
    s: [i64; 2],
    p: [i64; 2],
    d: [i64; 2],
) -> Result<(i64, i64)> {
    let ow = conv_out(data[0], kernel[0], s[0], p[0], d[0]);
    let oh = conv_out(data[1], kernel[1], s[1], p[1], d[1]);
    if ow <= 0 || oh <= 0 {
        return Err(GgmlError::shape(op, "data too small for the kernel"));
    }
    Ok((ow, oh))
}

impl Context {
    /// Depthwise 2-d convolution computed directly (no `im2col`, no rounding to F16): kernel `a`
    /// `[KW, KH, 1, C]` (contiguous F32 or F16) over data `b` `[W, H, C, N]` (contiguous F32);
    /// the result is F32 `[OW, OH, C, N]` with
    /// `r[x, y, c, n] = sum_{i,j} a[i, j, 0, c] * b[x*s0 + i*d0 - p0, y*s1 + j*d1 - p1, c, n]`
    /// (out-of-range data reads as zero).
    pub fn conv_2d_dw_direct<'a>(
        &'a self,
        a: Tensor<'a>,
        b: Tensor<'a>,
        stride: [i64; 2],
        padding: [i64; 2],
        dilation: [i64; 2],
    ) -> Result<Tensor<'a>> {
        const OP: &str = "conv_2d_dw_direct";
        // why contiguous: the CPU kernel takes WHCN-contiguous data (channels-fastest data goes
        // through `conv_2d_dw_direct_cwhn`); anything else aborts the process.
        check_direct(OP, a, b, stride, padding, dilation)?;
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
        let (ow, oh) = out_size(OP, na, nb, stride, padding, dilation)?;
        check_new_shape(OP, GgmlType::F32, &[ow, oh, nb[2], nb[3]])?;
        let [s0, s1, p0, p1, d0, d1] = c_params(stride, padding, dilation);
        // SAFETY: `a` and `b` are live; `a.ne[2] == 1` and `a.ne[3] == b.ne[2]` (ggml's asserts),
        // the output shape is valid, and the CPU kernel's type (F32/F16 kernel, F32 data) and
        // layout (contiguous data) requirements hold.
        self.build(|ctx| unsafe {
            sys::ggml_conv_2d_dw_direct(ctx, a.as_ptr(), b.as_ptr(), s0, s1, p0, p1, d0, d1)
        })
    }

    /// [`Context::conv_2d_dw_direct`] on channels-fastest data: kernel `a` `[KW, KH, 1, C]`
    /// (contiguous F32 or F16, as stored) over data `b` `[C, W, H, N]` (contiguous F32, channels
    /// fastest); the result is F32 `[C, OW, OH, N]`, contiguous, with the same values.
    ///
    /// why: ggml's CPU kernel for this layout runs SIMD across the channels (the layout the
    /// kernel above takes is computed one output element at a time), and a channels-fastest
    /// tensor is what a pointwise convolution as a plain `mul_mat` reads and writes. Both
    /// kernels sum the taps of an output in the same order (rows, then columns, skipping
    /// out-of-range ones) with one multiply-add per tap, so the results are the same bits.
    pub fn conv_2d_dw_direct_cwhn<'a>(
        &'a self,
        a: Tensor<'a>,
        b: Tensor<'a>,
        stride: [i64; 2],
        padding: [i64; 2],
        dilation: [i64; 2],
    ) -> Result<Tensor<'a>> {
        const OP: &str = "conv_2d_dw_direct_cwhn";
        check_direct(OP, a, b, stride, padding, dilation)?;
        let (na, nb) = (a.ne(), b.ne());
        if na[2] != 1 || na[3] != nb[0] || nb[0] < 2 {
            return Err(GgmlError::shape(
                OP,
                format!(
                    "kernel {} must be [KW, KH, 1, C] for data {} ([C, W, H, N], C >= 2)",
                    fmt_ne(na),
                    fmt_ne(nb)
                ),
            ));
        }
        // The kernel as ggml's channels-fastest kernel expects it: memory [C, KW, KH] seen as
        // [KW, KH, 1, C] whose unit dimension has the smallest stride (its assert).
        let k = self.cont(self.permute(a, [2, 3, 0, 1])?)?; // [1, C, KW, KH]
        let k = self.permute(k, [2, 3, 0, 1])?; // [KW, KH, 1, C], strides [C, C*KW, 1, 1]
                                                // The data seen as [W, H, C, N] with the channels contiguous.
        let x = self.permute(b, [2, 0, 1, 3])?;
        let dims = [nb[1], nb[2], nb[0], nb[3]];
        let (ow, oh) = out_size(OP, na, dims, stride, padding, dilation)?;
        check_new_shape(OP, GgmlType::F32, &[ow, oh, nb[0], nb[3]])?;
        let [s0, s1, p0, p1, d0, d1] = c_params(stride, padding, dilation);
        // SAFETY: `k` and `x` are live; `k.ne[2] == 1` and `k.ne[3] == x.ne[2]` (ggml's
        // asserts); `x` is contiguous in its channels (`nb[2]` the element size, `nb[0]` and
        // `nb[1]` larger, as C >= 2) and `k`'s strides satisfy the channels-fastest kernel's
        // assert (`nb[0] >= nb[2]`, `nb[1] >= nb[0]`); both are F32.
        let r = self.build(|ctx| unsafe {
            sys::ggml_conv_2d_dw_direct(ctx, k.as_ptr(), x.as_ptr(), s0, s1, p0, p1, d0, d1)
        })?;
        // ggml lays the result out like the data: [OW, OH, C, N] with the channels fastest.
        self.permute(r, [1, 2, 0, 3])
    }

    /// 2-d convolution computed by the direct kernel (patches in the kernel's type, so F32
    /// throughout for an F32 kernel): kernel `a` `[KW, KH, IC, OC]` (contiguous F32 or F16) over
    /// data `b` `[W, H, IC, N]` (F32, any strides); the result is F32 `[OW, OH, OC, N]`.
    pub fn conv_2d_direct<'a>(
        &'a self,
        a: Tensor<'a>,
        b: Tensor<'a>,
        stride: [i64; 2],
        padding: [i64; 2],
        dilation: [i64; 2],
    ) -> Result<Tensor<'a>> {
        const OP: &str = "conv_2d_direct";
        expect_type(OP, "kernel", a, F32_F16)?;
        expect_type(OP, "data", b, F32_ONLY)?;
        expect_contiguous(OP, "kernel", a)?;
        check_params(OP, stride, padding, dilation)?;
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
        let (ow, oh) = out_size(OP, na, nb, stride, padding, dilation)?;
        check_new_shape(OP, GgmlType::F32, &[ow, oh, na[3], nb[3]])?;
        let [s0, s1, p0, p1, d0, d1] = c_params(stride, padding, dilation);
        // SAFETY: `a` and `b` are live; `a.ne[2] == b.ne[2]` (ggml's assert), the output shape
        // is valid, and the CPU kernel's requirements hold (contiguous F32/F16 kernel, F32 data
        // read through its strides).
        self.build(|ctx| unsafe {
            sys::ggml_conv_2d_direct(ctx, a.as_ptr(), b.as_ptr(), s0, s1, p0, p1, d0, d1)
        })
    }
}
