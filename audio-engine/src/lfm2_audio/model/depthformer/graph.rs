//! The depthformer's step graph, one builder for any number of frames: codebook step `i` of
//! `w` frames as one graph. The weight-heavy products (`depth_linear`, the projections, the
//! feed forward, the logits head) take the frames' columns `[d, w]` at once; attention runs on
//! each frame's own K/V rows ([`FrameState`]). A lone frame is a batch of one (its graphs built
//! once per [`DepthScratch`](super::DepthScratch) and re-run for every frame); batched frames
//! build theirs per tick.
//!
//! A frame's bits do not depend on its company: its per-frame ops are those it runs alone, the
//! row-wise ops do not mix columns, and batched frames are computed with
//! [`Backend::compute_column_stable`](crate::ggml::Backend::compute_column_stable).

use crate::ggml::{Backend, BackendBuffer, Context, GgmlType, Graph, Tensor};

use super::super::detokenizer::config::VocoderConfig;
use super::super::nn::{columns, input, side_by_side, AttentionInputs, KvRows};
use super::{Depthformer, R};

/// Graph nodes (and leafs) of one step besides its frames' own: ~40 per layer plus input and
/// head.
fn shared_nodes(n_layer: usize) -> usize {
    64 * n_layer + 64
}

/// Graph nodes per frame and layer (views, norms, RoPE, the cache writes, attention, the
/// concatenation).
const NODES_PER_FRAME_LAYER: usize = 24;

/// Nodes (and leafs) the graph of one step of `w` frames may hold.
pub(super) fn graph_size(n_layer: usize, w: usize) -> usize {
    shared_nodes(n_layer) + NODES_PER_FRAME_LAYER * w * (n_layer + 1)
}

/// The per-frame state: K and V of each layer (K `[head_dim * kv_heads, C]`, one row per
/// position; V transposed, `[C, head_dim * kv_heads]`, see [`KvRows`]), then `depth_linear(h)`
/// as `[d, C]`.
pub(super) struct FrameState {
    ctx: Context,
    // why: the context retains the buffer; the field documents ownership.
    _buffer: BackendBuffer,
}

impl FrameState {
    pub(super) fn new(config: &VocoderConfig, backend: &Backend) -> R<FrameState> {
        let n_layer = config.n_layer as usize;
        let c = i64::from(config.codebooks);
        let kv_row = i64::from(config.head_dim) * i64::from(config.n_head_kv);
        let ctx = Context::metadata_with_graph(2 * n_layer + 1, 0)?;
        for il in 0..n_layer {
            let k = ctx.new_tensor_2d(GgmlType::F32, kv_row, c)?;
            k.set_name(&format!("depth_cache_k_l{il}"))?;
            let v = ctx.new_tensor_2d(GgmlType::F32, c, kv_row)?;
            v.set_name(&format!("depth_cache_v_l{il}"))?;
        }
        let din = ctx.new_tensor_2d(GgmlType::F32, i64::from(config.n_embd), c)?;
        din.set_name("depth_in")?;
        let buffer = ctx.alloc_tensors(backend)?;
        // why: only rows a frame wrote are ever read, but defined contents cost nothing.
        for t in ctx.tensors() {
            t.set_zero()?;
        }
        Ok(FrameState {
            ctx,
            _buffer: buffer,
        })
    }
}

/// One built step graph of `w` frames with its inputs and output.
pub(super) struct StepGraph<'a> {
    /// The graph (allocate it before setting the inputs).
    pub graph: Graph<'a>,
    /// The codebook step it runs.
    step: usize,
    /// Step 0: the frames' backbone hidden states, `[backbone, w]`.
    hidden: Option<Tensor<'a>>,
    /// Steps > 0: each frame's previous code, `[w]`.
    code: Option<Tensor<'a>>,
    pos: Tensor<'a>,
    /// The frames' logits of this step's codebook, `[audio_vocab, w]`.
    pub logits: Tensor<'a>,
}

