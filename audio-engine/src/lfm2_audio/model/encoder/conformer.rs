//! One FastConformer (macaron) layer:
//! `x += 0.5 * FF1(LN x); x += RelPosMHA(LN x); x += Conv(LN x); x += 0.5 * FF2(LN x); LN_out`,
//! with FF = Linear-SiLU-Linear, Transformer-XL relative-position attention (`pos_bias_u/v`,
//! `linear_pos`, rel_shift, scale `1/sqrt(d_k)`) and Conv = pointwise -> GLU -> depthwise
//! (non-causal, odd kernel) -> BatchNorm (folded to scale + shift by the converter) -> SiLU ->
//! pointwise.

use crate::ggml::{Context, Param, Tensor};
use crate::lfm2_audio::model::load_error::Result as LoadResult;
use crate::lfm2_audio::model::nn::{LayerNorm, Linear};
use crate::lfm2_audio::model::weights::{Role, VarBuilder};

use super::config::EncoderConfig;
use super::EncodeResult;

/// The weights of one conformer layer.
#[derive(Debug, Clone)]
pub(crate) struct ConformerLayer {
    ff1_norm: LayerNorm,
    ff1_up: Linear,
    ff1_down: Linear,
    att_norm: LayerNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    pos: Linear,
    pos_bias_u: Param,
    pos_bias_v: Param,
    conv_norm_in: LayerNorm,
    pw1: Linear,
    /// Depthwise kernel `[K, d]` (F32: it feeds `ssm_conv`) and bias `[d]`.
    dw: (Param, Param),
    /// The folded BatchNorm: scale and shift `[d]`.
    bn: (Param, Param),
    pw2: Linear,
    ff2_norm: LayerNorm,
    ff2_up: Linear,
    ff2_down: Linear,
    out_norm: LayerNorm,
}

impl ConformerLayer {
    /// Binds and checks the tensors of layer `il` (names `a.blk.{il}.*`).
    pub(crate) fn load(
        vb: &VarBuilder<'_>,
        cfg: &EncoderConfig,
        il: usize,
    ) -> LoadResult<ConformerLayer> {
        let (d, ff, k) = (cfg.d_model, cfg.ff_dim, cfg.conv_kernel);
        let vb = vb.pp("a.blk").pp(il);
        let norm = |part: &str| LayerNorm::load(&vb.pp(part), d, cfg.eps);
        let lin = |part: &str, n_in: usize, n_out: usize, bias: bool| {
            Linear::load(&vb.pp(part), n_in, n_out, bias)
        };
        let (dk, h) = (cfg.head_dim(), cfg.n_heads);
        Ok(ConformerLayer {
            ff1_norm: norm("ffn_norm")?,
            ff1_up: lin("ffn_up", d, ff, true)?,
            ff1_down: lin("ffn_down", ff, d, true)?,
            att_norm: norm("ln1")?,
            q: lin("attn_q", d, d, true)?,
            k: lin("attn_k", d, d, true)?,
            v: lin("attn_v", d, d, true)?,
            o: lin("attn_out", d, d, true)?,
            pos: lin("linear_pos", d, d, false)?,
            pos_bias_u: vb.get("pos_bias_u", &[dk, h], Role::Vector)?,
            pos_bias_v: vb.get("pos_bias_v", &[dk, h], Role::Vector)?,
            conv_norm_in: norm("norm_conv")?,
            pw1: lin("conv_pw1", d, 2 * d, true)?,
            // the depthwise kernel feeds ssm_conv, which takes F32 `[K, d]`
            dw: (
                vb.pp("conv_dw").get("weight", &[k, d], Role::Vector)?,
                vb.pp("conv_dw").get("bias", &[d], Role::Vector)?,
            ),
            bn: (
                vb.pp("conv_norm").get("weight", &[d], Role::Vector)?,
                vb.pp("conv_norm").get("bias", &[d], Role::Vector)?,
            ),
            pw2: lin("conv_pw2", d, d, true)?,
            ff2_norm: norm("ffn_norm_1")?,
            ff2_up: lin("ffn_up_1", d, ff, true)?,
            ff2_down: lin("ffn_down_1", ff, d, true)?,
            out_norm: norm("ln2")?,
        })
    }

