//! Responses: starting one on the conversation's last question, cancelling it, and its engine
//! events turned into the API's response events.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use audio_engine::lfm2_audio::conversation::Artifact;
use audio_engine::lfm2_audio::{Job, ReplyEvent, S2sOptions, S2sRequest};

use crate::audio_io::{b64, pcm16};
use crate::tasks::{max_tokens, record};
use crate::work::{Finished, Msg};

use super::super::conversation::{artifact_ms, Body, Item};
use super::super::error::EventError;
use super::super::events::{event, part, with};
use super::super::ids;
use super::super::response::{CancelReason, Response, RunMsg, Seat};
use super::super::session_config::parse_max_tokens;
use super::{Out, Socket};

/// A response's settings: its `max_output_tokens` and the engine's options.
pub(super) struct ResponseParams {
    limit: Option<usize>,
    pub(super) s2s: S2sOptions,
}

/// The engine's request for the turn on `question` (WAV bytes) after `history`.
pub(super) fn turn_request(
    question: Vec<u8>,
    history: Vec<Artifact>,
    s2s: S2sOptions,
) -> S2sRequest {
    S2sRequest {
        question: question.into(),
        history,
        return_codes: true,
        s2s,
    }
}

impl Socket {
    /// A response's settings: `params` (a `response.create`'s `response`) over the session's.
    pub(super) fn response_params(
        &self,
        params: Option<&Map<String, Value>>,
    ) -> Result<ResponseParams, EventError> {
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
        let d = S2sOptions::default();
        let s2s = S2sOptions {
            max_new_tokens: max_tokens(limit, d.max_new_tokens, self.state.settings.max_tokens)
                .map_err(|e| {
                    EventError::invalid("invalid_value", e.message).at("max_output_tokens")
                })?,
            system_prompt: instructions.unwrap_or(d.system_prompt.clone()),
            ..d
        };
        Ok(ResponseParams { limit, s2s })
    }

    /// Starts a response to the conversation's last question; `turn_end` is when its turn
    /// ended (`None`: when it was committed).
    pub(super) fn response_create(
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
        let params = self.response_params(params.and_then(Value::as_object))?;
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
        let limit = params.limit;
        let job = Job::S2s(turn_request(question, history, params.s2s));
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
            Seat {
                key: self.key,
                early: self.early.take(),
            },
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

    pub(super) fn response_cancel(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
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

    /// The running response's message.
    pub(super) fn on_run_msg(&mut self, m: Option<RunMsg>) -> Out {
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
    pub(super) fn finish(&mut self, f: Finished) -> Out {
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
                let _ = self
                    .conv
                    .truncate(&r.item_id, 0, cut, self.entry.pool.model());
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
        if let Some((content_index, audio_end_ms)) = r.truncate_at_end {
            let model = self.entry.pool.model();
            out.push(
                match self
                    .conv
                    .truncate(&r.item_id, content_index, audio_end_ms, model)
                {
                    Ok(()) => event(
                        "conversation.item.truncated",
                        json!({"item_id": r.item_id, "content_index": content_index,
                               "audio_end_ms": audio_end_ms}),
                    ),
                    Err(e) => e.event(None),
                },
            );
        }
        out.extend(self.answer_pending());
        out
    }

    /// Starts the response a VAD turn waits for, if one does.
    pub(super) fn answer_pending(&mut self) -> Out {
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
    pub(super) fn fail(&mut self, kind: &'static str, message: String) -> Out {
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
pub(super) async fn next_run_msg(r: &mut Option<Response>) -> Option<RunMsg> {
    match r {
        Some(r) => r.rx.recv().await,
        None => std::future::pending().await,
    }
}
