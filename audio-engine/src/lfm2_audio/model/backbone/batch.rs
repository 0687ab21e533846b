//! Single-position steps of several sequences as one graph: the weight-heavy products take
//! `[hidden, n]` (the weights are read once for all `n` sequences), and the per-sequence work
//! (the short-conv tail, attention over the sequence's own cache rows) runs on each column
//! against that sequence's own [`DecodeCache`].
//!
//! A column's bits do not depend on the batch: the per-sequence ops are the ones a lone step
//! runs, the row-wise ops (norms, activations, embeddings) do not mix columns, and the graph is
//! computed with [`Backend::compute_column_stable`], so each product gives every column the
//! bits it gets at width one.

use crate::ggml::{Backend, Context, GgmlType, GraphAllocator, Tensor};

use super::super::nn::{column, input, side_by_side, AttentionInputs, KvRows};
use super::cache::{DecodeCache, LayerSlot};
use super::config::Mixer;
use super::graph::{
    check_cache, embed, gather, set_embed_inputs, set_sequence_inputs, EmbedInputs, SequenceInputs,
    GRAPH_SIZE,
};
use super::{Backbone, BackboneError, ForwardOutput, Position};

type R<T> = Result<T, BackboneError>;

/// Graph nodes per sequence and layer beyond the shared ones (views, norms, RoPE, the cache
/// writes, attention, the concatenation).
const NODES_PER_SEQUENCE_LAYER: usize = 32;

/// One sequence's next step: the position to run at the end of its cache.
#[derive(Debug)]
pub struct Step<'c, 'p> {
    /// The sequence's cache (advanced by one position when the batch succeeds).
    pub cache: &'c mut DecodeCache,
    /// The position to run.
    pub position: Position<'p>,
    /// Whether the text logits of the position are wanted.
    pub logits: bool,
}

/// The memory and threads batched steps compute with: a backend instance of the weights'
/// device and the allocator of the batch graphs' intermediate tensors.
#[derive(Debug)]
pub struct BatchCompute {
    backend: Backend,
    alloc: GraphAllocator,
}

impl BatchCompute {
    /// Batched steps computed on `backend` (an instance of the device the weights live on),
    /// their device placements recorded under `label` (see [`crate::ggml::fallbacks`]).
    pub fn new(backend: Backend, label: &'static str) -> R<BatchCompute> {
        let alloc = GraphAllocator::labelled(&backend, label)?;
        Ok(BatchCompute { backend, alloc })
    }

    /// The backend the batches compute on.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Computes `g` (allocated last by [`BatchCompute::alloc_graph`]) with every column's bits
    /// independent of the batch's width (see [`crate::ggml::Backend::compute_column_stable`]).
    pub(crate) fn compute_column_stable(&self, g: &crate::ggml::Graph<'_>) -> R<()> {
        Ok(self.alloc.compute_column_stable(&self.backend, g)?)
    }

    /// Allocates `g`'s intermediate tensors in the batches' graph memory.
    pub(crate) fn alloc_graph(&self, g: &crate::ggml::Graph<'_>) -> R<()> {
        Ok(self.alloc.alloc_graph(g)?)
    }
}

impl Backbone {
    /// Checks that `step` could run: its cache fits this backbone and has room for one more
    /// position, and its position is valid (token id, embedding width, codes).
    pub fn check_step(&self, cache: &DecodeCache, position: &Position<'_>) -> R<()> {
        check_cache(self, cache, 1)?;
        gather(self, std::slice::from_ref(position)).map(drop)
    }

    /// Runs one position of each step's sequence as one graph, writes each into its cache and
    /// returns each step's final-norm hidden state (and its logits when asked for), in order.
    ///
    /// Each step gets the bits [`Backbone::forward`] gives it alone with one position and
    /// [`Rows::Last`](super::Rows::Last). On error no cache advances (each keeps its length;
    /// rows past it may have been written, which no later run reads).
    pub fn forward_steps(
        &self,
        compute: &BatchCompute,
        steps: &mut [Step<'_, '_>],
    ) -> R<Vec<ForwardOutput>> {
        if steps.is_empty() {
            return Err(BackboneError::Input("no steps to run".into()));
        }
        for s in steps.iter() {
            check_cache(self, s.cache, 1)?;
        }
        let outputs = self.run_steps(compute, steps)?;
        for s in steps.iter_mut() {
            s.cache.advance(1);
        }
        Ok(outputs)
    }

