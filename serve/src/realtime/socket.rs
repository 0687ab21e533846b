//! The socket loop: client events in, server events out, and the running response's events
//! forwarded as they come. One socket is one conversation; its state lives here.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket};
use serde_json::{json, Map, Value};

use audio_engine::lfm2_audio::{Job, ReplyEvent, S2sOptions, S2sRequest};

use crate::audio_io::{b64, pcm16, unb64, unb64_len};
use crate::pool::fnv1a;
use crate::tasks::{max_tokens, record};
use crate::work::{Finished, Msg};
use crate::{AppState, Entry};

use super::conversation::{artifact_ms, Body, Conversation, Item};
use super::error::EventError;
use super::events::{event, part, with, Names};
use super::ids;
use super::input::{ms_of, pcm16_samples, wav_of, InputBuffer};
use super::response::{CancelReason, Response, RunMsg};
use super::session_config::{parse_max_tokens, SessionConfig};
use super::turns::{TurnEvent, Turns};

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
            names: Names { beta },
            session_id,
            config,
            state,
            entry,
        }
    }

    /// Serves the socket until the client closes it (or the server stops).
    pub async fn run(mut self, mut ws: WebSocket) {
        let hello = event("session.created", json!({"session": self.session_json()}));
        if send(&mut ws, vec![hello]).await.is_err() {
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut server_stop = false;
        loop {
            let out = tokio::select! {
                m = ws.recv() => match m {
                    Some(Ok(Message::Text(t))) => self.on_text(t.as_str()),
                    Some(Ok(Message::Binary(_))) => vec![EventError::invalid(
                        "invalid_event",
                        "binary messages are not events: send JSON text",
                    ).event(None)],
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                },
                m = next_run_msg(&mut self.response) => self.on_run_msg(m),
                _ = tick.tick() => {
                    if !self.state.stop.load(Ordering::Relaxed) {
                        continue;
                    }
                    // The server's shutdown deadline passed: stop the response, then close.
                    server_stop = true;
                    break;
                }
            };
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
        let _ = ws.send(Message::Close(None)).await;
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
            self.turns = Turns::new(c.turn_detection.as_ref(), c.input_rate, self.received_ms())?;
            self.speech = None;
        }
        if c.input_rate != self.config.input_rate {
            self.input
                .set_rate(c.input_rate, self.state.settings.max_audio_seconds);
        }
        self.config = c;
        Ok(vec![event(
            "session.updated",
            json!({"session": self.session_json()}),
        )])
    }

    fn append(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let audio = o.get("audio").and_then(Value::as_str).ok_or_else(|| {
            EventError::invalid("missing_audio", "append needs `audio`: base64 PCM16").at("audio")
        })?;
        // why before decoding: an oversized append is refused without allocating it.
        self.input.check_room(unb64_len(audio) / 2)?;
        let bytes = unb64(audio).ok_or_else(|| {
            EventError::invalid("invalid_base64", "`audio` is not valid base64").at("audio")
        })?;
        let samples = pcm16_samples(&bytes)?;
        self.input.append(&samples)?;
        let turns = self.turns.push(&samples);
        let mut out = Vec::new();
        for t in turns {
            out.extend(self.on_turn(t));
        }
        Ok(out)
    }

    /// A turn the VAD heard: speech started (barge-in) or stopped (commit, respond).
    /// A refusal of the response it would start is an `error` event after the turn's own
    /// events, which the client still gets.
    fn on_turn(&mut self, t: TurnEvent) -> Out {
        let Some(vad) = self.turns.settings().cloned() else {
            return Vec::new();
        };
        match t {
            TurnEvent::SpeechStarted { audio_start_ms } => {
                let item_id = ids::fresh("item");
                let out = vec![event(
                    "input_audio_buffer.speech_started",
                    json!({"audio_start_ms": audio_start_ms, "item_id": item_id}),
                )];
                self.speech = Some((item_id, audio_start_ms));
                if vad.interrupt_response {
                    // Barge-in: the reply stops at its next step and none of its audio still
                    // on the way to the client is sent.
                    if let Some(r) = self.response.as_mut() {
                        r.cancel(CancelReason::TurnDetected);
                    }
                }
                out
            }
            TurnEvent::SpeechStopped { audio_end_ms } => {
                let (item_id, start) = self
                    .speech
                    .take()
                    .unwrap_or_else(|| (ids::fresh("item"), audio_end_ms));
                let mut out = vec![event(
                    "input_audio_buffer.speech_stopped",
                    json!({"audio_end_ms": audio_end_ms, "item_id": item_id}),
                )];
                let samples = self.input.take_range(start, audio_end_ms);
                if ms_of(samples.len() as u64, self.input.rate()) < MIN_COMMIT_MS {
                    return out;
                }
                out.extend(self.commit_samples(item_id, &samples));
                if vad.create_response {
                    if self.response.is_some() {
                        // why: a barge-in cancelled it (or, without interrupt_response, it
                        // runs on); this turn is answered as soon as its response.done is out.
                        self.respond_after = Some(Instant::now());
                    } else {
                        match self.response_create(None, Some(Instant::now())) {
                            Ok(events) => out.extend(events),
                            Err(e) => out.push(e.event(None)),
                        }
                    }
                }
                out
            }
        }
    }

    fn commit(&mut self) -> Result<Out, EventError> {
        if self.input.ms() < MIN_COMMIT_MS {
            return Err(EventError::invalid(
                "input_audio_buffer_commit_empty",
                format!(
                    "buffer too small: expected at least {MIN_COMMIT_MS} ms of audio, have {} ms",
                    self.input.ms()
                ),
            ));
        }
        let item_id = self
            .speech
            .take()
            .map_or_else(|| ids::fresh("item"), |(id, _)| id);
        let samples = self.input.take_all();
        self.turns.reset(self.received_ms());
        Ok(self.commit_samples(item_id, &samples))
    }

    /// A question from `samples`: the `committed` event and its item's.
    fn commit_samples(&mut self, item_id: String, samples: &[i16]) -> Out {
        let rate = self.input.rate();
        let item = Item {
            id: item_id.clone(),
            body: Body::User {
                wav: wav_of(samples, rate),
                audio_ms: ms_of(samples.len() as u64, rate),
                committed: Instant::now(),
            },
        };
        let json = item.json();
        let prev = self.conv.push(item);
        let mut out = vec![event(
            "input_audio_buffer.committed",
            json!({"previous_item_id": prev, "item_id": item_id}),
        )];
        out.extend(self.names.item_events(&json, prev.as_deref(), true));
        out
    }

    /// Starts a response to the conversation's last question; `turn_end` is when its turn
    /// ended (`None`: when it was committed).
    fn response_create(
        &mut self,
        params: Option<&Value>,
        turn_end: Option<Instant>,
    ) -> Result<Out, EventError> {
        if let Some(r) = &self.response {
            return Err(EventError::invalid(
                "conversation_already_has_active_response",
                format!(
                    "response `{}` is still running: cancel it or wait for response.done",
                    r.id
                ),
            ));
        }
        let params = params.and_then(Value::as_object);
        let mut limit = self.config.max_output_tokens;
        let mut instructions = self.config.instructions.clone();
        if let Some(p) = params {
            if let Some(v) = p.get("max_output_tokens") {
                limit = parse_max_tokens(v, "response.max_output_tokens")?;
            }
            match p.get("instructions") {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => {
                    audio_engine::lfm2_audio::limits::check_system_prompt(s).map_err(|e| {
                        EventError::invalid("invalid_value", e.to_string())
                            .at("response.instructions")
                    })?;
                    instructions = Some(s.clone());
                }
                Some(other) => {
                    return Err(EventError::invalid(
                        "invalid_value",
                        format!("instructions must be a string, not {other}"),
                    )
                    .at("response.instructions"))
                }
            }
        }
        let (question, history) = self.conv.request()?;
        let committed = match self
            .conv
            .last_id()
            .and_then(|id| self.conv.get(&id).cloned())
        {
            Some(Item {
                body: Body::User { committed, .. },
                ..
            }) => committed,
            _ => Instant::now(),
        };
        let d = S2sOptions::default();
        let s2s = S2sOptions {
            max_new_tokens: max_tokens(limit, d.max_new_tokens, self.state.settings.max_tokens)
                .map_err(|e| {
                    EventError::invalid("invalid_value", e.message).at("max_output_tokens")
                })?,
            system_prompt: instructions.unwrap_or(d.system_prompt.clone()),
            ..d
        };
        let job = Job::S2s(S2sRequest {
            question: question.into(),
            history,
            return_codes: true,
            s2s,
        });
        let (id, item_id) = (ids::fresh("resp"), ids::fresh("item"));
        let item = Item {
            id: item_id.clone(),
            body: Body::Assistant {
                artifact: None,
                transcript: Vec::new(),
                status: "in_progress",
            },
        };
        let item_json = item.json();
        let prev = self.conv.push(item);
        self.response = Some(Response::start(
            &self.state,
            &self.entry,
            self.key,
            job,
            id.clone(),
            item_id.clone(),
            turn_end.unwrap_or(committed),
        ));
        let response = json!({
            "id": id, "object": "realtime.response", "status": "in_progress",
            "status_details": null, "output": [], "conversation_id": self.session_id,
            "output_modalities": ["audio"], "max_output_tokens": limit,
            "audio": {"output": {"format": {"type": "audio/pcm", "rate": 24_000},
                                 "voice": self.config.voice}},
            "usage": null,
        });
        let mut out = vec![
            event("response.created", json!({"response": response})),
            event(
                "response.output_item.added",
                json!({"response_id": id, "output_index": 0, "item": item_json}),
            ),
        ];
        out.extend(self.names.item_events(&item_json, prev.as_deref(), false));
        out.push(event(
            "response.content_part.added",
            with(
                part(&id, &item_id),
                json!({"part": {"type": "audio", "transcript": ""}}),
            ),
        ));
        Ok(out)
    }

    fn response_cancel(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let Some(r) = self.response.as_mut() else {
            return Err(EventError::invalid(
                "response_cancel_not_active",
                "there is no active response to cancel",
            ));
        };
        if let Some(want) = o.get("response_id").and_then(Value::as_str) {
            if want != r.id {
                return Err(EventError::invalid(
                    "response_not_found",
                    format!("response `{want}` is not the active one (`{}`)", r.id),
                )
                .at("response_id"));
            }
        }
        r.cancel(CancelReason::Client);
        // The `response.done` (status `cancelled`) follows when the engine has stopped.
        Ok(Vec::new())
    }

    fn item_create(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let bad = |m: &str| EventError::invalid("unsupported_item", m.to_owned()).at("item");
        let item = o
            .get("item")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("conversation.item.create needs an `item` object"))?;
        if item.get("type").and_then(Value::as_str) != Some("message")
            || item.get("role").and_then(Value::as_str) != Some("user")
        {
            return Err(bad(
                "only user messages with one input_audio part can be added (a question)",
            ));
        }
        let parts = item.get("content").and_then(Value::as_array);
        let audio = match parts.map(Vec::as_slice) {
            Some([p]) if p.get("type").and_then(Value::as_str) == Some("input_audio") => p
                .get("audio")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("the input_audio part needs `audio`: base64 PCM16"))?,
            _ => {
                return Err(bad(
                    "a user message here has one content part of type input_audio",
                ))
            }
        };
        let rate = self.input.rate();
        let max = (self.state.settings.max_audio_seconds * f64::from(rate)) as usize;
        if unb64_len(audio) / 2 > max {
            return Err(EventError::invalid(
                "audio_too_long",
                format!(
                    "the question is longer than this server's limit of {} s",
                    self.state.settings.max_audio_seconds
                ),
            )
            .at("item.content"));
        }
        let bytes = unb64(audio).ok_or_else(|| {
            EventError::invalid("invalid_base64", "`audio` is not valid base64").at("item.content")
        })?;
        let samples = pcm16_samples(&bytes)?;
        if ms_of(samples.len() as u64, rate) < MIN_COMMIT_MS {
            return Err(EventError::invalid(
                "audio_too_short",
                format!("a question needs at least {MIN_COMMIT_MS} ms of audio"),
            )
            .at("item.content"));
        }
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 64)
            .map_or_else(|| ids::fresh("item"), str::to_owned);
        if self.conv.get(&id).is_some() {
            return Err(EventError::invalid(
                "duplicate_item_id",
                format!("item `{id}` exists already"),
            )
            .at("item.id"));
        }
        let it = Item {
            id,
            body: Body::User {
                wav: wav_of(&samples, rate),
                audio_ms: ms_of(samples.len() as u64, rate),
                committed: Instant::now(),
            },
        };
        let json = it.json();
        let prev = self.conv.push(it);
        Ok(self.names.item_events(&json, prev.as_deref(), true))
    }

    /// The item id an event names, refused while the running response writes that item.
    fn idle_item<'a>(&self, o: &'a Map<String, Value>) -> Result<&'a str, EventError> {
        let id = o.get("item_id").and_then(Value::as_str).ok_or_else(|| {
            EventError::invalid("missing_item_id", "the event needs `item_id`").at("item_id")
        })?;
        if self.response.as_ref().is_some_and(|r| r.item_id == id) {
            return Err(EventError::invalid(
                "item_in_progress",
                format!("item `{id}` is being generated: cancel the response first"),
            )
            .at("item_id"));
        }
        Ok(id)
    }

    fn item_truncate(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let id = self.idle_item(o)?.to_owned();
        let int = |k: &str| {
            o.get(k).and_then(Value::as_u64).ok_or_else(|| {
                EventError::invalid("invalid_value", format!("`{k}` must be an integer >= 0")).at(k)
            })
        };
        let (content_index, audio_end_ms) = (int("content_index")?, int("audio_end_ms")?);
        let fmt = self.entry.pool.model().reply_format();
        self.conv.truncate(&id, content_index, audio_end_ms, &fmt)?;
        Ok(vec![event(
            "conversation.item.truncated",
            json!({"item_id": id, "content_index": content_index, "audio_end_ms": audio_end_ms}),
        )])
    }

    fn item_delete(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let id = self.idle_item(o)?.to_owned();
        self.conv.delete(&id)?;
        Ok(vec![event(
            "conversation.item.deleted",
            json!({"item_id": id}),
        )])
    }

    /// The running response's message.
    fn on_run_msg(&mut self, m: Option<RunMsg>) -> Out {
        let Some(r) = self.response.as_mut() else {
            return Vec::new();
        };
        match m {
            Some(RunMsg::Work(Msg::Event(ev))) => {
                if r.cancelled.is_some() {
                    return Vec::new();
                }
                let at = part(&r.id, &r.item_id);
                match ev {
                    ReplyEvent::Text(t) => {
                        if let Some(Item {
                            body: Body::Assistant { transcript, .. },
                            ..
                        }) = self.conv.get_mut(&r.item_id)
                        {
                            transcript.push(t.clone());
                        }
                        vec![event(
                            self.names.transcript_delta(),
                            with(at, json!({"delta": t})),
                        )]
                    }
                    ReplyEvent::Audio(s) => {
                        if r.first_audio.is_none() {
                            r.first_audio = Some(r.turn_end.elapsed());
                            self.state
                                .metrics
                                .time_to_first_audio
                                .observe(r.created.elapsed().as_secs_f64());
                        }
                        r.audio_sent += s.len();
                        vec![event(
                            self.names.audio_delta(),
                            with(at, json!({"delta": b64(&pcm16(&s))})),
                        )]
                    }
                }
            }
            Some(RunMsg::Work(Msg::Done(Ok(f)))) => self.finish(f),
            Some(RunMsg::Work(Msg::Done(Err(e)))) => {
                let e = crate::error::ApiError::from(e);
                self.fail(e.kind, e.message)
            }
            Some(RunMsg::Refused(e)) => self.fail(e.kind, e.message),
            None => self.fail(
                "server_error",
                "the engine worker ended without a result".into(),
            ),
        }
    }

    /// The response ended: its item takes the reply artifact (cut to the audio sent when it
    /// was cancelled) and the closing events go out.
    fn finish(&mut self, f: Finished) -> Out {
        let Some(r) = self.response.take() else {
            return Vec::new();
        };
        record(&self.state, &f);
        let fmt = self.entry.pool.model().reply_format();
        let status = match (r.cancelled, f.ended) {
            (Some(_), _) => "cancelled",
            (None, true) => "completed",
            (None, false) => "incomplete",
        };
        if let Some(Item {
            body:
                Body::Assistant {
                    artifact,
                    status: item_status,
                    ..
                },
            ..
        }) = self.conv.get_mut(&r.item_id)
        {
            *artifact = f.artifact.clone();
            *item_status = if status == "completed" {
                "completed"
            } else {
                "incomplete"
            };
        }
        if r.cancelled.is_some() {
            if let Some(art) = &f.artifact {
                // why: after a cancel the history keeps what the client was sent, not the
                // steps generated after the audio it got.
                let sent_ms = (r.audio_sent as u64 * 1000) / 24_000;
                let cut = sent_ms.min(artifact_ms(art, &fmt));
                let _ = self.conv.truncate(&r.item_id, 0, cut, &fmt);
            }
        }
        let item = self
            .conv
            .get(&r.item_id)
            .map(Item::json)
            .unwrap_or(Value::Null);
        let transcript = item["content"][0]["transcript"].clone();
        let at = part(&r.id, &r.item_id);
        let reason = match (r.cancelled, status) {
            (Some(c), _) => json!({"type": "cancelled", "reason": c.name()}),
            (None, "incomplete") => json!({"type": "incomplete", "reason": "max_output_tokens"}),
            _ => Value::Null,
        };
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let response = json!({
            "id": r.id, "object": "realtime.response", "status": status,
            "status_details": reason, "output": [item], "conversation_id": self.session_id,
            "output_modalities": ["audio"],
            "usage": {
                "total_tokens": f.prompt_positions + f.steps,
                "input_tokens": f.prompt_positions,
                "output_tokens": f.steps,
                "input_token_details": {"cached_tokens": f.resumed_prefill_positions},
            },
            "lfm2_audio": {
                "resumed_prefill_positions": f.resumed_prefill_positions,
                "reused_questions": f.reused_questions,
                "prompt_positions": f.prompt_positions,
                "steps": f.steps,
                "ended": f.ended,
                "audio_ms": r.audio_sent as f64 / 24.0,
                "session_slot": f.slot,
                "affinity": f.affine,
                "latency_ms": r.first_audio.map(ms),
                "engine_ms": ms(f.engine_time),
                "wall_ms": ms(r.created.elapsed()),
            },
        });
        let mut out = vec![
            event(self.names.audio_done(), at.clone()),
            event(
                self.names.transcript_done(),
                with(at.clone(), json!({"transcript": transcript})),
            ),
            event(
                "response.content_part.done",
                with(
                    at,
                    json!({"part": {"type": "audio", "transcript": transcript}}),
                ),
            ),
            event(
                "response.output_item.done",
                json!({"response_id": r.id, "output_index": 0, "item": item}),
            ),
        ];
        if !self.names.beta {
            out.push(event("conversation.item.done", json!({"item": item})));
        }
        out.push(event("response.done", json!({"response": response})));
        out.extend(self.answer_pending());
        out
    }

    /// Starts the response a VAD turn waits for, if one does.
    fn answer_pending(&mut self) -> Out {
        let Some(turn_end) = self.respond_after.take() else {
            return Vec::new();
        };
        match self.response_create(None, Some(turn_end)) {
            Ok(out) => out,
            Err(e) => vec![e.event(None)],
        }
    }

    /// The response failed: its item is dropped, an `error` and a failed `response.done` go
    /// out.
    fn fail(&mut self, kind: &'static str, message: String) -> Out {
        let Some(r) = self.response.take() else {
            return Vec::new();
        };
        let _ = self.conv.delete(&r.item_id);
        // A turn waiting for this response is left for the client to answer with
        // response.create (its question stays in the conversation).
        self.respond_after = None;
        let e = EventError {
            kind,
            code: "response_failed",
            message: message.clone(),
            param: None,
        };
        vec![
            e.event(None),
            event(
                "response.done",
                json!({"response": {
                    "id": r.id, "object": "realtime.response", "status": "failed",
                    "status_details": {"type": "failed", "error": {"type": kind, "code": "response_failed", "message": message}},
                    "output": [], "conversation_id": self.session_id,
                }}),
            ),
        ]
    }
}

/// The running response's next message (never, when none runs).
async fn next_run_msg(r: &mut Option<Response>) -> Option<RunMsg> {
    match r {
        Some(r) => r.rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Sends `events` in order.
async fn send(ws: &mut WebSocket, events: Out) -> Result<(), axum::Error> {
    for e in events {
        ws.send(Message::Text(e.to_string().into())).await?;
    }
    Ok(())
}
