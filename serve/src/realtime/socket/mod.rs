//! The socket loop: client events in, server events out, and the running response's events
//! forwarded as they come. One socket is one conversation; its state lives here. The handlers
//! are grouped by what they touch: `audio` (the input buffer, VAD turns, commits),
//! `items` (conversation items), `replies` (responses and their events).

mod audio;
mod items;
mod replies;

use replies::next_run_msg;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket};
use serde_json::{json, Map, Value};

use crate::edges::socket_close::server_close;
use crate::pool::fnv1a;
use crate::{AppState, Entry};

use super::conversation::{Body, Conversation};
use super::error::EventError;
use super::events::{event, Names};
use super::ids;
use super::input::{ms_of, InputBuffer};
use super::response::Response;
use super::session_config::SessionConfig;
use super::transcription::{AsrMsg, Transcriber};
use super::turns::Turns;

/// The shortest question a commit takes, ms (the API's own floor).
pub const MIN_COMMIT_MS: u64 = 100;

/// One socket's conversation and settings.
pub struct Socket {
    state: Arc<AppState>,
    entry: Entry,
    names: Names,
    session_id: String,
    /// The pool's affinity key of this conversation.
    key: u64,
    config: SessionConfig,
    input: InputBuffer,
    turns: Turns,
    conv: Conversation,
    response: Option<Response>,
    /// The item id and start of the speech the VAD is hearing.
    speech: Option<(String, u64)>,
    /// A turn the VAD committed while a cancelled response was still stopping: when it ended,
    /// answered as soon as that one is done.
    respond_after: Option<Instant>,
    /// The turn started early at the speaker's last pause (`--early-turn-ms`): the task that
    /// encodes it on a leased session, which the next response waits for so that it finds that
    /// session free.
    early: Option<tokio::task::JoinHandle<()>>,
    /// Input transcription: the questions waiting and the one running (only while no response
    /// generates: see [`super::transcription`]).
    transcriber: Transcriber,
}

/// The server events that handling one event gave, in order.
type Out = Vec<Value>;

impl Socket {
    /// A socket's state on `entry`, with the beta names when `beta`.
    pub fn new(state: Arc<AppState>, entry: Entry, beta: bool) -> Socket {
        let session_id = ids::fresh("sess");
        let config = SessionConfig::default();
        let max = state.settings.max_audio_seconds;
        Socket {
            key: fnv1a(session_id.as_bytes()),
            input: InputBuffer::new(config.input_rate, max),
            turns: Turns::default(),
            conv: Conversation::default(),
            response: None,
            speech: None,
            respond_after: None,
            early: None,
            transcriber: Transcriber::default(),
            names: Names { beta },
            session_id,
            config,
            state,
            entry,
        }
    }

    /// The conversation's id (`sess_...`), the `conversation_id` of its log lines.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The model id the socket serves.
    pub fn model_id(&self) -> &str {
        &self.entry.cfg.id
    }

