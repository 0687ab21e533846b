//! The LFM2 forward graph (llama.cpp's `src/models/lfm2.cpp` in spirit), one builder for any
//! batch: one or more sequences, each a chunk of positions run at the end of its own
//! [`DecodeCache`]. Per layer RMSNorm -> (gated short conv | GQA attention with q/k norm and
//! NEOX RoPE) -> residual -> RMSNorm -> SwiGLU -> residual; final RMSNorm; tied text head.
//!
//! The weight-heavy products take every sequence's columns at once (the weights are read once
//! for the whole batch); the work that reads a sequence's history (the short-conv tail,
//! attention over its own cache rows) runs on that sequence's columns against its own cache.
//! [`Backbone::forward`] is a batch of one chunk; [`Backbone::forward_steps`] a batch of
//! one-position chunks.
//!
//! # The column rule
//!
//! A sequence's bits do not depend on its company: its per-sequence ops are the ones it runs
//! alone, the row-wise ops (norms, activations, embeddings) do not mix columns, and batched
//! steps are computed with [`Backend::compute_column_stable`], so each product gives every
//! column the bits it gets at width one.

use crate::ggml::{Backend, Context, GgmlType, GraphAllocator, Tensor};

use super::super::nn::{columns, input, side_by_side, AttentionInputs, KvRows};
use super::cache::{DecodeCache, LayerSlot};
use super::config::Mixer;
use super::error::BackboneError;
use super::inputs::{
    check_cache, embed, gather, set_embed_inputs, set_sequence_inputs, EmbedInputs, SequenceInputs,
};
use super::model::Backbone;
use super::types::{ForwardOutput, Position, Rows};

/// Nodes one graph may hold besides its sequences' own: ~40 per layer plus the embedding and
/// head.
const GRAPH_SIZE: usize = 4096;

/// Graph nodes per sequence and layer (views, norms, RoPE, the cache writes, attention, the
/// concatenation).
const NODES_PER_SEQUENCE_LAYER: usize = 32;

type R<T> = Result<T, BackboneError>;

/// One sequence's part of a batch: positions run at the end of its cache.
pub(super) struct Chunk<'c, 'p> {
    /// The sequence's cache (the caller advances it when the run succeeds).
    pub cache: &'c DecodeCache,
    /// The positions to run, at least one.
    pub positions: &'p [Position<'p>],
    /// Which of its rows come back.
    pub rows: Rows,
    /// Whether its rows come back with their text logits.
    pub logits: bool,
}

/// Where a graph is allocated and computed.
pub(super) struct Compute<'a> {
    /// The memory of the graph's intermediate tensors.
    pub alloc: &'a GraphAllocator,
    /// The backend instance it computes on.
    pub backend: &'a Backend,
    /// Compute with [`Backend::compute_column_stable`] (batched steps; see the module docs).
    /// why not for a lone chunk: prefills keep the plain compute's bytes, the ones the golden
    /// digests were recorded with.
    pub column_stable: bool,
}

