//! Building blocks shared by the model's components: linear layers, norms, the SwiGLU feed
//! forward, grouped-query attention over a K/V cache and LFM2's gated short convolution.
//!
//! Each block is bound once at load from the file's name tree ([`VarBuilder`]: shape and type
//! checked then, errors naming the file and the tensor) and holds [`Param`]s; `forward` adds its
//! part to a graph in any context. The backbone, the depthformer and the detokenizer's LFM2 run
//! the same [`Attention`]; the encoder uses [`Linear`] and [`LayerNorm`].
//!
//! Attention and the short convolution come in two halves: the weight-heavy projections take a
//! whole batch's columns, and the part that reads a sequence's history ([`Attention::attend`],
//! [`ShortConv::convolve`]) runs on each sequence's own columns ([`Qkv::positions`],
//! [`columns`]) against its own cache, so one graph serves any batch width.
//!
//! The op sequences are the ones the components were validated with against liquid-audio and
//! llama.cpp; changing their order or shape can change output bits.

use crate::ggml::{Context, GgmlError, Graph, Param, RopeParams, Tensor};

use super::load_error::LoadError;
use super::weights::{Role, VarBuilder};

type G<T> = Result<T, GgmlError>;
type L<T> = Result<T, LoadError>;

/// Bytes of one F32 element.
const F32: usize = std::mem::size_of::<f32>();

/// Names `t` and marks it a graph input (filled after the graph is allocated).
pub fn input<'a>(t: Tensor<'a>, name: &str) -> G<Tensor<'a>> {
    t.set_name(name)?;
    t.set_input();
    Ok(t)
}

/// `y = W x (+ b)`: `weight` `[n_in, n_out]` (ggml order), optional `bias` `[n_out]`.
#[derive(Debug, Clone)]
pub struct Linear {
    /// `[n_in, n_out]`.
    pub weight: Param,
    /// `[n_out]`, F32.
    pub bias: Option<Param>,
}

impl Linear {
    /// `weight` (and `bias` when `bias` is true) under `vb`.
    pub fn load(vb: &VarBuilder<'_>, n_in: usize, n_out: usize, bias: bool) -> L<Linear> {
        Ok(Linear {
            weight: vb.get("weight", &[n_in, n_out], Role::Matrix)?,
            bias: if bias {
                Some(vb.get("bias", &[n_out], Role::Vector)?)
            } else {
                None
            },
        })
    }

    /// `x` `[n_in, T]` -> `[n_out, T]`.
    pub fn forward<'a>(&self, ctx: &'a Context, x: Tensor<'a>) -> G<Tensor<'a>> {
        let y = ctx.mul_mat(ctx.param(&self.weight), x)?;
        match &self.bias {
            Some(b) => ctx.add(y, ctx.param(b)),
            None => Ok(y),
        }
    }
}

/// RMSNorm over `ne[0]` times `weight`.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    /// `[dim]`, F32.
    pub weight: Param,
    /// Epsilon inside the root.
    pub eps: f32,
}

impl RmsNorm {
    /// `weight` `[dim]` under `vb`.
    pub fn load(vb: &VarBuilder<'_>, dim: usize, eps: f32) -> L<RmsNorm> {
        Ok(RmsNorm {
            weight: vb.get("weight", &[dim], Role::Vector)?,
            eps,
        })
    }

    /// Normalises every row (`ne[0]` values) of `x`.
    pub fn forward<'a>(&self, ctx: &'a Context, x: Tensor<'a>) -> G<Tensor<'a>> {
        ctx.mul(ctx.rms_norm(x, self.eps)?, ctx.param(&self.weight))
    }
}

/// LayerNorm over `ne[0]`: `(x - mean) / sqrt(var + eps) * weight + bias`.
#[derive(Debug, Clone)]
pub struct LayerNorm {
    /// `[dim]`, F32.
    pub weight: Param,
    /// `[dim]`, F32.
    pub bias: Param,
    /// Epsilon inside the root.
    pub eps: f32,
}