    /// `x` `[d, T]`, `pos_emb` `[d, 2T - 1]` (relative positions `T-1 .. -(T-1)`) -> `[d, T]`.
    pub(crate) fn build<'a>(
        &self,
        ctx: &'a Context,
        cfg: &EncoderConfig,
        x: Tensor<'a>,
        pos_emb: Tensor<'a>,
    ) -> EncodeResult<Tensor<'a>> {
        let ff = |x: Tensor<'a>, up: &Linear, down: &Linear| -> EncodeResult<Tensor<'a>> {
            let h = ctx.silu(up.forward(ctx, x)?)?;
            Ok(down.forward(ctx, h)?)
        };
        let h = ff(self.ff1_norm.forward(ctx, x)?, &self.ff1_up, &self.ff1_down)?;
        let x = ctx.add(x, ctx.scale(h, 0.5)?)?;
        let h = self.attention(ctx, cfg, self.att_norm.forward(ctx, x)?, pos_emb)?;
        let x = ctx.add(x, h)?;
        let h = self.conv(ctx, cfg, self.conv_norm_in.forward(ctx, x)?)?;
        let x = ctx.add(x, h)?;
        let h = ff(self.ff2_norm.forward(ctx, x)?, &self.ff2_up, &self.ff2_down)?;
        let x = ctx.add(x, ctx.scale(h, 0.5)?)?;
        Ok(self.out_norm.forward(ctx, x)?)
    }

    fn attention<'a>(
        &self,
        ctx: &'a Context,
        cfg: &EncoderConfig,
        x: Tensor<'a>,
        pos_emb: Tensor<'a>,
    ) -> EncodeResult<Tensor<'a>> {
        let (dk, h) = (cfg.head_dim() as i64, cfg.n_heads as i64);
        let t = x.ne()[1];
        let heads = |y: Tensor<'a>| -> EncodeResult<Tensor<'a>> {
            let n = y.ne()[1];
            Ok(ctx.reshape_3d(y, dk, h, n)?) // [dk, H, n]
        };
        // [dk, H, n] -> [dk, n, H], contiguous
        let by_head = |y: Tensor<'a>| -> EncodeResult<Tensor<'a>> {
            Ok(ctx.cont(ctx.permute(y, [0, 2, 1, 3])?)?)
        };
        let q = heads(self.q.forward(ctx, x)?)?;
        let q_u = by_head(ctx.add(q, ctx.param(&self.pos_bias_u))?)?;
        let q_v = by_head(ctx.add(q, ctx.param(&self.pos_bias_v))?)?;
        let k = by_head(heads(self.k.forward(ctx, x)?)?)?;
        let p = by_head(heads(self.pos.forward(ctx, pos_emb)?)?)?; // [dk, 2T-1, H]

        // content term: [T_k, T_q, H]
        let ac = ctx.mul_mat(k, q_u)?;
        // position term before the shift: bd_raw[p, i, h] for relative position T-1-p
        let bd_raw = ctx.mul_mat(p, q_v)?; // [2T-1, T, H]
                                           // rel_shift: bd[j, i] = bd_raw[T-1-i+j, i], i.e. row i starts T-1-i elements in; a
                                           // view whose row stride is one element shorter than bd_raw's does exactly that.
        let es = std::mem::size_of::<f32>();
        let nb = bd_raw.nb();
        let bd = ctx.view_3d(bd_raw, t, t, h, nb[1] - es, nb[2], (t as usize - 1) * es)?;
        let scores = ctx.add(ac, ctx.cont(bd)?)?;
        let attn = ctx.soft_max_ext(scores, None, 1.0 / (dk as f32).sqrt(), 0.0)?;

        // V as [T, dk, H] so the product runs over the keys
        let v = heads(self.v.forward(ctx, x)?)?;
        let v = ctx.cont(ctx.permute(v, [1, 2, 0, 3])?)?;
        let o = ctx.mul_mat(v, attn)?; // [dk, T, H]
        let o = ctx.cont(ctx.permute(o, [0, 2, 1, 3])?)?; // [dk, H, T]
        let o = ctx.reshape_2d(o, dk * h, t)?;
        Ok(self.o.forward(ctx, o)?)
    }

    fn conv<'a>(
        &self,
        ctx: &'a Context,
        cfg: &EncoderConfig,
        x: Tensor<'a>,
    ) -> EncodeResult<Tensor<'a>> {
        let d = cfg.d_model as i64;
        let y = self.pw1.forward(ctx, x)?; // [2d, T]
        let t = y.ne()[1];
        let nb1 = y.nb()[1];
        // GLU over channels: first half * sigmoid(second half)
        let a = ctx.view_2d(y, d, t, nb1, 0)?;
        let g = ctx.view_2d(y, d, t, nb1, d as usize * std::mem::size_of::<f32>())?;
        let y = ctx.mul(ctx.cont(a)?, ctx.sigmoid(ctx.cont(g)?)?)?;
        // depthwise conv over time as ssm_conv on [T + K - 1, d] (zero padded both sides);
        // why ssm_conv: it is an F32 kernel on every backend, the conv_1d family rounds to F16
        let half = (cfg.conv_kernel as i64 - 1) / 2;
        let y = ctx.cont(ctx.transpose(y)?)?; // [T, d]
        let y = ctx.pad_ext(y, [(half, half), (0, 0), (0, 0), (0, 0)])?;
        let y = ctx.reshape_3d(y, t + 2 * half, d, 1)?;
        let y = ctx.ssm_conv(y, ctx.param(&self.dw.0))?; // [d, T, 1]
        let y = ctx.reshape_2d(y, d, t)?;
        let y = ctx.add(y, ctx.param(&self.dw.1))?;
        // folded BatchNorm
        let y = ctx.add(ctx.mul(y, ctx.param(&self.bn.0))?, ctx.param(&self.bn.1))?;
        let y = ctx.silu(y)?;
        Ok(self.pw2.forward(ctx, y)?)
    }
}

/// The relative positional embeddings for `t` frames as NeMo's `RelPositionalEncoding` makes
/// them (in f32): row `r` (of `2t - 1`) is position `t - 1 - r`, with
/// `pe[2i] = sin(pos * w_i)`, `pe[2i + 1] = cos(pos * w_i)`, `w_i = exp(-2i ln(10000) / d)`.
/// Returned as `[d, 2t - 1]` (each row contiguous).
pub fn rel_pos_embedding(d_model: usize, t: usize) -> Vec<f32> {
    let n = 2 * t - 1;
    let mut pe = vec![0f32; d_model * n];
    // why f32 throughout: torch builds the table in float32, and at positions of a few hundred
    // the f32 rounding of `pos * w` is visible at the 1e-5 level.
    let k = -(10000f64.ln() / d_model as f64) as f32;
    let w: Vec<f32> = (0..d_model / 2)
        .map(|i| ((2 * i) as f32 * k).exp())
        .collect();
    for r in 0..n {
        let pos = (t as f32 - 1.0) - r as f32;
        let row = &mut pe[r * d_model..(r + 1) * d_model];
        for (i, &wi) in w.iter().enumerate() {
            let a = pos * wi;
            row[2 * i] = a.sin();
            row[2 * i + 1] = a.cos();
        }
    }
    pe
}