/// Builds, allocates and computes the graph of `chunks`: one output per chunk, in order, with
/// the rows its [`Rows`] asks for.
pub(super) fn run(
    bb: &Backbone,
    compute: &Compute<'_>,
    chunks: &[Chunk<'_, '_>],
) -> R<Vec<ForwardOutput>> {
    if chunks.is_empty() {
        return Err(BackboneError::Input("no sequences to run".into()));
    }
    // The column where each chunk starts in the batch.
    let mut starts = Vec::with_capacity(chunks.len());
    let mut n = 0;
    for c in chunks {
        if c.positions.is_empty() {
            return Err(BackboneError::Input("no positions to run".into()));
        }
        check_cache(bb, c.cache, c.positions.len())?;
        starts.push(n);
        n += c.positions.len();
    }
    let positions: Vec<Position<'_>> = chunks
        .iter()
        .flat_map(|c| c.positions.iter().copied())
        .collect();
    let inp = gather(bb, &positions)?;

    let size = GRAPH_SIZE + NODES_PER_SEQUENCE_LAYER * chunks.len() * bb.model.layers.len();
    let ctx = Context::metadata_with_graph(size, size)?;
    let mut g = ctx.new_graph(size)?;
    let seqs = chunks
        .iter()
        .map(|c| SequenceInputs::new(&ctx, c.cache.len(), c.positions.len(), bb.has_attention()))
        .collect::<R<Vec<_>>>()?;
    let attn_in: Vec<AttentionInputs<'_>> = seqs
        .iter()
        .zip(chunks)
        .map(|(q, c)| AttentionInputs {
            pos: q.pos,
            mask: q.mask,
            p0: c.cache.len(),
        })
        .collect();
    let caches: Vec<Vec<Tensor<'_>>> = chunks.iter().map(|c| c.cache.tensors()).collect();
    let mut it = EmbedInputs::default();
    let mut x = embed(&ctx, bb, &inp, &mut it)?;
    for (il, l) in bb.model.layers.iter().enumerate() {
        let cur = l.attn_norm.forward(&ctx, x)?;
        let mut mixed = Vec::with_capacity(chunks.len());
        let out = match &l.mixer {
            Mixer::Attention(a) => {
                let qkv = a.project(&ctx, cur)?;
                for (s, c) in chunks.iter().enumerate() {
                    let LayerSlot::Attention { k, v } = c.cache.slots()[il] else {
                        return Err(BackboneError::CacheMismatch);
                    };
                    let rows = KvRows {
                        k: caches[s][k],
                        v: caches[s][v],
                    };
                    let own = qkv.positions(&ctx, starts[s], c.positions.len())?;
                    mixed.push(a.attend(&ctx, &mut g, own, rows, &attn_in[s])?);
                }
                &a.out
            }
            Mixer::Conv(conv) => {
                let bcx = conv.in_proj.forward(&ctx, cur)?;
                for (s, c) in chunks.iter().enumerate() {
                    let LayerSlot::Conv { state } = c.cache.slots()[il] else {
                        return Err(BackboneError::CacheMismatch);
                    };
                    let own = columns(&ctx, bcx, starts[s], c.positions.len())?;
                    mixed.push(conv.convolve(&ctx, &mut g, own, caches[s][state])?);
                }
                &conv.out_proj
            }
        };
        x = ctx.add(x, out.forward(&ctx, side_by_side(&ctx, &mixed)?)?)?;
        let cur = l.ffn_norm.forward(&ctx, x)?;
        x = ctx.add(x, l.ffn.forward(&ctx, cur)?)?;
    }

    // The rows that come back (batch columns, ascending) and, of those, the ones with logits.
    let (mut rows, mut with_logits) = (Vec::new(), Vec::new());
    for (c, &start) in chunks.iter().zip(&starts) {
        let end = start + c.positions.len();
        for col in end - returned(c)..end {
            if c.logits {
                with_logits.push(rows.len() as i32);
            }
            rows.push(col as i32);
        }
    }
    let mut picks = Vec::new();
    let mut outs = None;
    if let (Some(&first), Some(&last)) = (rows.first(), rows.last()) {
        let m = rows.len();
        let sel = if m == n {
            x
        } else if (last - first) as usize + 1 == m {
            ctx.view_2d(
                x,
                x.ne()[0],
                m as i64,
                x.nb()[1],
                first as usize * x.nb()[1],
            )?
        } else {
            let idx = input(ctx.new_tensor_1d(GgmlType::I32, m as i64)?, "inp_rows")?;
            picks.push((idx, &rows[..]));
            ctx.get_rows(x, idx)?
        };
        let hidden = bb.model.output_norm.forward(&ctx, sel)?;
        hidden.set_output();
        g.build_forward_expand(hidden)?;
        let logits = match with_logits.len() {
            0 => None,
            k => {
                // why: only the rows that sample text need the (vocabulary-wide) head.
                let sel = if k == m {
                    hidden
                } else {
                    let idx = input(ctx.new_tensor_1d(GgmlType::I32, k as i64)?, "inp_pick")?;
                    picks.push((idx, &with_logits[..]));
                    ctx.get_rows(hidden, idx)?
                };
                let l = ctx.mul_mat(ctx.param(&bb.model.head), sel)?;
                l.set_output();
                g.build_forward_expand(l)?;
                Some(l)
            }
        };
        outs = Some((hidden, logits));
    }

    compute.alloc.alloc_graph(&g)?;
    set_embed_inputs(&it, &inp)?;
    for (q, c) in seqs.iter().zip(chunks) {
        set_sequence_inputs(q, c.cache.len(), c.positions.len(), bb.sliding_window)?;
    }
    for (idx, values) in picks {
        idx.set_i32(values)?;
    }
    if compute.column_stable {
        compute.alloc.compute_column_stable(compute.backend, &g)?;
    } else {
        compute.alloc.compute(compute.backend, &g)?;
    }

    let Some((hidden, logits)) = outs else {
        return Ok(chunks.iter().map(|_| ForwardOutput::default()).collect());
    };
    let hidden = hidden.get_f32()?;
    let logits = logits.map(|l| l.get_f32()).transpose()?;
    if chunks.len() == 1 {
        // why: a lone chunk (a prefill) takes the whole output, not a copy of it.
        return Ok(vec![ForwardOutput {
            rows: rows.len(),
            hidden,
            logits,
        }]);
    }
    let h = bb.config.hidden_size as usize;
    let vocab = logits.as_ref().map_or(0, |l| l.len() / with_logits.len());
    let (mut row, mut logit_row) = (0, 0);
    Ok(chunks
        .iter()
        .map(|c| {
            let k = returned(c);
            let out = ForwardOutput {
                rows: k,
                hidden: hidden[row * h..(row + k) * h].to_vec(),
                logits: match &logits {
                    Some(l) if c.logits && k > 0 => {
                        logit_row += k;
                        Some(l[(logit_row - k) * vocab..logit_row * vocab].to_vec())
                    }
                    _ => None,
                },
            };
            row += k;
            out
        })
        .collect())
}

/// How many rows `c` returns: its last ones.
fn returned(c: &Chunk<'_, '_>) -> usize {
    match c.rows {
        Rows::All => c.positions.len(),
        Rows::Last => 1,
        Rows::None => 0,
    }
}
