//! The step scheduler: the single-position backbone steps of every reply running on a loaded
//! model, batched across replies into ticks of one graph each ([`Backbone::forward_steps`]).
//!
//! A generating reply announces each step ([`StepScheduler::intend`]) when it starts it, then
//! posts it (its decode cache, the position, whether it needs logits) and waits for the
//! result; the steps are run in `Ticks` (`model/ticks.rs`): the first poster that finds no
//! tick running gathers the announced steps (waiting for replies still busy with their frame),
//! computes up to `max_batch` of them as one graph and hands each its result. So a reply alone
//! runs its steps itself without waiting, and replies join and leave between ticks.
//!
//! A step's bits do not depend on its company (see [`Backbone::forward_steps`]), so when and
//! with whom it runs never changes a reply's output. A bad step fails alone, before it is
//! posted ([`Backbone::check_step`]); a failing tick fails each of its steps with the shared
//! cause, and the other replies go on.
//!
//! Prefills (questions, the reply head, prefill ahead) are not steps: they keep their own
//! chunked graphs on their session's backend and run beside the ticks, sharing the model's CPU
//! thread budget (see [`crate::ggml::thread_budget`]), which keeps the compute threads of
//! everything running at once within the configured count.

use std::sync::{Arc, Mutex};

use crate::ggml::Backend;

use super::super::ticks::{Intent, Ticks};
use super::batch::{BatchCompute, Step};
use super::cache::DecodeCache;
use super::error::BackboneError;
use super::model::Backbone;
use super::types::{ForwardOutput, Position};

pub use super::super::ticks::TickStats;

/// A position owned by a posted step (the poster's borrowed data may not cross threads).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
pub enum OwnedPosition {
    /// A text token id.
    Text(u32),
    /// An audio-in embedding row.
    Audio(Vec<f32>),
    /// An audio-out frame's codes.
    Frame(Vec<u32>),
}

impl OwnedPosition {
    /// The position, borrowed.
    pub fn as_position(&self) -> Position<'_> {
        match self {
            OwnedPosition::Text(t) => Position::Text(*t),
            OwnedPosition::Audio(a) => Position::Audio(a),
            OwnedPosition::Frame(f) => Position::Frame(f),
        }
    }
}

/// A step that did not run: why, and the cache it was given (at its old length) when it could
/// be kept.
#[derive(Debug)]
pub struct StepFailed {
    /// The step's cache, unchanged in length.
    pub cache: Option<DecodeCache>,
    /// Why the step failed.
    pub error: BackboneError,
}

/// A step's cache (advanced by one position) and output, or why it failed.
pub type StepResult = Result<(DecodeCache, ForwardOutput), Box<StepFailed>>;

/// A posted step.
pub struct Posted {
    cache: DecodeCache,
    position: OwnedPosition,
    logits: bool,
}

/// A step announced to the ticks (see [`StepScheduler::intend`]).
pub type StepIntent = Intent<Posted, StepResult>;

/// Batches the single-position steps of the replies on one model (see the module docs).
pub struct StepScheduler {
    ticks: Arc<Ticks<Posted, StepResult>>,
    compute: Mutex<BatchCompute>,
}

impl std::fmt::Debug for StepScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepScheduler")
            .field("max_batch", &self.ticks.max_batch())
            .finish_non_exhaustive()
    }
}

impl StepScheduler {
    /// A scheduler whose ticks compute on `backend` (an instance of the weights' device, with
    /// the thread count steps should use) and hold at most `max_batch` steps (at least 1).
    pub fn new(backend: Backend, max_batch: usize) -> Result<StepScheduler, BackboneError> {
        Ok(StepScheduler {
            ticks: Arc::new(Ticks::new(max_batch)),
            compute: Mutex::new(BatchCompute::new(backend, "backbone")?),
        })
    }

    /// The most steps one tick runs.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn max_batch(&self) -> usize {
        self.ticks.max_batch()
    }

    /// What has run so far.
    pub fn stats(&self) -> TickStats {
        self.ticks.stats()
    }

    /// Announces a step this thread will post: ticks gather for it until it is posted (give
    /// it to [`StepScheduler::step`]) or dropped.
    pub fn intend(&self) -> StepIntent {
        self.ticks.intend()
    }

    /// Runs `position` at the end of `cache` in the next tick and returns the cache (advanced
    /// by one position) with the step's output. A step that could not run fails alone, before
    /// it is posted, and gives its cache back unchanged in the error; when its tick fails the
    /// cache comes back too, at its old length, and every step of the tick gets the cause.
    pub fn step(
        &self,
        intent: Option<StepIntent>,
        backbone: &Backbone,
        cache: DecodeCache,
        position: OwnedPosition,
        logits: bool,
    ) -> StepResult {
        if let Err(error) = backbone.check_step(&cache, &position.as_position()) {
            return Err(Box::new(StepFailed {
                cache: Some(cache),
                error,
            }));
        }
        let job = Posted {
            cache,
            position,
            logits,
        };
        self.ticks
            .post(intent, job, &|jobs| self.run(backbone, jobs))
    }

    fn run(&self, backbone: &Backbone, mut jobs: Vec<Posted>) -> Vec<StepResult> {
        let compute = self.compute.lock().unwrap_or_else(|e| e.into_inner());
        let outcome = {
            let mut steps: Vec<Step<'_, '_>> = jobs
                .iter_mut()
                .map(|p| Step {
                    cache: &mut p.cache,
                    position: p.position.as_position(),
                    logits: p.logits,
                })
                .collect();
            backbone.forward_steps(&compute, &mut steps)
        };
        match outcome {
            Ok(outputs) => jobs
                .into_iter()
                .zip(outputs)
                .map(|(p, out)| Ok((p.cache, out)))
                .collect(),
            Err(error) if jobs.len() == 1 => {
                let cache = jobs.pop().map(|p| p.cache);
                vec![Err(Box::new(StepFailed { cache, error }))]
            }
            Err(e) => {
                let e = Arc::new(e);
                jobs.into_iter()
                    .map(|p| {
                        Err(Box::new(StepFailed {
                            cache: Some(p.cache),
                            error: BackboneError::Batch(e.clone()),
                        }))
                    })
                    .collect()
            }
        }
    }
}
