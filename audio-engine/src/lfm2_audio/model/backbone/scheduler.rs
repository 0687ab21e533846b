//! The step scheduler: the single-position backbone steps of every reply running on a loaded
//! model, batched across replies into ticks of one graph each ([`Backbone::forward_steps`]).
//!
//! Each generating reply is a [`StepMember`] from the end of its prefill to its last step.
//! It posts its next step (its decode cache, the position, whether it needs logits) and waits
//! for the result. A tick is run by the first poster that finds none running: it waits until
//! every member has posted or a short gathering time has passed, takes up to `max_batch`
//! posted steps in posting order, computes them as one graph, hands each its result and leaves;
//! steps posted meanwhile wait for the next tick. So a reply alone runs its steps itself
//! without waiting, and replies join and leave between ticks.
//!
//! The gathering time is half the last tick's compute time (at most [`MAX_GATHER`]): a member
//! still busy with its frame (depthformer, detokenizer) that would post within it joins the
//! tick rather than wait a whole tick for the next one, and one that is longer busy does not
//! hold the others up for more than that.
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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::ggml::Backend;

use super::batch::{BatchCompute, Step};
use super::{Backbone, BackboneError, DecodeCache, ForwardOutput, Position};

/// The longest a tick waits for members that have not posted yet.
pub const MAX_GATHER: Duration = Duration::from_millis(20);

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

/// What the scheduler has run so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickStats {
    /// Ticks (graphs) run.
    pub ticks: u64,
    /// Steps run in them.
    pub steps: u64,
    /// The widest tick.
    pub max_width: usize,
}

struct Posted {
    ticket: u64,
    cache: DecodeCache,
    position: OwnedPosition,
    logits: bool,
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

#[derive(Default)]
struct Shared {
    queue: VecDeque<Posted>,
    running: bool,
    done: HashMap<u64, StepResult>,
    next_ticket: u64,
    last_tick: Duration,
    stats: TickStats,
}

/// Batches the single-position steps of the replies on one model (see the module docs).
pub struct StepScheduler {
    shared: Mutex<Shared>,
    changed: Condvar,
    members: AtomicUsize,
    compute: Mutex<BatchCompute>,
    max_batch: usize,
}

impl std::fmt::Debug for StepScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepScheduler")
            .field("max_batch", &self.max_batch)
            .field("members", &self.members.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A reply taking part in the ticks; it leaves when dropped.
#[derive(Debug)]
pub struct StepMember {
    scheduler: Arc<StepScheduler>,
}

impl Drop for StepMember {
    fn drop(&mut self) {
        self.scheduler.members.fetch_sub(1, Ordering::Relaxed);
        // why: a tick gathering for this member stops waiting for it.
        self.scheduler.changed.notify_all();
    }
}

impl StepScheduler {
    /// A scheduler whose ticks compute on `backend` (an instance of the weights' device, with
    /// the thread count steps should use) and hold at most `max_batch` steps (at least 1).
    pub fn new(backend: Backend, max_batch: usize) -> Result<StepScheduler, BackboneError> {
        Ok(StepScheduler {
            shared: Mutex::new(Shared::default()),
            changed: Condvar::new(),
            members: AtomicUsize::new(0),
            compute: Mutex::new(BatchCompute::new(backend)?),
            max_batch: max_batch.max(1),
        })
    }

    /// The most steps one tick runs.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// What has run so far.
    pub fn stats(&self) -> TickStats {
        self.lock().stats
    }

    /// Joins the ticks until the returned member is dropped.
    pub fn join(self: &Arc<Self>) -> StepMember {
        self.members.fetch_add(1, Ordering::Relaxed);
        StepMember {
            scheduler: self.clone(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // why: the state stays consistent under a panic (each change is a whole push or
        // remove), so a poisoned lock is taken over rather than failing every later step.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `position` at the end of `cache` in the next tick and returns the cache (advanced
    /// by one position) with the step's output. A step that could not run fails alone, before
    /// it is posted, and gives its cache back unchanged in the error; when its tick fails the
    /// cache comes back too, at its old length.
    pub fn step(
        &self,
        backbone: &Backbone,
        cache: DecodeCache,
        position: OwnedPosition,
        logits: bool,
    ) -> StepResult {
        if let Err(e) = backbone.check_step(&cache, &position.as_position()) {
            return Err(Box::new(StepFailed {
                cache: Some(cache),
                error: e,
            }));
        }
        let mut st = self.lock();
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push_back(Posted {
            ticket,
            cache,
            position,
            logits,
        });
        self.changed.notify_all();
        loop {
            if let Some(r) = st.done.remove(&ticket) {
                return r;
            }
            if !st.running {
                st = self.lead(backbone, st);
                continue;
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Gathers, runs and hands out one tick; returns with the lock held again.
    fn lead<'s>(
        &'s self,
        backbone: &Backbone,
        mut st: MutexGuard<'s, Shared>,
    ) -> MutexGuard<'s, Shared> {
        st.running = true;
        let gather = (st.last_tick / 2).min(MAX_GATHER);
        let deadline = Instant::now() + gather;
        loop {
            let expected = self.members.load(Ordering::Relaxed).min(self.max_batch);
            let now = Instant::now();
            if st.queue.len() >= expected || now >= deadline {
                break;
            }
            st = self
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let width = st.queue.len().min(self.max_batch);
        let mut batch: Vec<Posted> = st.queue.drain(..width).collect();
        drop(st);

        let compute = self.compute.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let outcome = {
            let mut steps: Vec<Step<'_, '_>> = batch
                .iter_mut()
                .map(|p| Step {
                    cache: &mut p.cache,
                    position: p.position.as_position(),
                    logits: p.logits,
                })
                .collect();
            backbone.forward_steps(&compute, &mut steps)
        };
        let took = started.elapsed();
        drop(compute);

        let mut st = self.lock();
        st.running = false;
        st.last_tick = took;
        st.stats.ticks += 1;
        st.stats.steps += width as u64;
        st.stats.max_width = st.stats.max_width.max(width);
        match outcome {
            Ok(outputs) => {
                for (p, out) in batch.into_iter().zip(outputs) {
                    st.done.insert(p.ticket, Ok((p.cache, out)));
                }
            }
            Err(e) => {
                let e = Arc::new(e);
                for p in batch {
                    let failed = StepFailed {
                        cache: Some(p.cache),
                        error: BackboneError::Batch(e.clone()),
                    };
                    st.done.insert(p.ticket, Err(Box::new(failed)));
                }
            }
        }
        self.changed.notify_all();
        st
    }
}
