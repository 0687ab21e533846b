//! The blocking engine work of a request, on a `spawn_blocking` thread: the leased session (S2S)
//! or its model (ASR, TTS) runs the engine's [`Job`]
//! ([`Session::run`](audio_engine::lfm2_audio::Session::run)) and reports
//! events and the outcome through a channel. A closed channel (the client went away) makes the
//! sink return false and the server's hard stop the engine's cancel check, either of which
//! stops generation at the next event (the hard stop also before each ASR chunk); the lease
//! then gives the session back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

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

/// Runs `job` on `lease` off the runtime; events and the outcome arrive on the returned
/// channel (`capacity` events buffered before the generation waits for the client). ASR's text
/// pieces are not sent (its routes answer once), but its sink still hears the hard stop.
pub fn spawn(
    mut lease: Lease,
    job: Job,
    stop: Arc<AtomicBool>,
    capacity: usize,
) -> mpsc::Receiver<Msg> {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    tokio::task::spawn_blocking(move || {
        let t0 = Instant::now();
        let forward = !matches!(job, Job::Asr(_));
        // why the stop as the engine's cancel check, not only in the sink: it is then also
        // asked before each ASR chunk, whose encode hands over no event.
        let keep_going = || !stop.load(Ordering::Relaxed);
        let mut sink = |ev: ReplyEvent| !forward || tx.blocking_send(Msg::Event(ev)).is_ok();
        let (affine, slot) = (lease.affine, lease.index());
        // why ASR and TTS on the model: a one-shot session leaves this slot's conversation
        // caches and its prefill ahead alone.
        let res = match job {
            Job::S2s(_) => lease
                .session()
                .run_cancellable(&job, &keep_going, &mut sink),
            _ => lease.model().run_cancellable(&job, &keep_going, &mut sink),
        };
        let res = res.map(|outcome| {
            Box::new(Finished {
                outcome,
                affine,
                slot,
                engine_time: t0.elapsed(),
            })
        });
        // why: give the session back before the client hears the end, so a next turn sent at
        // once finds it free.
        drop(lease);
        let _ = tx.blocking_send(Msg::Done(res));
    });
    rx
}
