//! Frames of several replies at once: each codebook step of all their frames runs as one
//! graph (the [`graph`](super::graph) module's step of `w` frames), computed column-stable so
//! that each frame gets the bits it gets alone. Each reply's sampler picks its code between the
//! steps; a reply whose codebook 0 is end-of-audio (or whose sampling fails) leaves the frame
//! there, the others go on.

use std::sync::Arc;

use crate::ggml::{Backend, Context};

use super::super::backbone::BatchCompute;
use super::graph::{build_step, graph_size, FrameState};
use super::{DepthError, Depthformer, R};
use crate::lfm2_audio::model::sampling::AudioSampler;

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
        let size = graph_size(self.layers.len(), active.len());
        let ctx = Context::metadata_with_graph(size, size)?;
        let frames: Vec<&FrameState> = active.iter().map(|&j| &jobs[j].rows.0).collect();
        let step = build_step(self, &ctx, &frames, i)?;
        compute.alloc_graph(&step.graph)?;
        let hidden: Vec<f32> = match i {
            0 => active
                .iter()
                .flat_map(|&j| jobs[j].hidden.iter().copied())
                .collect(),
            _ => Vec::new(),
        };
        let prev: Vec<i32> = match i {
            0 => Vec::new(),
            _ => active.iter().map(|&j| codes[j][i - 1] as i32).collect(),
        };
        step.set_inputs(&hidden, &prev)?;
        compute.compute_column_stable(&step.graph)?;
        Ok(step.logits.get_f32()?)
    }
}