impl LayerNorm {
    /// `weight` and `bias` `[dim]` under `vb`.
    pub fn load(vb: &VarBuilder<'_>, dim: usize, eps: f32) -> L<LayerNorm> {
        Ok(LayerNorm {
            weight: vb.get("weight", &[dim], Role::Vector)?,
            bias: vb.get("bias", &[dim], Role::Vector)?,
            eps,
        })
    }

    /// Normalises every row (`ne[0]` values) of `x`.
    pub fn forward<'a>(&self, ctx: &'a Context, x: Tensor<'a>) -> G<Tensor<'a>> {
        let y = ctx.mul(ctx.norm(x, self.eps)?, ctx.param(&self.weight))?;
        ctx.add(y, ctx.param(&self.bias))
    }
}

/// The SwiGLU feed forward: `down(silu(gate x) * up x)`, no biases.
#[derive(Debug, Clone)]
pub struct SwiGlu {
    /// `[dim, ff]`.
    pub gate: Linear,
    /// `[dim, ff]`.
    pub up: Linear,
    /// `[ff, dim]`.
    pub down: Linear,
}

impl SwiGlu {
    /// `x` `[dim, T]` -> `[dim, T]`.
    pub fn forward<'a>(&self, ctx: &'a Context, x: Tensor<'a>) -> G<Tensor<'a>> {
        let gate = self.gate.forward(ctx, x)?;
        let up = self.up.forward(ctx, x)?;
        self.down.forward(ctx, ctx.swiglu_split(gate, up)?)
    }
}

/// How an attention layer projects its input to queries, keys and values.
#[derive(Debug, Clone)]
pub enum QkvProjection {
    /// Three matrices (llama.cpp's `attn_q`, `attn_k`, `attn_v`).
    Separate {
        /// `[dim, heads * head_dim]`.
        q: Linear,
        /// `[dim, kv_heads * head_dim]`.
        k: Linear,
        /// `[dim, kv_heads * head_dim]`.
        v: Linear,
    },
    /// One matrix whose output stacks q, k and v (liquid-audio's `qkv_proj`).
    Fused(Linear),
}

/// One layer's K/V cache, F32: `k` `[head_dim * kv_heads, capacity]` (one row per position)
/// and `v` transposed, `[capacity, head_dim * kv_heads]` (one row per value dimension), so the
/// attention's `V^T` is a view of it rather than a transposed copy of every cached row at every
/// step.
#[derive(Debug, Clone, Copy)]
pub struct KvRows<'a> {
    /// Keys.
    pub k: Tensor<'a>,
    /// Values, transposed.
    pub v: Tensor<'a>,
}

/// The per-chunk inputs every attention layer of a graph shares.
#[derive(Debug, Clone, Copy)]
pub struct AttentionInputs<'a> {
    /// One I32 position per chunk position (RoPE).
    pub pos: Tensor<'a>,
    /// `[kv_len, n]` additive mask, or `None` when every query sees every cached row.
    pub mask: Option<Tensor<'a>>,
    /// Cache row of the chunk's first position.
    pub p0: usize,
}

/// Grouped-query attention with per-head RMSNorm of q and k before RoPE, over a cache of
/// K/V rows; ggml gives query head `h` the KV head `h / (heads / kv_heads)`, as SDPA's
/// `enable_gqa` does. Softmax scale `1 / sqrt(head_dim)`.
#[derive(Debug, Clone)]
pub struct Attention {
    /// The projection to q, k, v.
    pub qkv: QkvProjection,
    /// Per-head RMSNorm of the queries (`[head_dim]`).
    pub q_norm: RmsNorm,
    /// Per-head RMSNorm of the keys (`[head_dim]`).
    pub k_norm: RmsNorm,
    /// `[heads * head_dim, dim]`.
    pub out: Linear,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads.
    pub n_kv_head: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Rotary embedding (mode and base).
    pub rope: RopeParams,
}

/// An attention layer's queries `[head_dim, heads, n]`, keys `[head_dim, kv_heads, n]` and
/// values `[head_dim * kv_heads, n]` of `n` positions (views of one projection when fused).
#[derive(Debug, Clone, Copy)]
pub struct Qkv<'a> {
    /// Queries.
    pub q: Tensor<'a>,
    /// Keys.
    pub k: Tensor<'a>,
    /// Values.
    pub v: Tensor<'a>,
}

