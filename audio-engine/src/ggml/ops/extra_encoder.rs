//! Operations the FastConformer audio encoder needs beyond the common set: the direct (F32)
//! depthwise 2-d convolution of its `dw_striding` subsampling.

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
        expect_type(OP, "kernel", a, F32_F16)?;
        expect_type(OP, "data", b, F32_ONLY)?;
        expect_contiguous(OP, "kernel", a)?;
        // why: the CPU kernel supports WHCN-contiguous data (and a CWHN permutation we do not
        // produce); anything else aborts the process.
        expect_contiguous(OP, "data", b)?;
        if stride.iter().any(|&v| v < 1)
            || dilation.iter().any(|&v| v < 1)
            || padding.iter().any(|&v| v < 0)
        {
            return Err(GgmlError::arg(
                OP,
                format!(
                    "strides {stride:?} and dilations {dilation:?} must be >= 1, paddings \
                     {padding:?} >= 0"
                ),
            ));
        }
        for &v in stride.iter().chain(&padding).chain(&dilation) {
            c_int(OP, "convolution parameter", v)?;
        }
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
        check_new_shape(OP, GgmlType::F32, &[ow, oh, nb[2], nb[3]])?;
        let [s0, s1] = stride.map(|v| v as i32);
        let [p0, p1] = padding.map(|v| v as i32);
        let [d0, d1] = dilation.map(|v| v as i32);
        // SAFETY: `a` and `b` are live; `a.ne[2] == 1` and `a.ne[3] == b.ne[2]` (ggml's asserts),
        // the output shape is valid, and the CPU kernel's type (F32/F16 kernel, F32 data) and
        // layout (contiguous data) requirements hold.
        self.build(|ctx| unsafe {
            sys::ggml_conv_2d_dw_direct(ctx, a.as_ptr(), b.as_ptr(), s0, s1, p0, p1, d0, d1)
        })
    }
}
