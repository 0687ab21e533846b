//! The response runner: one response leases a pool session with the socket's affinity key
//! (its prefill blocks and encoder outputs of this conversation are then reused on the next
//! turn when it is free), runs the turn on it ([`crate::work`], whose worker sends the events
//! into the channel the socket reads) and gives it back when the turn ends. Nothing is held while the socket is idle, so idle clients cannot starve the server.
//!
//! A cancel (the client's `response.cancel`, a barge-in, the socket closing, the server's hard
//! stop) raises the response's flag: the engine stops at its next step and the session goes
//! back to the pool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use audio_engine::lfm2_audio::tools::CallSplitter;
use audio_engine::lfm2_audio::Job;

use serde_json::Value;

use crate::error::ApiError;
use crate::work::{self, Deliver, Msg};
use crate::{AppState, Entry};

use super::conversation::Item;
use super::session_config::Modality;

/// What the runner reports to the socket loop.
pub enum RunMsg {
    /// The engine's event or outcome.
    Work(Msg),
    /// No session could be leased (all busy past the wait, or the server is stopping).
    Refused(ApiError),
}

/// Why a response was cancelled (the API's `status_details.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// `response.cancel`.
    Client,
    /// Speech started during the response (server VAD).
    TurnDetected,
}

impl CancelReason {
    /// The API's name.
    pub fn name(self) -> &'static str {
        match self {
            CancelReason::Client => "client_cancelled",
            CancelReason::TurnDetected => "turn_detected",
        }
    }
}

/// What a response was asked for that shapes its events: echoed in `response.created` and
/// `response.done`.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// What it sends (audio with a transcript, or text).
    pub output: Modality,
    /// Whether its item joins the conversation (`conversation: "auto"`) or not (`"none"`:
    /// an out-of-band response).
    pub in_conversation: bool,
    /// The request's `metadata` (null when it had none).
    pub metadata: Value,
    /// The voice asked for (only echoed: the model speaks in its own voice).
    pub voice: Value,
    /// Its `max_output_tokens` (`None`: the server's limit, echoed `"inf"`).
    pub max_output_tokens: Option<usize>,
    /// Whether its prompt lists tools: the reply's calls are then split from its text.
    pub calls: bool,
}

/// A running response.
pub struct Response {
    /// Its id (`resp_...`).
    pub id: String,
    /// The id of the assistant item it makes.
    pub item_id: String,
    /// What it was asked for.
    pub shape: Shape,
    /// Its item while it is generated, when it does not join the conversation
    /// (`conversation: "none"`); `None` when the item is in the conversation.
    pub detached: Option<Item>,
    /// The runner's messages.
    pub rx: mpsc::Receiver<RunMsg>,
    cancel: Arc<AtomicBool>,
    /// Set once cancelled: later audio and text are not sent.
    pub cancelled: Option<CancelReason>,
    /// When the question's turn ended (the commit, or the VAD's end of speech).
    pub turn_end: Instant,
    /// When the response was created.
    pub created: Instant,
    /// From `turn_end` to the first audio delta.
    pub first_audio: Option<Duration>,
    /// Samples of audio sent to the client.
    pub audio_sent: usize,
    /// A `conversation.item.truncate` of this response's item that came after the cancel and
    /// before the end (content index, audio_end_ms): applied, and acknowledged, when it ends.
    pub truncate_at_end: Option<(u64, u64)>,
    /// Splits the reply's text from its calls (when [`Shape::calls`]).
    pub splitter: Option<CallSplitter>,
    /// The function_call items the reply made so far (their output order).
    pub calls: Vec<Item>,
}

/// Which session a response leases: the one that last served the socket's affinity `key`,
/// once `early` (the task that started this turn early on a leased session) has given it back.
pub struct Seat {
    pub key: u64,
    pub early: Option<tokio::task::JoinHandle<()>>,
}

impl Response {
    /// Starts `job` on a session of `entry`'s pool chosen by `seat`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        state: &Arc<AppState>,
        entry: &Entry,
        seat: Seat,
        job: Job,
        id: String,
        item_id: String,
        shape: Shape,
        turn_end: Instant,
    ) -> Response {
        let (tx, rx) = mpsc::channel(64);
        let cancel = Arc::new(AtomicBool::new(false));
        let pool = entry.pool.clone();
        let timeout = state.busy_timeout(None);
        let flag = cancel.clone();
        let Seat { key, early } = seat;
        let shape_calls = shape.calls;
        tokio::spawn(async move {
            if let Some(early) = early {
                // why: the session it leased holds the turn's work; acquired before it is
                // back, the response would get another session and start from nothing.
                let _ = early.await;
            }
            // why the select: a socket that goes away while waiting for a session stops
            // waiting, so it never takes one.
            let lease = tokio::select! {
                l = pool.acquire(Some(key), timeout) => l,
                _ = tx.closed() => return,
            };
            let lease = match lease {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(RunMsg::Refused(e)).await;
                    return;
                }
            };
            // why no relay: the engine's worker sends into the socket's own channel.
            let deliver = Deliver::new(tx.clone(), |m| Some(RunMsg::Work(m)));
            if let Err(e) = work::start(lease, job, flag, None, deliver) {
                let _ = tx.send(RunMsg::Work(Msg::Done(Err(e)))).await;
            }
        });
        Response {
            id,
            item_id,
            shape,
            detached: None,
            rx,
            cancel,
            cancelled: None,
            turn_end,
            created: Instant::now(),
            first_audio: None,
            audio_sent: 0,
            truncate_at_end: None,
            splitter: shape_calls.then(CallSplitter::new),
            calls: Vec::new(),
        }
    }

    /// Cancels the response: the engine stops at its next step and nothing more is sent.
    pub fn cancel(&mut self, reason: CancelReason) {
        self.cancel.store(true, Ordering::SeqCst);
        self.cancelled.get_or_insert(reason);
    }
}

impl Drop for Response {
    /// why: a socket closed mid-response stops the engine at its next step, which gives the
    /// pool session back.
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
    }
}
