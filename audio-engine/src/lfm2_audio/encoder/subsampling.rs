//! `dw_striding` x8 subsampling: Conv2d(1 -> C, k3 s2 p1), ReLU, then twice a depthwise
//! Conv2d(k3 s2 p1) + pointwise 1x1 Conv2d + ReLU, flattened channel-major and projected to
//! `d_model` by `a.pre_encode.out`.

use crate::ggml::{Context, Tensor};
use crate::lfm2_audio::load_error::Result as LoadResult;
use crate::lfm2_audio::weights::Weights;

use super::config::{checked, EncoderConfig, Role};
use super::EncodeResult;

/// The subsampling weights.
pub(crate) struct Subsampling<'a> {
    conv0: (Tensor<'a>, Tensor<'a>),
    dw1: (Tensor<'a>, Tensor<'a>),
    pw1: (Tensor<'a>, Tensor<'a>),
    dw2: (Tensor<'a>, Tensor<'a>),
    pw2: (Tensor<'a>, Tensor<'a>),
    out: (Tensor<'a>, Tensor<'a>),
}

impl<'a> Subsampling<'a> {
    /// Resolves and checks every subsampling tensor.
    pub(crate) fn load(w: &Weights<'a>, cfg: &EncoderConfig) -> LoadResult<Subsampling<'a>> {
        let c = cfg.sub_channels;
        // ggml order: kernels [KW, KH, IC, OC], biases [1, 1, C] (the converter's [C, 1, 1])
        let conv = |i: u32, kernel: &[usize]| -> LoadResult<(Tensor<'a>, Tensor<'a>)> {
            Ok((
                checked(w, &format!("a.conv1d.{i}.weight"), kernel, Role::Kernel)?,
                checked(w, &format!("a.conv1d.{i}.bias"), &[1, 1, c], Role::Vector)?,
            ))
        };
        let out_in = c * cfg.sub_freq();
        Ok(Subsampling {
            conv0: conv(0, &[3, 3, 1, c])?,
            dw1: conv(2, &[3, 3, 1, c])?,
            pw1: conv(3, &[1, 1, c, c])?,
            dw2: conv(5, &[3, 3, 1, c])?,
            pw2: conv(6, &[1, 1, c, c])?,
            out: (
                checked(
                    w,
                    "a.pre_encode.out.weight",
                    &[out_in, cfg.d_model],
                    Role::Matrix,
                )?,
                checked(w, "a.pre_encode.out.bias", &[cfg.d_model], Role::Vector)?,
            ),
        })
    }

    /// `mel`: `[n_mels, T]` (mel bins fastest). Returns `[d_model, ceil(T / 8)]`.
    pub(crate) fn build(&self, ctx: &'a Context, mel: Tensor<'a>) -> EncodeResult<Tensor<'a>> {
        // conv_2d sees the input as an image [W = mel, H = time, IC = 1, N = 1]
        let (w, b) = self.conv0;
        // why direct: ggml_conv_2d rounds the activations to F16 in its im2col
        let x = ctx.conv_2d_direct(w, mel, [2, 2], [1, 1], [1, 1])?; // [F1, T1, C]
        let x = ctx.relu(ctx.add(x, b)?)?;
        let mut x = x;
        for (dw, pw) in [(self.dw1, self.pw1), (self.dw2, self.pw2)] {
            // why: the direct depthwise kernel stays in F32; ggml's im2col variant rounds the
            // activations to F16.
            x = ctx.conv_2d_dw_direct(dw.0, x, [2, 2], [1, 1], [1, 1])?;
            x = ctx.add(x, dw.1)?;
            x = ctx.conv_2d_direct(pw.0, x, [1, 1], [0, 0], [1, 1])?;
            x = ctx.relu(ctx.add(x, pw.1)?)?;
        }
        // [F, T, C] -> [F, C, T] -> rows of C*F features, channel-major like torch's
        // `transpose(1, 2).reshape(b, t, c * f)`
        let ne = x.ne();
        let x = ctx.cont(ctx.permute(x, [0, 2, 1, 3])?)?;
        let x = ctx.reshape_2d(x, ne[0] * ne[2], ne[1])?;
        let (w, b) = self.out;
        Ok(ctx.add(ctx.mul_mat(w, x)?, b)?)
    }
}
