//! `dw_striding` x8 subsampling: Conv2d(1 -> C, k3 s2 p1), ReLU, then twice a depthwise
//! Conv2d(k3 s2 p1) + pointwise 1x1 Conv2d + ReLU, flattened channel-major and projected to
//! `d_model` by `a.pre_encode.out`.

use crate::ggml::{Context, Param, Tensor};
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
        // [F, T, C] -> [F, C, T] -> rows of C*F features, channel-major like torch's
        // `transpose(1, 2).reshape(b, t, c * f)`
        let ne = x.ne();
        let x = ctx.cont(ctx.permute(x, [0, 2, 1, 3])?)?;
        let x = ctx.reshape_2d(x, ne[0] * ne[2], ne[1])?;
        Ok(self.out.forward(ctx, x)?)
    }
}
