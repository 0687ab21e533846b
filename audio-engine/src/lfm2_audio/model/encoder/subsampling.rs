//! `dw_striding` x8 subsampling: Conv2d(1 -> C, k3 s2 p1), ReLU, then twice a depthwise
//! Conv2d(k3 s2 p1) + pointwise 1x1 Conv2d + ReLU, flattened channel-major and projected to
//! `d_model` by `a.pre_encode.out`.

use crate::ggml::{Context, GgmlType, Param, Tensor};
use crate::lfm2_audio::model::load_error::Result as LoadResult;
use crate::lfm2_audio::model::nn::Linear;
use crate::lfm2_audio::model::weights::{Role, VarBuilder};

use super::config::EncoderConfig;
use super::EncodeResult;

/// One convolution's kernel and bias.
#[derive(Debug, Clone)]
struct Conv {
    /// `[KW, KH, IC, OC]`, F32 or F16.
    w: Param,
    /// `[1, 1, C]`, F32.
    b: Param,
}

/// The subsampling weights.
#[derive(Debug, Clone)]
pub(crate) struct Subsampling {
    conv0: Conv,
    dw1: Conv,
    pw1: Conv,
    dw2: Conv,
    pw2: Conv,
    out: Linear,
}

impl Subsampling {
    /// Binds and checks every subsampling tensor (`a.conv1d.{0,2,3,5,6}`, `a.pre_encode.out`).
    pub(crate) fn load(vb: &VarBuilder<'_>, cfg: &EncoderConfig) -> LoadResult<Subsampling> {
        let c = cfg.sub_channels;
        // ggml order: kernels [KW, KH, IC, OC], biases [1, 1, C] (the converter's [C, 1, 1])
        let conv = |i: u32, kernel: &[usize]| -> LoadResult<Conv> {
            let vb = vb.pp("a.conv1d").pp(i);
            Ok(Conv {
                w: vb.get("weight", kernel, Role::Kernel)?,
                b: vb.get("bias", &[1, 1, c], Role::Vector)?,
            })
        };
        let out_in = c * cfg.sub_freq();
        Ok(Subsampling {
            conv0: conv(0, &[3, 3, 1, c])?,
            dw1: conv(2, &[3, 3, 1, c])?,
            pw1: conv(3, &[1, 1, c, c])?,
            dw2: conv(5, &[3, 3, 1, c])?,
            pw2: conv(6, &[1, 1, c, c])?,
            out: Linear::load(&vb.pp("a.pre_encode.out"), out_in, cfg.d_model, true)?,
        })
    }

    /// `mel`: `[n_mels, T]` (mel bins fastest). Returns `[d_model, ceil(T / 8)]`.
    pub(crate) fn build<'a>(&self, ctx: &'a Context, mel: Tensor<'a>) -> EncodeResult<Tensor<'a>> {
        let kernels = [&self.conv0, &self.dw1, &self.pw1, &self.dw2, &self.pw2];
        let x = if kernels.iter().all(|c| c.w.ty() == GgmlType::F32) {
            self.convs_channels_fastest(ctx, mel)?
        } else {
            self.convs_direct(ctx, mel)?
        };
        // [C, F, T] -> [F, C, T]: rows of C*F features, channel-major like torch's
        // `transpose(1, 2).reshape(b, t, c * f)`
        let ne = x.ne();
        let x = ctx.cont(ctx.permute(x, [1, 0, 2, 3])?)?;
        let x = ctx.reshape_2d(x, ne[0] * ne[1], ne[2])?;
        Ok(self.out.forward(ctx, x)?)
    }

    /// The convolutions with F32 kernels, on channels-fastest activations `[C, F, T]`: the first
    /// as `im2col` + `mul_mat`, the depthwise ones by ggml's channels-fastest kernel, the
    /// pointwise ones as plain `mul_mat`s. Returns `[C, F3, T3]`.
    ///
    /// why: the same products in the same order as [`Self::convs_direct`] (the direct
    /// convolution is an F32 `im2col` into a `mul_mat` of the same shapes, and both depthwise
    /// kernels sum their taps alike), so the same bits, without the direct kernel's per-patch
    /// copies and scattered writes, its one-element-at-a-time depthwise loop, and bias adds that
    /// broadcast a single value per row.
    fn convs_channels_fastest<'a>(
        &self,
        ctx: &'a Context,
        mel: Tensor<'a>,
    ) -> EncodeResult<Tensor<'a>> {
        let p = |t: &Param| ctx.param(t);
        let bias = |c: &Conv| -> EncodeResult<Tensor<'a>> {
            let b = p(&c.b);
            Ok(ctx.reshape_1d(b, b.ne()[2])?)
        };
        let matrix = |c: &Conv| -> EncodeResult<Tensor<'a>> {
            let w = p(&c.w);
            let ne = w.ne();
            Ok(ctx.reshape_2d(w, ne[0] * ne[1] * ne[2], ne[3])?) // [KW*KH*IC, OC]
        };
        let c0 = &self.conv0;
        // patches [9, F1, T1] of the image [W = mel, H = time], then [C, F1, T1]
        let patches = ctx.im2col(p(&c0.w), mel, [2, 2], [1, 1], [1, 1], true, GgmlType::F32)?;
        let x = ctx.mul_mat(matrix(c0)?, patches)?;
        let mut x = ctx.relu(ctx.add(x, bias(c0)?)?)?;
        for (dw, pw) in [(&self.dw1, &self.pw1), (&self.dw2, &self.pw2)] {
            x = ctx.conv_2d_dw_direct_cwhn(p(&dw.w), x, [2, 2], [1, 1], [1, 1])?;
            x = ctx.add(x, bias(dw)?)?;
            let ne = x.ne();
            let flat = ctx.reshape_2d(x, ne[0], ne[1] * ne[2])?;
            let y = ctx.mul_mat(matrix(pw)?, flat)?;
            let y = ctx.reshape_3d(y, ne[0], ne[1], ne[2])?;
            x = ctx.relu(ctx.add(y, bias(pw)?)?)?;
        }
        Ok(x)
    }

    /// The convolutions by ggml's direct kernels on `[F, T, C]` activations (any kernel type:
    /// F16 kernels round the patches to F16). Returns `[C, F3, T3]`.
    fn convs_direct<'a>(&self, ctx: &'a Context, mel: Tensor<'a>) -> EncodeResult<Tensor<'a>> {
        let p = |t: &Param| ctx.param(t);
        // conv_2d sees the input as an image [W = mel, H = time, IC = 1, N = 1]
        let c0 = &self.conv0;
        // why direct: ggml_conv_2d rounds the activations to F16 in its im2col
        let x = ctx.conv_2d_direct(p(&c0.w), mel, [2, 2], [1, 1], [1, 1])?; // [F1, T1, C]
        let x = ctx.relu(ctx.add(x, p(&c0.b))?)?;
        let mut x = x;
        for (dw, pw) in [(&self.dw1, &self.pw1), (&self.dw2, &self.pw2)] {
            // why: the direct depthwise kernel stays in F32; ggml's im2col variant rounds the
            // activations to F16.
            x = ctx.conv_2d_dw_direct(p(&dw.w), x, [2, 2], [1, 1], [1, 1])?;
            x = ctx.add(x, p(&dw.b))?;
            x = ctx.conv_2d_direct(p(&pw.w), x, [1, 1], [0, 0], [1, 1])?;
            x = ctx.relu(ctx.add(x, p(&pw.b))?)?;
        }
        // [F, T, C] seen as [C, F, T] (the caller's permute + cont copies it once)
        Ok(ctx.permute(x, [1, 2, 0, 3])?)
    }
}