impl StepGraph<'_> {
    /// Sets the inputs of an allocated graph: at step 0 the frames' hidden states (`w` rows
    /// one after another), at later steps the frames' previous codes (the other is not read).
    pub fn set_inputs(&self, hidden: &[f32], prev_codes: &[i32]) -> R<()> {
        if let Some(t) = self.hidden {
            t.set_f32(hidden)?;
        }
        if let Some(t) = self.code {
            t.set_i32(prev_codes)?;
        }
        self.pos.set_i32(&[self.step as i32])?;
        Ok(())
    }
}

/// Builds, in `ctx`, the graph of codebook step `i` of the frames whose state is `frames`
/// (each frame's K/V rows and `depth_linear` output; step 0 writes the latter).
pub(super) fn build_step<'a>(
    d: &Depthformer,
    ctx: &'a Context,
    frames: &[&'a FrameState],
    i: usize,
) -> R<StepGraph<'a>> {
    let cfg = &d.config;
    let w = frames.len();
    let n_layer = d.layers.len();
    let states: Vec<Vec<Tensor<'a>>> = frames.iter().map(|f| f.ctx.tensors()).collect();
    let n = i64::from(cfg.n_embd);
    let f = std::mem::size_of::<f32>();
    let mut g = ctx.new_graph(graph_size(n_layer, w))?;

    let pos = input(ctx.new_tensor_1d(GgmlType::I32, 1)?, "depth_pos")?;
    let (mut x, hidden, code) = if i == 0 {
        let h = input(
            ctx.new_tensor_2d(GgmlType::F32, i64::from(cfg.backbone_embd), w as i64)?,
            "depth_hidden",
        )?;
        let dl = d.depth_linear.forward(ctx, h)?; // [C * d, w]
                                                  // The later steps read their slices from each frame's state; this step uses the
                                                  // result directly.
        for (col, st) in states.iter().enumerate() {
            g.build_forward_expand(ctx.cpy(columns(ctx, dl, col, 1)?, st[2 * n_layer])?)?;
        }
        (ctx.view_2d(dl, n, w as i64, dl.nb()[1], 0)?, Some(h), None)
    } else {
        let idx = input(
            ctx.new_tensor_1d(GgmlType::I32, w as i64)?,
            "depth_prev_code",
        )?;
        let e = ctx.get_rows(ctx.param(&d.books[i - 1].embedding), idx)?; // [d, w]
        let mut cols = Vec::with_capacity(w);
        for (col, st) in states.iter().enumerate() {
            let slice = ctx.view_1d(st[2 * n_layer], n, i * n as usize * f)?;
            cols.push(ctx.add(columns(ctx, e, col, 1)?, slice)?);
        }
        (side_by_side(ctx, &cols)?, None, Some(idx))
    };

    let inputs = AttentionInputs {
        pos,
        mask: None,
        p0: i,
    };
    for (il, l) in d.layers.iter().enumerate() {
        let cur = l.attn_norm.forward(ctx, x)?;
        let qkv = l.attn.project(ctx, cur)?;
        let mut cols = Vec::with_capacity(w);
        for (col, st) in states.iter().enumerate() {
            let rows = KvRows {
                k: st[2 * il],
                v: st[2 * il + 1],
            };
            let own = qkv.positions(ctx, col, 1)?;
            cols.push(l.attn.attend(ctx, &mut g, own, rows, &inputs)?);
        }
        x = ctx.add(x, l.attn.out.forward(ctx, side_by_side(ctx, &cols)?)?)?;
        let cur = l.ffn_norm.forward(ctx, x)?;
        x = ctx.add(x, l.ffn.forward(ctx, cur)?)?;
    }
    let b = &d.books[i];
    let logits = b.to_logits.forward(ctx, b.norm.forward(ctx, x)?)?; // [audio_vocab, w]
    logits.set_name("depth_logits")?;
    logits.set_output();
    g.build_forward_expand(logits)?;
    Ok(StepGraph {
        graph: g,
        step: i,
        hidden,
        code,
        pos,
        logits,
    })
}
