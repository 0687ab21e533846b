//! Responses: starting one on the conversation's last question, cancelling it, and its engine
//! events turned into the API's response events.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use audio_engine::lfm2_audio::conversation::Artifact;
use audio_engine::lfm2_audio::tools::{lists_tools, tool_system_prompt, ReplyPiece};
use audio_engine::lfm2_audio::{AudioInput, Job, ReplyEvent, S2sOptions, S2sRequest};

use crate::audio_io::{b64, pcm16};
use crate::tasks::{max_tokens, record};
use crate::work::{Finished, Msg};

use super::super::conversation::{artifact_ms, request_of, Body, Conversation, Item, Place};
use super::super::error::EventError;
use super::super::events::{event, part, with, Names};
use super::super::ids;
use super::super::response::{CancelReason, Response, RunMsg, Seat, Shape};
use super::super::session_config::{
    check_unused, parse_format, parse_max_tokens, parse_metadata, parse_modalities,
    parse_tool_choice, parse_tools, parse_voice, prompt_tools, Modality, OUTPUT_RATE,
};
use super::{Out, Socket};

/// A response's settings: the engine's options, what shapes its events (its
/// `max_output_tokens` among them) and, when the request gave `input`, the items it answers
/// instead of the conversation.
pub(super) struct ResponseParams {
    pub(super) s2s: S2sOptions,
    shape: Shape,
    input: Option<Vec<Item>>,
}

/// The engine's request for the turn on `question` (WAV bytes; no audio for a typed question,
/// which then ends `history`) after `history`.
pub(super) fn turn_request(
    question: impl Into<AudioInput>,
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

/// `response.create`'s `audio` object: its output format (checked) and voice.
fn response_audio(v: &Value, voice: &mut Value) -> Result<(), EventError> {
    let bad = |p: &str, m: String| EventError::invalid("invalid_value", m).at(p);
    let audio = match v {
        Value::Null => return Ok(()),
        Value::Object(o) => o,
        other => {
            return Err(bad(
                "response.audio",
                format!("audio must be an object, not {other}"),
            ))
        }
    };
    let output = match audio.get("output") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(o)) => o,
        Some(other) => {
            return Err(bad(
                "response.audio.output",
                format!("audio.output must be an object, not {other}"),
            ))
        }
    };
    if let Some(f) = output.get("format").filter(|f| !f.is_null()) {
        parse_format(f, "response.audio.output.format", &[OUTPUT_RATE])?;
    }
    if let Some(v) = output.get("voice").filter(|v| !v.is_null()) {
        *voice = parse_voice(v, "response.audio.output.voice")?;
    }
    Ok(())
}

