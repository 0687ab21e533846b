//! Audio adapter: LayerNorm -> Linear(d_model -> hidden) -> GELU (erf) -> Linear(hidden -> out).

use crate::ggml::{Context, Tensor};
use crate::lfm2_audio::model::load_error::Result as LoadResult;
use crate::lfm2_audio::model::nn::{LayerNorm, Linear};
use crate::lfm2_audio::model::weights::VarBuilder;

use super::config::EncoderConfig;
use super::EncodeResult;

/// The adapter weights (`mm.a.mlp.{0,1,3}`).
#[derive(Debug, Clone)]
pub(crate) struct Adapter {
    norm: LayerNorm,
    up: Linear,
    down: Linear,
}

impl Adapter {
    /// Binds and checks the adapter tensors.
    pub(crate) fn load(vb: &VarBuilder<'_>, cfg: &EncoderConfig) -> LoadResult<Adapter> {
        let mlp = vb.pp("mm.a.mlp");
        Ok(Adapter {
            norm: LayerNorm::load(&mlp.pp(0), cfg.d_model, cfg.eps)?,
            up: Linear::load(&mlp.pp(1), cfg.d_model, cfg.adapter_hidden, true)?,
            down: Linear::load(&mlp.pp(3), cfg.adapter_hidden, cfg.out_dim, true)?,
        })
    }

    /// `x`: `[d_model, T]` -> `[out_dim, T]`.
    pub(crate) fn build<'a>(&self, ctx: &'a Context, x: Tensor<'a>) -> EncodeResult<Tensor<'a>> {
        let h = self.norm.forward(ctx, x)?;
        let h = ctx.gelu_erf(self.up.forward(ctx, h)?)?;
        Ok(self.down.forward(ctx, h)?)
    }
}