    fn run_steps(&self, compute: &BatchCompute, steps: &[Step<'_, '_>]) -> R<Vec<ForwardOutput>> {
        let n = steps.len();
        let h = self.config.hidden_size as usize;
        let positions: Vec<Position<'_>> = steps.iter().map(|s| s.position).collect();
        let inp = gather(self, &positions)?;
        let size = GRAPH_SIZE + NODES_PER_SEQUENCE_LAYER * n * self.model.layers.len();
        let ctx = Context::metadata_with_graph(size, size)?;
        let mut g = ctx.new_graph(size)?;
        let seqs = steps
            .iter()
            .map(|s| SequenceInputs::new(&ctx, s.cache.len(), 1, self.has_attention()))
            .collect::<R<Vec<_>>>()?;
        let attn_in: Vec<AttentionInputs<'_>> = seqs
            .iter()
            .zip(steps)
            .map(|(q, s)| AttentionInputs {
                pos: q.pos,
                mask: q.mask,
                p0: s.cache.len(),
            })
            .collect();
        let caches: Vec<Vec<Tensor<'_>>> = steps.iter().map(|s| s.cache.tensors()).collect();
        let mut it = EmbedInputs::default();
        let mut x = embed(&ctx, self, &inp, &mut it)?;
        for (il, l) in self.model.layers.iter().enumerate() {
            let cur = l.attn_norm.forward(&ctx, x)?;
            let mut columns = Vec::with_capacity(n);
            let mixed = match &l.mixer {
                Mixer::Attention(a) => {
                    let qkv = a.project(&ctx, cur)?;
                    for (i, s) in steps.iter().enumerate() {
                        let LayerSlot::Attention { k, v } = s.cache.slots()[il] else {
                            return Err(BackboneError::CacheMismatch);
                        };
                        let rows = KvRows {
                            k: caches[i][k],
                            v: caches[i][v],
                        };
                        let q = qkv.position(&ctx, i)?;
                        columns.push(a.attend(&ctx, &mut g, q, rows, &attn_in[i])?);
                    }
                    a.out.forward(&ctx, side_by_side(&ctx, &columns)?)?
                }
                Mixer::Conv(c) => {
                    let bcx = c.in_proj.forward(&ctx, cur)?;
                    for (i, s) in steps.iter().enumerate() {
                        let LayerSlot::Conv { state } = s.cache.slots()[il] else {
                            return Err(BackboneError::CacheMismatch);
                        };
                        let col = column(&ctx, bcx, i)?;
                        columns.push(c.convolve(&ctx, &mut g, col, caches[i][state])?);
                    }
                    c.out_proj.forward(&ctx, side_by_side(&ctx, &columns)?)?
                }
            };
            x = ctx.add(x, mixed)?;
            let cur = l.ffn_norm.forward(&ctx, x)?;
            x = ctx.add(x, l.ffn.forward(&ctx, cur)?)?;
        }
        let hidden = self.model.output_norm.forward(&ctx, x)?;
        hidden.set_output();
        g.build_forward_expand(hidden)?;
        let wanted: Vec<i32> = (0..n as i32)
            .filter(|&i| steps[i as usize].logits)
            .collect();
        let mut pick = None;
        let logits = match wanted.len() {
            0 => None,
            m => {
                // why: only the steps that sample text need the (vocabulary-wide) head.
                let sel = if m == n {
                    hidden
                } else {
                    let idx = input(ctx.new_tensor_1d(GgmlType::I32, m as i64)?, "inp_pick")?;
                    pick = Some(idx);
                    ctx.get_rows(hidden, idx)?
                };
                let l = ctx.mul_mat(ctx.param(&self.model.head), sel)?;
                l.set_output();
                g.build_forward_expand(l)?;
                Some(l)
            }
        };

        compute.alloc.alloc_graph(&g)?;
        set_embed_inputs(&it, &inp)?;
        for (q, s) in seqs.iter().zip(steps) {
            set_sequence_inputs(q, s.cache.len(), 1, self.sliding_window)?;
        }
        if let Some(idx) = pick {
            idx.set_i32(&wanted)?;
        }
        compute.compute_column_stable(&g)?;

        let hidden = hidden.get_f32()?;
        let vocab = logits.map_or(0, |l| l.ne()[0] as usize);
        let logits = logits.map(|l| l.get_f32()).transpose()?;
        let mut next_logits = 0;
        Ok(steps
            .iter()
            .enumerate()
            .map(|(i, s)| ForwardOutput {
                rows: 1,
                hidden: hidden[i * h..(i + 1) * h].to_vec(),
                logits: match (&logits, s.logits) {
                    (Some(l), true) => {
                        next_logits += 1;
                        Some(l[(next_logits - 1) * vocab..next_logits * vocab].to_vec())
                    }
                    _ => None,
                },
            })
            .collect())
    }
}
