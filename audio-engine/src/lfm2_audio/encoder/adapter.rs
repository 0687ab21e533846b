//! Audio adapter: LayerNorm -> Linear(d_model -> hidden) -> GELU (erf) -> Linear(hidden -> out).

use crate::ggml::{Context, Tensor};
use crate::lfm2_audio::load_error::Result as LoadResult;
use crate::lfm2_audio::weights::Weights;

use super::config::{checked, EncoderConfig, Role};
use super::conformer::{layer_norm, linear, Linear, Norm};
use super::EncodeResult;

/// The adapter weights (`mm.a.mlp.{0,1,3}`).
pub(crate) struct Adapter<'a> {
    norm: Norm<'a>,
    up: Linear<'a>,
    down: Linear<'a>,
}

impl<'a> Adapter<'a> {
    /// Resolves and checks the adapter tensors.
    pub(crate) fn load(w: &Weights<'a>, cfg: &EncoderConfig) -> LoadResult<Adapter<'a>> {
        let lin = |i: u32, n_in: usize, n_out: usize| -> LoadResult<Linear<'a>> {
            Ok(Linear {
                w: checked(
                    w,
                    &format!("mm.a.mlp.{i}.weight"),
                    &[n_in, n_out],
                    Role::Matrix,
                )?,
                b: Some(checked(
                    w,
                    &format!("mm.a.mlp.{i}.bias"),
                    &[n_out],
                    Role::Vector,
                )?),
            })
        };
        Ok(Adapter {
            norm: Norm {
                w: checked(w, "mm.a.mlp.0.weight", &[cfg.d_model], Role::Vector)?,
                b: checked(w, "mm.a.mlp.0.bias", &[cfg.d_model], Role::Vector)?,
            },
            up: lin(1, cfg.d_model, cfg.adapter_hidden)?,
            down: lin(3, cfg.adapter_hidden, cfg.out_dim)?,
        })
    }

    /// `x`: `[d_model, T]` -> `[out_dim, T]`.
    pub(crate) fn build(
        &self,
        ctx: &'a Context,
        x: Tensor<'a>,
        eps: f32,
    ) -> EncodeResult<Tensor<'a>> {
        let h = layer_norm(ctx, x, &self.norm, eps)?;
        let h = ctx.gelu_erf(linear(ctx, h, &self.up)?)?;
        linear(ctx, h, &self.down)
    }
}