impl<'a> Qkv<'a> {
    /// The queries, keys and values of positions `start .. start + n` (views, no copy).
    pub fn positions(&self, ctx: &'a Context, start: usize, n: usize) -> G<Qkv<'a>> {
        let some = |t: Tensor<'a>| {
            let (ne, nb) = (t.ne(), t.nb());
            ctx.view_3d(t, ne[0], ne[1], n as i64, nb[1], nb[2], start * nb[2])
        };
        Ok(Qkv {
            q: some(self.q)?,
            k: some(self.k)?,
            v: columns(ctx, self.v, start, n)?,
        })
    }
}

/// The column blocks `[d, n_i]` side by side, `[d, sum n_i]` (the one block itself when there
/// is one).
pub fn side_by_side<'a>(ctx: &'a Context, columns: &[Tensor<'a>]) -> G<Tensor<'a>> {
    let (first, rest) = columns
        .split_first()
        .ok_or_else(|| GgmlError::arg("side_by_side", "no columns"))?;
    rest.iter()
        .try_fold(*first, |out, &c| ctx.concat(out, c, 1))
}

/// Columns `start .. start + n` of a 2-D `t` (`[rows, _]` -> `[rows, n]`, a view).
pub fn columns<'a>(ctx: &'a Context, t: Tensor<'a>, start: usize, n: usize) -> G<Tensor<'a>> {
    ctx.view_2d(t, t.ne()[0], n as i64, t.nb()[1], start * t.nb()[1])
}

impl Attention {
    /// The projection of `x` `[dim, n]` to queries, keys and values.
    pub fn project<'a>(&self, ctx: &'a Context, x: Tensor<'a>) -> G<Qkv<'a>> {
        let hd = self.head_dim as i64;
        let nh = self.n_head as i64;
        let nkv = self.n_kv_head as i64;
        let n = x.ne()[1];
        Ok(match &self.qkv {
            QkvProjection::Separate { q, k, v } => Qkv {
                q: ctx.reshape_3d(q.forward(ctx, x)?, hd, nh, n)?,
                k: ctx.reshape_3d(k.forward(ctx, x)?, hd, nkv, n)?,
                v: v.forward(ctx, x)?, // [kvw, n]
            },
            QkvProjection::Fused(qkv) => {
                let y = qkv.forward(ctx, x)?; // [hd * (nh + 2 nkv), n]
                let (e, row) = (self.head_dim * F32, y.nb()[1]);
                Qkv {
                    q: ctx.view_3d(y, hd, nh, n, e, row, 0)?,
                    k: ctx.view_3d(y, hd, nkv, n, e, row, self.n_head * e)?,
                    v: ctx.view_2d(y, hd * nkv, n, row, (self.n_head + self.n_kv_head) * e)?,
                }
            }
        })
    }

    /// The attention of one sequence's `n` positions at cache rows `p0 .. p0 + n`: writes their
    /// K/V rows into `cache`, attends over rows `0 .. p0 + n` and returns the heads merged,
    /// `[heads * head_dim, n]`, before the output projection.
    pub fn attend<'a>(
        &self,
        ctx: &'a Context,
        g: &mut Graph<'a>,
        qkv: Qkv<'a>,
        cache: KvRows<'a>,
        inp: &AttentionInputs<'a>,
    ) -> G<Tensor<'a>> {
        let hd = self.head_dim as i64;
        let nh = self.n_head as i64;
        let nkv = self.n_kv_head as i64;
        let kvw = hd * nkv;
        let Qkv { q, k, v } = qkv;
        let n = q.ne()[2];
        let q = self.q_norm.forward(ctx, q)?;
        let k = self.k_norm.forward(ctx, k)?;
        let q = ctx.rope_ext(q, inp.pos, None, self.rope)?;
        let k = ctx.rope_ext(k, inp.pos, None, self.rope)?;

        // Write this chunk's rows, then read rows [0, p0 + n): expanding the copies first puts
        // them before the reads in the graph's execution order.
        let row = cache.k.nb()[1];
        let k_dst = ctx.view_2d(cache.k, kvw, n, row, inp.p0 * row)?;
        g.build_forward_expand(ctx.cpy(ctx.reshape_2d(k, kvw, n)?, k_dst)?)?;
        // V goes in as columns p0 .. p0 + n of the transposed cache.
        let v_row = cache.v.nb()[1];
        let v_dst = ctx.view_2d(cache.v, n, kvw, v_row, inp.p0 * F32)?;
        g.build_forward_expand(ctx.cpy(ctx.transpose(v)?, v_dst)?)?;

        // [hd, kv_len, nkv] view of the keys (heads strided inside each row).
        let kv_len = inp.p0 as i64 + n;
        let e = self.head_dim * F32;
        let kall = ctx.view_3d(cache.k, hd, nkv, kv_len, e, row, 0)?;
        let kall = ctx.permute(kall, [0, 2, 1, 3])?;
        // [kv_len, hd, nkv]: the first kv_len columns of each value dimension's row.
        let vt = ctx.view_3d(cache.v, kv_len, hd, nkv, v_row, self.head_dim * v_row, 0)?;
        let qp = ctx.permute(q, [0, 2, 1, 3])?; // [hd, n, nh]
        let kq = ctx.mul_mat(kall, qp)?; // [kv_len, n, nh]
        let scale = 1.0 / (self.head_dim as f32).sqrt();
        let kq = ctx.soft_max_ext(kq, inp.mask, scale, 0.0)?;
        let kqv = ctx.mul_mat(vt, kq)?; // [hd, n, nh]
        ctx.cont_4d(ctx.permute(kqv, [0, 2, 1, 3])?, [hd * nh, n, 1, 1])
    }
}

