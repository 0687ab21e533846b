//! The blocking engine work of a request, on the engine's
//! `Worker` (`audio_engine::lfm2_audio::worker`): the leased session (S2S) or its model
//! (ASR, TTS) runs the engine's [`Job`] ([`Session::run`](audio_engine::lfm2_audio::Session::run))
//! and hands its events and its outcome to the channel the route or socket reads, each message
//! shaped by that reader ([`Deliver`]): one channel from the engine to the client. A closed
//! channel (the client went away) makes the sink return false and the cancel flag (the server's
//! hard stop, a response's cancel) the engine's cancel check, either of which stops generation
//! at the next event (the flag also before each ASR chunk); the lease then gives the session
//! back, before the reader hears the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use audio_engine::lfm2_audio::worker::{self, Outlet, Worker};
use audio_engine::lfm2_audio::{EngineError, Job, Outcome, ReplyEvent};

use crate::pool::Lease;

/// A finished job: the engine's outcome and where and how long it ran.
#[derive(Debug, Clone)]
pub struct Finished {
    /// What the engine produced.
    pub outcome: Outcome,
    /// Whether the session served this conversation's previous turn.
    pub affine: bool,
    /// The slot that ran it.
    pub slot: usize,
    /// Time in the engine.
    pub engine_time: Duration,
}

impl std::ops::Deref for Finished {
    type Target = Outcome;

    fn deref(&self) -> &Outcome {
        &self.outcome
    }
}

/// A message from the worker.
pub enum Msg {
    Event(ReplyEvent),
    /// Boxed: the outcome (audio, artifact, timings) is ten times an event's size.
    Done(Result<Box<Finished>, EngineError>),
}

/// Where a job's messages go: the reader's channel, and how each message becomes one of the
/// reader's (`None`: not sent; an event dropped so still goes on).
pub struct Deliver<M> {
    tx: mpsc::Sender<M>,
    shape: Box<dyn FnMut(Msg) -> Option<M> + Send>,
}

impl<M: Send + 'static> Deliver<M> {
    /// Messages into `tx`, each shaped by `shape`.
    pub fn new(tx: mpsc::Sender<M>, shape: impl FnMut(Msg) -> Option<M> + Send + 'static) -> Self {
        Deliver {
            tx,
            shape: Box::new(shape),
        }
    }
}

impl<M: Send + 'static> Outlet<ReplyEvent, Result<Box<Finished>, EngineError>> for Deliver<M> {
    fn event(&mut self, ev: ReplyEvent) -> bool {
        match (self.shape)(Msg::Event(ev)) {
            Some(m) => self.tx.blocking_send(m).is_ok(),
            None => !self.tx.is_closed(),
        }
    }

    fn end(mut self, end: worker::End<Result<Box<Finished>, EngineError>>) {
        if let Some(m) = (self.shape)(Msg::Done(end.result.and_then(|r| r))) {
            // why ignored: a reader gone has no use for the end.
            let _ = self.tx.blocking_send(m);
        }
    }
}

/// Runs `job` on `lease` off the runtime, its messages into `deliver`; `cancel` (and `also`, a
/// second flag such as the server's hard stop) stops it at the next step. `Err` only if the
/// worker thread could not start (the lease is then given back).
pub fn start<M: Send + 'static>(
    mut lease: Lease,
    job: Job,
    cancel: Arc<AtomicBool>,
    also: Option<Arc<AtomicBool>>,
    deliver: Deliver<M>,
) -> Result<(), EngineError> {
    let t0 = Instant::now();
    let worker = Worker::spawn("serve-job", cancel, deliver, move |sink, keep_going| {
        let keep_going =
            || keep_going() && !also.as_ref().is_some_and(|f| f.load(Ordering::Relaxed));
        let keep_going: &dyn Fn() -> bool = &keep_going;
        let (affine, slot) = (lease.affine, lease.index());
        // why ASR and TTS on the model: a one-shot session leaves this slot's conversation
        // caches and its prefill ahead alone.
        let res = match job {
            Job::S2s(_) => lease.session().run_cancellable(&job, keep_going, sink),
            _ => lease.model().run_cancellable(&job, keep_going, sink),
        };
        // why: give the session back before the reader hears the end, so a next turn sent at
        // once finds it free.
        drop(lease);
        res.map(|outcome| {
            Box::new(Finished {
                outcome,
                affine,
                slot,
                engine_time: t0.elapsed(),
            })
        })
    })?;
    // The reader learns of the end from the channel; nothing waits on the thread.
    worker.detach();
    Ok(())
}

/// Runs `job` on `lease` with a channel of its own (`capacity` messages buffered before the
/// generation waits for the client). ASR's text pieces are not sent (its routes answer once),
/// but its sink still hears the cancel flag.
pub fn spawn(
    lease: Lease,
    job: Job,
    cancel: Arc<AtomicBool>,
    capacity: usize,
) -> mpsc::Receiver<Msg> {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let forward = !matches!(job, Job::Asr(_));
    let shape = move |m: Msg| match m {
        Msg::Event(_) if !forward => None,
        m => Some(m),
    };
    if let Err(e) = start(lease, job, cancel, None, Deliver::new(tx.clone(), shape)) {
        // why try_send: the channel is new and empty, so it has room for this one message.
        let _ = tx.try_send(Msg::Done(Err(e)));
    }
    rx
}
