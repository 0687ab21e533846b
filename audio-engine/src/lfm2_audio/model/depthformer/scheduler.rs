//! The frame scheduler: the depthformer frames of every speaking reply on a loaded model,
//! batched across replies into ticks (`Ticks`, `model/ticks.rs`) of [`Depthformer::frames`], as
//! the step scheduler batches the backbone's steps. A reply announces its frame when it learns
//! one comes next, posts it (its frame rows and its audio sampler move in and back out, with the
//! backbone's hidden state) and waits for the codes; a frame's bits do not depend on its company.

use std::sync::{Arc, Mutex};

use crate::ggml::Backend;

use super::super::backbone::{BackboneError, BatchCompute};
use super::super::ticks::{Intent, TickStats, Ticks};
use super::{DepthError, Depthformer, FrameJob, FrameRows};
use crate::lfm2_audio::model::sampling::AudioSampler;

/// A posted frame.
pub struct FramePosted {
    rows: FrameRows,
    hidden: Vec<f32>,
    sampler: AudioSampler,
}

/// A frame's outcome, with the reply's rows and sampler back.
#[derive(Debug)]
pub struct FrameDone {
    /// The reply's frame rows.
    pub rows: FrameRows,
    /// The reply's audio sampler, past the frame's draws.
    pub sampler: AudioSampler,
    /// The frame's codes, or why it failed.
    pub codes: Result<Vec<u32>, DepthError>,
}

/// A frame announced to the ticks (see [`FrameScheduler::intend`]).
pub type FrameIntent = Intent<FramePosted, FrameDone>;

/// Batches the depthformer frames of the replies on one model.
pub struct FrameScheduler {
    ticks: Arc<Ticks<FramePosted, FrameDone>>,
    compute: Mutex<BatchCompute>,
}

impl std::fmt::Debug for FrameScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameScheduler")
            .field("max_batch", &self.ticks.max_batch())
            .finish_non_exhaustive()
    }
}

impl FrameScheduler {
    /// A scheduler whose ticks compute on `backend` (an instance of the weights' device, with
    /// the thread count frames should use) and hold at most `max_batch` frames (at least 1).
    pub fn new(backend: Backend, max_batch: usize) -> Result<FrameScheduler, BackboneError> {
        Ok(FrameScheduler {
            ticks: Arc::new(Ticks::new(max_batch)),
            compute: Mutex::new(BatchCompute::new(backend, "depthformer")?),
        })
    }

    /// What has run so far.
    pub fn stats(&self) -> TickStats {
        self.ticks.stats()
    }

    /// Announces a frame this thread will post: ticks gather for it until it is posted (give
    /// it to [`FrameScheduler::frame`]) or dropped.
    pub fn intend(&self) -> FrameIntent {
        self.ticks.intend()
    }

    /// One frame from the backbone's final-norm `hidden` state, sampled with `sampler`, in the
    /// next tick.
    pub fn frame(
        &self,
        intent: Option<FrameIntent>,
        depth: &Depthformer,
        rows: FrameRows,
        hidden: Vec<f32>,
        sampler: AudioSampler,
    ) -> FrameDone {
        let job = FramePosted {
            rows,
            hidden,
            sampler,
        };
        self.ticks.post(intent, job, &|mut jobs| {
            let compute = self.compute.lock().unwrap_or_else(|e| e.into_inner());
            let codes = {
                let mut frames: Vec<FrameJob<'_>> = jobs
                    .iter_mut()
                    .map(|p| FrameJob {
                        rows: &p.rows,
                        hidden: &p.hidden,
                        sampler: &mut p.sampler,
                    })
                    .collect();
                depth.frames(&compute, &mut frames)
            };
            jobs.into_iter()
                .zip(codes)
                .map(|(p, codes)| FrameDone {
                    rows: p.rows,
                    sampler: p.sampler,
                    codes,
                })
                .collect()
        })
    }
}