    /// Serves the socket until the client closes it (or the server stops, drains, or finds it
    /// idle: [`crate::edges::socket_close`]).
    pub async fn run(mut self, mut ws: WebSocket) {
        let hello = event("session.created", json!({"session": self.session_json()}));
        if send(&mut ws, vec![hello]).await.is_err() {
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut server_stop = false;
        let mut last_active = Instant::now();
        let mut close = None;
        loop {
            let out = tokio::select! {
                m = ws.recv() => match m {
                    Some(Ok(Message::Text(t))) => {
                        last_active = Instant::now();
                        self.on_text(t.as_str())
                    }
                    Some(Ok(Message::Binary(_))) => vec![EventError::invalid(
                        "invalid_event",
                        "binary messages are not events: send JSON text",
                    ).event(None)],
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                },
                m = next_run_msg(&mut self.response) => self.on_run_msg(m),
                a = self.turns.next_answer() => self.on_answer(a),
                m = self.transcriber.next() => self.on_transcription(m),
                _ = tick.tick() => {
                    // why `is_finished`: a finished early turn's handle stays until a response
                    // takes it, and must not hold the socket open. A running transcription
                    // counts: its transcript must not be cut by an idle or drain close.
                    let busy = self.response.is_some()
                        || self.early.as_ref().is_some_and(|h| !h.is_finished())
                        || self.respond_after.is_some()
                        || self.transcriber.is_running();
                    if busy {
                        last_active = Instant::now();
                    }
                    if self.state.stop.load(Ordering::Relaxed) {
                        // The server's shutdown deadline passed: stop the response, then close.
                        server_stop = true;
                        break;
                    }
                    close = server_close(&self.state, last_active.elapsed(), busy);
                    if close.is_some() {
                        break;
                    }
                    // why no event: the tick also lets a waiting transcription start below.
                    Vec::new()
                }
            };
            let mut out = out;
            out.extend(self.start_transcription());
            if send(&mut ws, out).await.is_err() {
                break;
            }
        }
        // Dropping the response stops its generation and frees its session.
        if self.response.take().is_some() && !server_stop {
            self.state
                .metrics
                .disconnects
                .fetch_add(1, Ordering::Relaxed);
        }
        if let Some(c) = close {
            tracing::info!(reason = ?c, "closing the socket");
        }
        let _ = ws.send(Message::Close(close.map(|c| c.frame()))).await;
        crate::edges::socket_close::await_close_reply(&mut ws).await;
    }

    /// Starts the next waiting transcription when nothing else generates: no response runs or
    /// waits to start, and no early turn holds a session.
    fn start_transcription(&mut self) -> Out {
        let busy = self.response.is_some()
            || self.respond_after.is_some()
            || self.early.as_ref().is_some_and(|h| !h.is_finished());
        if busy || self.transcriber.is_running() {
            return Vec::new();
        }
        self.transcriber
            .start_next(&self.conv, &self.state, &self.entry, self.key)
    }

    /// The running transcription's message: its events; a completed transcript goes on its
    /// item.
    fn on_transcription(&mut self, m: Option<AsrMsg>) -> Out {
        let heard = self.transcriber.on_msg(m);
        if let Some((id, text)) = heard.transcript {
            if let Some(Body::User { transcript, .. }) = self.conv.get_mut(&id).map(|i| &mut i.body)
            {
                *transcript = Some(text);
            }
        }
        heard.events
    }

    /// Milliseconds of audio the socket received (the VAD's timeline).
    fn received_ms(&self) -> u64 {
        ms_of(self.input.received(), self.input.rate())
    }

    fn session_json(&self) -> Value {
        self.config
            .json(&self.session_id, &self.entry.cfg.id, self.names.beta)
    }

    /// One client event: its answer, or an `error` event.
    fn on_text(&mut self, text: &str) -> Out {
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                return vec![EventError::invalid(
                    "invalid_json",
                    format!("the message is not JSON: {e}"),
                )
                .event(None)]
            }
        };
        let Some(o) = v.as_object() else {
            return vec![
                EventError::invalid("invalid_event", "an event is a JSON object").event(None),
            ];
        };
        let event_id = o.get("event_id").and_then(Value::as_str).map(str::to_owned);
        let kind = o.get("type").and_then(Value::as_str).unwrap_or("");
        match self.on_event(kind, o) {
            Ok(out) => out,
            Err(e) => vec![e.event(event_id.as_deref())],
        }
    }

    fn on_event(&mut self, kind: &str, o: &Map<String, Value>) -> Result<Out, EventError> {
        match kind {
            "session.update" => self.session_update(o),
            "input_audio_buffer.append" => self.append(o),
            "input_audio_buffer.commit" => self.commit(),
            "input_audio_buffer.clear" => {
                self.input.clear();
                self.turns.reset(self.received_ms());
                self.speech = None;
                Ok(vec![event("input_audio_buffer.cleared", json!({}))])
            }
            "response.create" => self.response_create(o.get("response"), None),
            "response.cancel" => self.response_cancel(o),
            "conversation.item.create" => self.item_create(o),
            "conversation.item.truncate" => self.item_truncate(o),
            "conversation.item.delete" => self.item_delete(o),
            "conversation.item.retrieve" => {
                let id = o.get("item_id").and_then(Value::as_str).unwrap_or("");
                let item = self.conv.get(id).ok_or_else(|| {
                    EventError::invalid(
                        "item_not_found",
                        format!("no conversation item has the id `{id}`"),
                    )
                    .at("item_id")
                })?;
                Ok(vec![event(
                    "conversation.item.retrieved",
                    json!({"item": item.json()}),
                )])
            }
            "" => Err(EventError::invalid("missing_type", "the event has no `type`").at("type")),
            other => Err(EventError::invalid(
                "unknown_event",
                format!("unknown or unsupported event type `{other}`"),
            )
            .at("type")),
        }
    }

    fn session_update(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let s = o.get("session").and_then(Value::as_object).ok_or_else(|| {
            EventError::invalid("missing_session", "session.update needs a `session` object")
                .at("session")
        })?;
        let c = self.config.updated(s)?;
        if c.input_rate != self.config.input_rate && !self.input.is_empty() {
            return Err(EventError::invalid(
                "input_audio_buffer_not_empty",
                "the input format cannot change while the buffer holds audio: commit or clear it first",
            )
            .at("session.audio.input.format"));
        }
        if c.turn_detection != self.config.turn_detection || c.input_rate != self.config.input_rate
        {
            self.turns = Turns::new(
                c.turn_detection.as_ref(),
                c.input_rate,
                self.received_ms(),
                self.state.settings.early_turn_ms,
                self.state.end_of_turn.as_ref(),
            )?;
            self.speech = None;
        }
        if c.input_rate != self.config.input_rate {
            self.input
                .set_rate(c.input_rate, self.state.settings.max_audio_seconds);
        }
        if c.transcription.is_none() {
            self.transcriber.clear();
        }
        self.config = c;
        Ok(vec![event(
            "session.updated",
            json!({"session": self.session_json()}),
        )])
    }
}

/// Sends `events` in order.
async fn send(ws: &mut WebSocket, events: Out) -> Result<(), axum::Error> {
    for e in events {
        ws.send(Message::Text(e.to_string().into())).await?;
    }
    Ok(())
}
