//! Frames of several replies at once: each codebook step of all their frames runs as one
//! graph (the weight-heavy products take `[d, n]`), and attention runs on each frame's own
//! K/V rows. Each reply's sampler picks its code between the steps; a reply whose codebook 0
//! is end-of-audio (or whose sampling fails) leaves the frame there, the others go on.
//!
//! A frame's bits do not depend on its company, as for the backbone's batched steps: the
//! per-frame ops are those of a lone frame, the row-wise ops do not mix columns, and the graphs
//! are computed with [`Backend::compute_column_stable`](crate::ggml::Backend::compute_column_stable).

use std::sync::Arc;

use crate::ggml::{Backend, Context, GgmlType, Tensor};

use super::super::backbone::BatchCompute;
use super::super::nn::{column, input, side_by_side, AttentionInputs, KvRows};
use super::{graph_size, DepthError, Depthformer, FrameState, R};
use crate::lfm2_audio::model::sampling::AudioSampler;

/// Graph nodes per frame and layer beyond the shared ones.
const NODES_PER_FRAME_LAYER: usize = 24;

/// One reply's frame state for batched frames: the K/V rows of its codebook positions and its
/// `depth_linear` output, in memory of its own.
pub struct FrameRows(FrameState);

impl std::fmt::Debug for FrameRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameRows").finish_non_exhaustive()
    }
}

/// One reply's next frame in a batch.
pub struct FrameJob<'j> {
    /// Its frame rows (overwritten by the frame).
    pub rows: &'j FrameRows,
    /// The backbone's final-norm hidden state the frame comes from.
    pub hidden: &'j [f32],
    /// The reply's audio sampler.
    pub sampler: &'j mut AudioSampler,
}

impl Depthformer {
    /// Frame rows for batched frames, in memory of `backend`'s device.
    pub fn new_frame_rows(&self, backend: &Backend) -> R<FrameRows> {
        Ok(FrameRows(FrameState::new(&self.config, backend)?))
    }