/// LFM2's gated short convolution: `in_proj` to B, C and x; a causal depthwise convolution of
/// kernel `L` over `B * x` (its state is the previous `L - 1` inputs); times C; `out_proj`.
#[derive(Debug, Clone)]
pub struct ShortConv {
    /// `[dim, 3 * dim]`: B, C and x stacked.
    pub in_proj: Linear,
    /// `[L, dim]`, F32: the depthwise kernel.
    pub conv: Param,
    /// `[dim, dim]`.
    pub out_proj: Linear,
    /// Model width.
    pub dim: usize,
}

impl ShortConv {
    /// The gated convolution of one sequence's `n` positions, from their `in_proj` output
    /// `bcx` `[3 * dim, n]` (B, C and x stacked) to `[dim, n]` before `out_proj`. `state`
    /// `[L - 1, dim]` holds the sequence's previous tail and receives the new one (the copy is
    /// expanded into `g` before the convolution reads the old one).
    pub fn convolve<'a>(
        &self,
        ctx: &'a Context,
        g: &mut Graph<'a>,
        bcx: Tensor<'a>,
        state: Tensor<'a>,
    ) -> G<Tensor<'a>> {
        let h = self.dim as i64;
        let n = bcx.ne()[1];
        let part = |i: usize| ctx.view_2d(bcx, h, n, bcx.nb()[1], i * self.dim * F32);
        let (b, c, xin) = (part(0)?, part(1)?, part(2)?);
        let bx = ctx.cont(ctx.transpose(ctx.mul(b, xin)?)?)?; // [n, h]
        let sx = ctx.concat(state, bx, 0)?; // [L-1+n, h]: the previous tail then this chunk
        let tail = state.ne()[0];
        // The new tail: the last L-1 inputs.
        let new_tail = ctx.view_2d(sx, tail, h, sx.nb()[1], n as usize * F32)?;
        g.build_forward_expand(ctx.cpy(new_tail, state)?)?;
        let sx3 = ctx.reshape_3d(sx, tail + n, h, 1)?;
        let y = ctx.ssm_conv(sx3, ctx.param(&self.conv))?; // [h, n, 1]
        ctx.mul(c, ctx.reshape_2d(y, h, n)?)
    }
}
