//! Input audio transcription, when the session asks for it (`audio.input.transcription`, beta
//! `input_audio_transcription`; any `model` value is taken and echoed): the loaded model's own
//! ASR on each committed spoken question, as `conversation.item.input_audio_transcription
//! .delta` events (the model's text pieces as they come) then `.completed` (the transcript,
//! also put on the item), or `.failed` with an error object.
//!
//! Scheduling, so that a reply's audio never shares the CPU with it: a transcription runs only
//! while no response is generating. A question whose response starts at once (turn detection's
//! `create_response`) is transcribed after that response is done; one committed with no
//! response yet is transcribed [`GRACE`] after its commit (when no response came meanwhile), and
//! when a response is then created the transcription is stopped (the engine's cancel check, at its next token), the response waits for its
//! session to be back, and the transcription runs again from the start once the response ends
//! (the text already sent as deltas is not sent twice). Questions are transcribed one at a time,
//! in commit order, each on a pool session leased with the socket's affinity key.
//!
//! It encodes the audio again: the engine's ASR runs on the model (a one-shot session), and the
//! encoder output an S2S session keeps for the question is not reachable from there.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use audio_engine::lfm2_audio::{AudioInput, Job, ReplyEvent, Request, Task};

use crate::tasks::fields::context;
use crate::work::{self, Deliver, Msg};
use crate::{AppState, Entry};

use super::conversation::{Body, Conversation};
use super::error::EventError;
use super::events::event;

/// How long a question waits after it joined the conversation before its transcription may
/// start. why: clients send the commit and `response.create` back to back (the Agents SDK's
/// `send_audio` then the app's `response.create`, LiveKit's `commit_audio` then
/// `generate_reply`); a transcription started between them would hold the response's session
/// until its encoder pass ends (the cancel check is between passes and tokens).
pub const GRACE: Duration = Duration::from_millis(300);

/// What a running transcription reports.
pub enum AsrMsg {
    /// A piece of the transcript.
    Delta(String),
    /// The transcript and the seconds of audio it heard, or why there is none.
    Done(Result<(String, f64), EventError>),
}

/// A question waiting for its transcription, and the text of it already sent as deltas (by a
/// run that a response stopped).
#[derive(Clone)]
struct Waiting {
    item_id: String,
    sent: String,
    /// When it may start.
    ready_at: Instant,
}

/// The transcription running now.
struct Running {
    waiting: Waiting,
    /// The text this run has heard so far.
    heard: String,
    stop: Arc<AtomicBool>,
    rx: mpsc::Receiver<AsrMsg>,
    /// The task that leases a session and runs the ASR (taken by [`Transcriber::preempt`]).
    task: Option<JoinHandle<()>>,
}

impl Drop for Running {
    /// why: a socket closed (or transcription turned off) mid-run stops the engine at its next
    /// token, which gives the session back.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A socket's transcriptions: the questions waiting, in commit order, and the one running.
#[derive(Default)]
pub struct Transcriber {
    queue: VecDeque<Waiting>,
    running: Option<Running>,
}

/// The events of one [`AsrMsg`], and the transcript to put on its item when it completed.
pub struct Heard {
    /// The server events to send.
    pub events: Vec<Value>,
    /// `(item id, transcript)` of a completed transcription.
    pub transcript: Option<(String, String)>,
}

fn failed(item_id: &str, e: &EventError) -> Value {
    event(
        "conversation.item.input_audio_transcription.failed",
        json!({"item_id": item_id, "content_index": 0,
               "error": {"type": e.kind, "code": e.code, "message": e.message,
                         "param": e.param}}),
    )
}

/// The engine's ASR job for a question's WAV, resolved as the `/v1/tasks` routes resolve one
/// (the server's limits, the model's one-pass length).
fn asr_job(state: &AppState, entry: &Entry, wav: Vec<u8>) -> Result<Job, EventError> {
    let request = Request {
        audio: Some(AudioInput::Wav(wav)),
        ..Request::new(Task::Asr)
    };
    request
        .resolve(&context(state, entry))
        .map(|r| r.job)
        .map_err(|e| EventError::invalid("transcription_failed", e.to_string()))
}

impl Transcriber {
    /// Queues the question `item_id` for transcription, to start [`GRACE`] from now at the
    /// earliest.
    pub fn enqueue(&mut self, item_id: String) {
        self.queue.push_back(Waiting {
            item_id,
            sent: String::new(),
            ready_at: Instant::now() + GRACE,
        });
    }

    /// Forgets the waiting questions and stops the running one (the session turned
    /// transcription off).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.running = None;
    }

    /// Forgets the question `item_id` (the client deleted it): it no longer waits, and a run
    /// of it stops (dropping the run raises its stop flag), so no event names a deleted item.
    pub fn forget(&mut self, item_id: &str) {
        self.queue.retain(|w| w.item_id != item_id);
        if self
            .running
            .as_ref()
            .is_some_and(|r| r.waiting.item_id == item_id)
        {
            self.running = None;
        }
    }

    /// Whether `item_id` waits for its transcription or has one running.
    #[cfg(test)]
    fn holds(&self, item_id: &str) -> bool {
        self.queue.iter().any(|w| w.item_id == item_id)
            || self
                .running
                .as_ref()
                .is_some_and(|r| r.waiting.item_id == item_id)
    }