impl Socket {
    /// A response's settings: `params` (a `response.create`'s `response`) over the session's.
    pub(super) fn response_params(
        &self,
        params: Option<&Map<String, Value>>,
    ) -> Result<ResponseParams, EventError> {
        let mut limit = self.config.max_output_tokens;
        let mut instructions = self.config.instructions.clone();
        let mut shape = Shape {
            output: self.config.output,
            in_conversation: true,
            metadata: Value::Null,
            voice: self.config.voice.clone(),
            max_output_tokens: None,
            calls: false,
        };
        let mut input = None;
        let (mut tools, mut tool_choice) =
            (self.config.tools.clone(), self.config.tool_choice.clone());
        if let Some(p) = params {
            for key in ["max_output_tokens", "max_response_output_tokens"] {
                if let Some(v) = p.get(key) {
                    limit = parse_max_tokens(v, &format!("response.{key}"))?;
                }
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
            for key in ["output_modalities", "modalities"] {
                if let Some(v) = p.get(key).filter(|v| !v.is_null()) {
                    shape.output = parse_modalities(v, &format!("response.{key}"))?;
                }
            }
            if let Some(v) = p.get("metadata") {
                shape.metadata = parse_metadata(v, "response.metadata")?;
            }
            match p.get("conversation") {
                None | Some(Value::Null) => {}
                Some(Value::String(c)) if c == "auto" => {}
                Some(Value::String(c)) if c == "none" => shape.in_conversation = false,
                Some(other) => {
                    return Err(EventError::invalid(
                        "invalid_value",
                        format!("conversation is \"auto\" or \"none\", not {other}"),
                    )
                    .at("response.conversation"))
                }
            }
            if let Some(v) = p.get("audio") {
                response_audio(v, &mut shape.voice)?;
            }
            if let Some(v) = p.get("voice").filter(|v| !v.is_null()) {
                shape.voice = parse_voice(v, "response.voice")?;
            }
            if let Some(f) = p.get("output_audio_format").filter(|f| !f.is_null()) {
                parse_format(f, "response.output_audio_format", &[OUTPUT_RATE])?;
            }
            if let Some(v) = p.get("tools") {
                tools = parse_tools(v, "response.tools")?;
            }
            if let Some(v) = p.get("tool_choice") {
                tool_choice = parse_tool_choice(v, "response.tool_choice")?;
            }
            check_unused(p, "response")?;
            if let Some(v) = p.get("input").filter(|v| !v.is_null()) {
                input = Some(self.input_items(v, "response.input")?);
            }
        }
        shape.max_output_tokens = limit;
        let d = S2sOptions::default();
        let instructions = instructions.unwrap_or(d.system_prompt.clone());
        let system_prompt = tool_system_prompt(&instructions, &prompt_tools(&tools, &tool_choice));
        audio_engine::lfm2_audio::limits::check_system_prompt(&system_prompt).map_err(|e| {
            EventError::invalid(
                "invalid_value",
                format!("the instructions with the tools: {e}"),
            )
            .at("tools")
        })?;
        shape.calls = lists_tools(&system_prompt);
        let s2s = S2sOptions {
            max_new_tokens: max_tokens(limit, d.max_new_tokens, self.state.settings.max_tokens)
                .map_err(|e| {
                    EventError::invalid("invalid_value", e.message).at("max_output_tokens")
                })?,
            system_prompt,
            ..d
        };
        Ok(ResponseParams { s2s, shape, input })
    }

    /// The response object of `response.created` / `response.done` of the response `id`
    /// asked for as `shape`.
    fn response_json(
        &self,
        id: &str,
        shape: &Shape,
        status: &str,
        status_details: Value,
        output: Vec<Value>,
        usage: Value,
    ) -> Value {
        let max: Value = match shape.max_output_tokens {
            Some(n) => json!(n),
            None => json!("inf"),
        };
        json!({
            "id": id, "object": "realtime.response", "status": status,
            "status_details": status_details, "output": output,
            "conversation_id": if shape.in_conversation { json!(self.session_id) } else { Value::Null },
            "output_modalities": shape.output.json(),
            "max_output_tokens": max,
            "metadata": shape.metadata,
            "audio": {"output": {"format": {"type": "audio/pcm", "rate": OUTPUT_RATE},
                                 "voice": shape.voice}},
            "usage": usage,
        })
    }

    /// Starts a response to the conversation's last question (or to the request's `input`);
    /// `turn_end` is when its turn ended (`None`: when it was committed).
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
        let params = match params {
            None | Some(Value::Null) => self.response_params(None)?,
            Some(Value::Object(p)) => self.response_params(Some(p))?,
            Some(other) => {
                return Err(EventError::invalid(
                    "invalid_value",
                    format!("response must be an object, not {other}"),
                )
                .at("response"))
            }
        };
        let items = params.input.as_deref();
        let (question, history) = match items {
            Some(items) => request_of(items)?,
            None => self.conv.request()?,
        };
        let last = match items {
            Some(items) => items.last().cloned(),
            None => self
                .conv
                .last_id()
                .and_then(|id| self.conv.get(&id).cloned()),
        };
        let committed = match last {
            Some(Item {
                body: Body::User { committed, .. },
                ..
            }) => committed,
            _ => Instant::now(),
        };
        let shape = params.shape;
        let job = Job::S2s(turn_request(question, history, params.s2s));
        let (id, item_id) = (ids::fresh("resp"), ids::fresh("item"));
        let item = Item {
            id: item_id.clone(),
            body: Body::Assistant {
                artifact: None,
                transcript: Vec::new(),
                status: "in_progress",
                modality: shape.output,
            },
        };
        let item_json = item.json();
        let (prev, detached) = if shape.in_conversation {
            (Some(self.conv.push(item)), None)
        } else {
            (None, Some(item))
        };
        // why: the response's audio must not share the CPU with a transcription; a stopped one
        // gives its session back within a token, and runs again after the response.
        let early = match (self.early.take(), self.transcriber.preempt()) {
            (Some(a), Some(b)) => Some(tokio::spawn(async move {
                let _ = a.await;
                let _ = b.await;
            })),
            (a, b) => a.or(b),
        };
        let mut response = Response::start(
            &self.state,
            &self.entry,
            Seat {
                key: self.key,
                early,
            },
            job,
            id.clone(),
            item_id.clone(),
            shape.clone(),
            turn_end.unwrap_or(committed),
        );
        response.detached = detached;
        self.response = Some(response);
        let created = self.response_json(
            &id,
            &shape,
            "in_progress",
            Value::Null,
            Vec::new(),
            Value::Null,
        );
        let mut out = vec![
            event("response.created", json!({"response": created})),
            event(
                "response.output_item.added",
                json!({"response_id": id, "output_index": 0, "item": item_json}),
            ),
        ];
        if let Some(prev) = prev {
            out.extend(self.names.item_events(&item_json, prev.as_deref(), false));
        }
        let part_json = match shape.output {
            Modality::Audio => json!({"type": "audio", "transcript": ""}),
            Modality::Text => json!({"type": "text", "text": ""}),
        };
        out.push(event(
            "response.content_part.added",
            with(part(&id, &item_id), json!({"part": part_json})),
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
                let text_only = r.shape.output == Modality::Text;
                match ev {
                    ReplyEvent::Text(t) => {
                        let pieces = match r.splitter.as_mut() {
                            Some(splitter) => splitter.push(&t),
                            None => vec![ReplyPiece::Text(t)],
                        };
                        reply_pieces(&mut self.conv, self.names, r, pieces)
                    }
                    // A text-only response's audio is generated (the model interleaves it
                    // with the text) and not sent.
                    ReplyEvent::Audio(_) if text_only => Vec::new(),
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
            Some(RunMsg::Work(Msg::Done(Ok(f)))) => self.finish(*f),
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
        let Some(mut r) = self.response.take() else {
            return Vec::new();
        };
        record(&self.state, &f);
        // The text held back as a possible call marker, or an unclosed call block.
        let mut out = match r.splitter.as_mut().map(|s| s.finish()) {
            Some(rest) if r.cancelled.is_none() => {
                reply_pieces(&mut self.conv, self.names, &mut r, rest)
            }
            _ => Vec::new(),
        };
        let model = self.entry.pool.model();
        let fmt = model.reply_format();
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
        }) = reply_item(&mut self.conv, &mut r)
        {
            *artifact = f.artifact.clone();
            *item_status = if status == "completed" {
                "completed"
            } else {
                "incomplete"
            };
        }
        let text_only = r.shape.output == Modality::Text;
        if r.cancelled.is_some() && !text_only {
            if let Some(art) = &f.artifact {
                // why: after a cancel the history keeps what the client was sent, not the
                // steps generated after the audio it got.
                let sent_ms = (r.audio_sent as u64 * 1000) / 24_000;
                let cut = sent_ms.min(artifact_ms(art, &fmt));
                match r.detached.take() {
                    None => {
                        let _ = self.conv.truncate(&r.item_id, 0, cut, model);
                    }
                    Some(item) => {
                        // An out-of-band item is cut the same way, on a conversation of its
                        // own.
                        let mut own = Conversation::default();
                        own.push(item);
                        let _ = own.truncate(&r.item_id, 0, cut, model);
                        r.detached = own.delete(&r.item_id).ok();
                    }
                }
            }
        }
        let item = match &r.detached {
            Some(i) => i.json(),
            None => self
                .conv
                .get(&r.item_id)
                .map(Item::json)
                .unwrap_or(Value::Null),
        };
        let at = part(&r.id, &r.item_id);
        let reason = match (r.cancelled, status) {
            (Some(c), _) => json!({"type": "cancelled", "reason": c.name()}),
            (None, "incomplete") => json!({"type": "incomplete", "reason": "max_output_tokens"}),
            _ => Value::Null,
        };
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut output = vec![item.clone()];
        output.extend(r.calls.iter().map(Item::json));
        let mut response = self.response_json(
            &r.id,
            &r.shape,
            status,
            reason,
            output,
            json!({
                "total_tokens": f.prompt_positions + f.steps,
                "input_tokens": f.prompt_positions,
                "output_tokens": f.steps,
                "input_token_details": {"cached_tokens": f.resumed_prefill_positions},
            }),
        );
        response["lfm2_audio"] = json!({
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
        });
        out.extend(if text_only {
            let text = item["content"][0]["text"].clone();
            vec![
                event(
                    self.names.text_done(),
                    with(at.clone(), json!({"text": text})),
                ),
                event(
                    "response.content_part.done",
                    with(at, json!({"part": {"type": "text", "text": text}})),
                ),
            ]
        } else {
            let transcript = item["content"][0]["transcript"].clone();
            vec![
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
            ]
        });
        out.push(event(
            "response.output_item.done",
            json!({"response_id": r.id, "output_index": 0, "item": item}),
        ));
        if !self.names.beta && r.shape.in_conversation {
            out.push(event("conversation.item.done", json!({"item": item})));
        }
        out.push(event("response.done", json!({"response": response})));
        if let Some((content_index, audio_end_ms)) = r.truncate_at_end {
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
        if r.detached.is_none() {
            let _ = self.conv.delete(&r.item_id);
            for call in &r.calls {
                let _ = self.conv.delete(&call.id);
            }
        }
        // A turn waiting for this response is left for the client to answer with
        // response.create (its question stays in the conversation).
        self.respond_after = None;
        let e = EventError {
            kind,
            code: "response_failed",
            message: message.clone(),
            param: None,
        };
        let details = json!({"type": "failed",
            "error": {"type": kind, "code": "response_failed", "message": message}});
        let response =
            self.response_json(&r.id, &r.shape, "failed", details, Vec::new(), Value::Null);
        vec![
            e.event(None),
            event("response.done", json!({"response": response})),
        ]
    }
}

/// The events of a reply's text `pieces`: what it says as transcript (or text) deltas, and
/// each call it makes as a `function_call` output item (after its message, in call order;
/// in the conversation too unless the response is out of band).
fn reply_pieces(
    conv: &mut Conversation,
    names: Names,
    r: &mut Response,
    pieces: Vec<ReplyPiece>,
) -> Out {
    let mut out = Vec::new();
    for piece in pieces {
        let calls = match piece {
            ReplyPiece::Text(t) => {
                out.push(said(conv, names, r, t));
                continue;
            }
            ReplyPiece::Calls(Ok(calls)) => calls,
            ReplyPiece::Calls(Err(e)) => {
                // why as text: nothing the model wrote is lost, and a call it could not write
                // is no call.
                tracing::debug!("reply {}: {e}", r.id);
                out.push(said(conv, names, r, e.text));
                continue;
            }
        };
        for call in calls {
            let arguments = Value::Object(call.arguments).to_string();
            let item = Item {
                id: ids::fresh("item"),
                body: Body::FunctionCall {
                    call_id: ids::fresh("call"),
                    name: call.name,
                    arguments,
                    of_reply: true,
                },
            };
            out.extend(call_events(&r.id, 1 + r.calls.len(), &item));
            if r.detached.is_none() {
                let after = r.calls.last().map_or(&r.item_id, |c| &c.id).clone();
                if let Ok(prev) = conv.insert(item.clone(), &Place::After(after)) {
                    out.extend(names.item_events(&item.json(), prev.as_deref(), true));
                }
            }
            r.calls.push(item);
        }
    }
    out
}

/// Text the reply says: kept in its item's transcript, sent as a delta.
fn said(conv: &mut Conversation, names: Names, r: &mut Response, t: String) -> Value {
    if let Some(Item {
        body: Body::Assistant { transcript, .. },
        ..
    }) = reply_item(conv, r)
    {
        transcript.push(t.clone());
    }
    let kind = if r.shape.output == Modality::Text {
        names.text_delta()
    } else {
        names.transcript_delta()
    };
    event(kind, with(part(&r.id, &r.item_id), json!({"delta": t})))
}

/// The events of one `function_call` output item of response `response_id` at
/// `output_index`: added (arguments empty), its arguments in one delta, done.
fn call_events(response_id: &str, output_index: usize, item: &Item) -> Vec<Value> {
    let Body::FunctionCall {
        call_id,
        name,
        arguments,
        ..
    } = &item.body
    else {
        return Vec::new();
    };
    let done = item.json();
    let mut added = done.clone();
    added["status"] = json!("in_progress");
    added["arguments"] = json!("");
    let at = json!({"response_id": response_id, "item_id": item.id,
                    "output_index": output_index, "call_id": call_id});
    vec![
        event(
            "response.output_item.added",
            json!({"response_id": response_id, "output_index": output_index, "item": added}),
        ),
        event(
            "response.function_call_arguments.delta",
            with(at.clone(), json!({"delta": arguments})),
        ),
        event(
            "response.function_call_arguments.done",
            with(at, json!({"name": name, "arguments": arguments})),
        ),
        event(
            "response.output_item.done",
            json!({"response_id": response_id, "output_index": output_index, "item": done}),
        ),
    ]
}

/// The item `r` writes: its detached one, or its item in `conv`.
fn reply_item<'a>(conv: &'a mut Conversation, r: &'a mut Response) -> Option<&'a mut Item> {
    match r.detached.as_mut() {
        Some(i) => Some(i),
        None => conv.get_mut(&r.item_id),
    }
}

/// The running response's next message (never, when none runs).
pub(super) async fn next_run_msg(r: &mut Option<Response>) -> Option<RunMsg> {
    match r {
        Some(r) => r.rx.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audio_engine::lfm2_audio::tools::CallSplitter;

    /// A reply's streamed text with a call block split across pieces gives the call's
    /// arguments as JSON, and its events name the same item, call and arguments.
    #[test]
    fn a_streamed_call_becomes_a_function_call_items_events() {
        let mut splitter = CallSplitter::new();
        let mut pieces = Vec::new();
        for t in [
            "Let me check. <|tool_",
            "call_start|>[get_weather(city=\"Par",
            "is\", days=2)]<|tool_call_end|>Done.",
        ] {
            pieces.extend(splitter.push(t));
        }
        pieces.extend(splitter.finish());
        let mut said = String::new();
        let mut calls = Vec::new();
        for p in pieces {
            match p {
                ReplyPiece::Text(t) => said.push_str(&t),
                ReplyPiece::Calls(c) => calls.extend(c.unwrap()),
            }
        }
        assert_eq!(said, "Let me check. Done.");
        assert_eq!(calls.len(), 1);
        let item = Item {
            id: "item_c".into(),
            body: Body::FunctionCall {
                call_id: "call_x".into(),
                name: calls[0].name.clone(),
                arguments: Value::Object(calls[0].arguments.clone()).to_string(),
                of_reply: true,
            },
        };
        let ev = call_events("resp_1", 1, &item);
        let kinds: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
            ]
        );
        assert_eq!(ev[0]["item"]["status"], "in_progress");
        assert_eq!(ev[0]["item"]["type"], "function_call");
        let args: Value = serde_json::from_str(ev[2]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": "Paris", "days": 2}));
        assert_eq!(ev[1]["delta"], ev[2]["arguments"]);
        for e in &ev[1..3] {
            assert_eq!(e["item_id"], "item_c");
            assert_eq!(e["call_id"], "call_x");
            assert_eq!(e["output_index"], 1);
        }
        assert_eq!(ev[2]["name"], "get_weather");
        assert_eq!(ev[3]["item"]["status"], "completed");
    }
}