    /// One frame for each job, as [`Depthformer::frame`] gives it alone, computed together:
    /// one result per job, in order. A job whose input is bad or whose sampling fails gets its
    /// error and the others go on; a failed compute fails every job still running (with
    /// [`DepthError::Batch`], or the cause itself when one job was running).
    pub fn frames(&self, compute: &BatchCompute, jobs: &mut [FrameJob<'_>]) -> Vec<R<Vec<u32>>> {
        let c = self.codebooks();
        let mut results: Vec<Option<R<Vec<u32>>>> = jobs
            .iter()
            .map(|j| self.check_hidden(j.hidden).err().map(Err))
            .collect();
        let mut codes: Vec<Vec<u32>> = vec![Vec::with_capacity(c); jobs.len()];
        for i in 0..c {
            let active: Vec<usize> = (0..jobs.len()).filter(|&j| results[j].is_none()).collect();
            if active.is_empty() {
                break;
            }
            let logits = match self.step(compute, jobs, &codes, &active, i) {
                Ok(l) => l,
                Err(e) if active.len() == 1 => {
                    results[active[0]] = Some(Err(e));
                    break;
                }
                Err(e) => {
                    let e = Arc::new(e);
                    for &j in &active {
                        results[j] = Some(Err(DepthError::Batch(e.clone())));
                    }
                    break;
                }
            };
            let vocab = logits.len() / active.len();
            for (col, &j) in active.iter().enumerate() {
                let row = &logits[col * vocab..(col + 1) * vocab];
                match jobs[j].sampler.sample(row) {
                    Ok(code) => {
                        codes[j].push(code);
                        if i == 0 && code == self.end_of_audio() {
                            // why: liquid-audio overwrites the whole frame with end-of-audio.
                            results[j] = Some(Ok(vec![code; c]));
                        }
                    }
                    Err(source) => {
                        results[j] = Some(Err(DepthError::Sample {
                            codebook: i,
                            source,
                        }))
                    }
                }
            }
        }
        results
            .into_iter()
            .zip(codes)
            .map(|(r, codes)| r.unwrap_or(Ok(codes)))
            .collect()
    }

    /// Codebook step `i` of the `active` jobs as one graph: their logits, `[vocab, n]`.
    fn step(
        &self,
        compute: &BatchCompute,
        jobs: &[FrameJob<'_>],
        codes: &[Vec<u32>],
        active: &[usize],
        i: usize,
    ) -> R<Vec<f32>> {
        let cfg = &self.config;
        let w = active.len();
        let n_layer = self.layers.len();
        let size = graph_size(n_layer) + NODES_PER_FRAME_LAYER * w * (n_layer + 1);
        let ctx = Context::metadata_with_graph(size, size)?;
        let mut g = ctx.new_graph(size)?;
        let states: Vec<Vec<Tensor<'_>>> = active
            .iter()
            .map(|&j| jobs[j].rows.0.ctx.tensors())
            .collect();
        let d = i64::from(cfg.n_embd);
        let f = std::mem::size_of::<f32>();
        let pos = input(ctx.new_tensor_1d(GgmlType::I32, 1)?, "depth_pos")?;

        let (mut x, hidden, prev) = if i == 0 {
            let h = input(
                ctx.new_tensor_2d(GgmlType::F32, i64::from(cfg.backbone_embd), w as i64)?,
                "depth_hidden",
            )?;
            let dl = self.depth_linear.forward(&ctx, h)?; // [C * d, w]
                                                          // The later steps read their slices from each frame's rows.
            for (col, st) in states.iter().enumerate() {
                g.build_forward_expand(ctx.cpy(column(&ctx, dl, col)?, st[2 * n_layer])?)?;
            }
            (ctx.view_2d(dl, d, w as i64, dl.nb()[1], 0)?, Some(h), None)
        } else {
            let idx = input(
                ctx.new_tensor_1d(GgmlType::I32, w as i64)?,
                "depth_prev_code",
            )?;
            let e = ctx.get_rows(ctx.param(&self.books[i - 1].embedding), idx)?; // [d, w]
            let mut cols = Vec::with_capacity(w);
            for (col, st) in states.iter().enumerate() {
                let slice = ctx.view_1d(st[2 * n_layer], d, i * d as usize * f)?;
                cols.push(ctx.add(column(&ctx, e, col)?, slice)?);
            }
            (side_by_side(&ctx, &cols)?, None, Some(idx))
        };

        let inputs = AttentionInputs {
            pos,
            mask: None,
            p0: i,
        };
        for (il, l) in self.layers.iter().enumerate() {
            let cur = l.attn_norm.forward(&ctx, x)?;
            let qkv = l.attn.project(&ctx, cur)?;
            let mut cols = Vec::with_capacity(w);
            for (col, st) in states.iter().enumerate() {
                let rows = KvRows {
                    k: st[2 * il],
                    v: st[2 * il + 1],
                };
                let q = qkv.position(&ctx, col)?;
                cols.push(l.attn.attend(&ctx, &mut g, q, rows, &inputs)?);
            }
            x = ctx.add(x, l.attn.out.forward(&ctx, side_by_side(&ctx, &cols)?)?)?;
            let cur = l.ffn_norm.forward(&ctx, x)?;
            x = ctx.add(x, l.ffn.forward(&ctx, cur)?)?;
        }
        let b = &self.books[i];
        let logits = b.to_logits.forward(&ctx, b.norm.forward(&ctx, x)?)?; // [vocab, w]
        logits.set_output();
        g.build_forward_expand(logits)?;

        compute.alloc_graph(&g)?;
        pos.set_i32(&[i as i32])?;
        if let Some(h) = hidden {
            let rows: Vec<f32> = active
                .iter()
                .flat_map(|&j| jobs[j].hidden.iter().copied())
                .collect();
            h.set_f32(&rows)?;
        }
        if let Some(idx) = prev {
            let prev: Vec<i32> = active.iter().map(|&j| codes[j][i - 1] as i32).collect();
            idx.set_i32(&prev)?;
        }
        compute.compute_column_stable(&g)?;
        Ok(logits.get_f32()?)
    }
}