    /// Whether a transcription runs now.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Starts the next waiting question still in `conv` (on a session of `entry` leased with
    /// `key`), if none runs; the events of one that cannot start (its `failed`).
    pub fn start_next(
        &mut self,
        conv: &Conversation,
        state: &Arc<AppState>,
        entry: &Entry,
        key: u64,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        while self.running.is_none() {
            if self
                .queue
                .front()
                .is_none_or(|w| w.ready_at > Instant::now())
            {
                break;
            }
            let Some(w) = self.queue.pop_front() else {
                break;
            };
            // A question deleted meanwhile is not transcribed.
            let Some(Body::User { wav, .. }) = conv.get(&w.item_id).map(|i| &i.body) else {
                continue;
            };
            match asr_job(state, entry, wav.clone()) {
                Ok(job) => self.running = Some(spawn(state, entry, key, job, w)),
                Err(e) => out.push(failed(&w.item_id, &e)),
            }
        }
        out
    }

    /// Stops the running transcription for a response about to start; it waits again, first
    /// in line. The task to wait for before leasing the response's session (it gives its
    /// session back when it ends).
    pub fn preempt(&mut self) -> Option<JoinHandle<()>> {
        let mut r = self.running.take()?;
        // (Dropping `r` raises its stop flag.)
        self.queue.push_front(r.waiting.clone());
        r.task.take()
    }

    /// The running transcription's next message (never, when none runs).
    pub async fn next(&mut self) -> Option<AsrMsg> {
        match self.running.as_mut() {
            Some(r) => r.rx.recv().await,
            None => std::future::pending().await,
        }
    }

    /// The running transcription's message `m`: its events.
    pub fn on_msg(&mut self, m: Option<AsrMsg>) -> Heard {
        let mut heard = Heard {
            events: Vec::new(),
            transcript: None,
        };
        let Some(r) = self.running.as_mut() else {
            return heard;
        };
        match m {
            Some(AsrMsg::Delta(t)) => {
                r.heard.push_str(&t);
                // why: a run after a preemption hears the same greedy text again; only what
                // goes past what was sent is new to the client.
                let sent = &mut r.waiting.sent;
                if r.heard.len() > sent.len() && r.heard.starts_with(sent.as_str()) {
                    let delta = r.heard[sent.len()..].to_owned();
                    *sent = r.heard.clone();
                    heard.events.push(event(
                        "conversation.item.input_audio_transcription.delta",
                        json!({"item_id": r.waiting.item_id, "content_index": 0,
                               "delta": delta}),
                    ));
                }
            }
            Some(AsrMsg::Done(res)) => {
                let id = r.waiting.item_id.clone();
                self.running = None;
                match res {
                    Ok((text, seconds)) => {
                        let text = text.trim().to_owned();
                        heard.events.push(event(
                            "conversation.item.input_audio_transcription.completed",
                            json!({"item_id": id, "content_index": 0, "transcript": text,
                                   "usage": {"type": "duration", "seconds": seconds}}),
                        ));
                        heard.transcript = Some((id, text));
                    }
                    Err(e) => heard.events.push(failed(&id, &e)),
                }
            }
            None => {
                let id = r.waiting.item_id.clone();
                self.running = None;
                let e = EventError {
                    kind: "server_error",
                    code: "transcription_failed",
                    message: "the transcription worker ended without a result".into(),
                    param: None,
                };
                heard.events.push(failed(&id, &e));
            }
        }
        heard
    }
}

/// Runs `job` on a session of `entry`'s pool leased with `key`, off the runtime's threads.
fn spawn(state: &Arc<AppState>, entry: &Entry, key: u64, job: Job, waiting: Waiting) -> Running {
    let (tx, rx) = mpsc::channel(64);
    let stop = Arc::new(AtomicBool::new(false));
    let (pool, timeout) = (entry.pool.clone(), state.busy_timeout(None));
    let (flag, server_stop) = (stop.clone(), state.stop.clone());
    let task = tokio::spawn(async move {
        // why the select: a socket gone (or a preempted run) while waiting takes no session.
        let lease = tokio::select! {
            l = pool.acquire(Some(key), timeout) => l,
            _ = tx.closed() => return,
        };
        let lease = match lease {
            Ok(l) => l,
            Err(e) => {
                let e = EventError {
                    kind: e.kind,
                    code: "transcription_failed",
                    message: e.message,
                    param: None,
                };
                let _ = tx.send(AsrMsg::Done(Err(e))).await;
                return;
            }
        };
        let shape = |m: Msg| match m {
            Msg::Event(ReplyEvent::Text(t)) => Some(AsrMsg::Delta(t)),
            Msg::Event(ReplyEvent::Audio(_)) => None,
            // A stopped run (preempted, or the server's hard stop) reports nothing.
            Msg::Done(Ok(f)) if f.outcome.cancelled => None,
            Msg::Done(Ok(f)) => Some(AsrMsg::Done(Ok((f.outcome.text, f.outcome.input_seconds)))),
            Msg::Done(Err(e)) => Some(AsrMsg::Done(Err(EventError {
                kind: "server_error",
                code: "transcription_failed",
                message: e.to_string(),
                param: None,
            }))),
        };
        // why on the model (work::start runs ASR there): a one-shot session leaves the leased
        // slot's conversation caches alone.
        let deliver = Deliver::new(tx.clone(), shape);
        if let Err(e) = work::start(lease, job, flag, Some(server_stop), deliver) {
            let e = EventError {
                kind: "server_error",
                code: "transcription_failed",
                message: format!("the transcription worker failed: {e}"),
                param: None,
            };
            let _ = tx.send(AsrMsg::Done(Err(e))).await;
        }
    });
    Running {
        waiting,
        heard: String::new(),
        stop,
        rx,
        task: Some(task),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_question_no_longer_waits() {
        let mut t = Transcriber::default();
        t.enqueue("item_a".into());
        t.enqueue("item_b".into());
        assert!(t.holds("item_a") && t.holds("item_b"));
        t.forget("item_a");
        assert!(!t.holds("item_a"));
        assert!(t.holds("item_b"));
        t.forget("item_unknown");
        assert!(t.holds("item_b"));
    }
}
