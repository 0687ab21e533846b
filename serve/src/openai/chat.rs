//! `POST /v1/chat/completions`: one speech-to-speech turn of a client-carried conversation,
//! answered as a chat completion (text and audio) or streamed as completion chunks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use audio_engine::lfm2_audio::tools::{tool_system_prompt, CallSplitter, ReplyPiece, ToolCall};
use audio_engine::lfm2_audio::{
    AudioInput, ReplyEvent, Request, RequestContext, S2sOptions, Task, RETURN_CODES,
};

use crate::audio_io::{b64, pcm16, wav16};
use crate::error::ApiError;
use crate::tasks::{
    artifact_json, context, conversation_key, parse_json, record, sampling_options, sse_frame,
    stream_response, test_context, Prepared, SseCtx, SSE,
};
use crate::work::{Finished, Msg};
use crate::AppState;

use super::chat_body::{chat_conversation, chat_output, ChatBody, Conversation, Question};
use super::collect::collect;
use super::liquid::{self, Route};

static IDS: AtomicU64 = AtomicU64::new(1);

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `POST /v1/chat/completions`: the body checked and made a job, the job started on a session,
/// then its outcome answered as one completion or streamed as chunks.
pub async fn chat(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: ChatBody = parse_json(body)?;
    let (want_audio, audio_format) = chat_output(&b)?;
    let (system, history, question) = chat_conversation(&b)?;
    let (liquid, route) = liquid::dialect(&b, system.as_deref())?;
    let entry = if liquid {
        liquid::entry(&state, b.model.as_deref(), route)?
    } else {
        state.entry_for(b.model.as_deref(), "s2s")?
    };
    let p = chat_job(
        &headers,
        &b,
        (system, history, question),
        route,
        &context(&state, &entry),
    )?;
    // why: a transcription has no audio to send.
    let want_audio = want_audio && route != Route::Asr;
    let tools = route == Route::S2s && !b.prompt_tools()?.is_empty();
    let reply = Completion::new(
        entry.cfg.id.clone(),
        want_audio,
        audio_format,
        liquid,
        tools,
    );
    let permit = match b.stream == Some(true) {
        true => Some(state.stream_permit()?),
        false => None,
    };
    let rx = crate::tasks::start(&state, &entry, p, b.busy_timeout_ms).await?;
    match permit {
        None => {
            let o = collect(rx).await?;
            record(&state, &o);
            Ok(Json(reply.completion(&o, t0.elapsed())).into_response())
        }
        Some(permit) => {
            let framer = reply.chunks(state.clone());
            stream_response(&state, rx, t0, permit, SSE, framer).await
        }
    }
}

/// The engine's job for a chat body: for speech to speech, the conversation's last user
/// message as the question (spoken: the request's audio; typed: its text), the earlier turns as
/// history (the reply artifact always returned, for the next turn), and the sampling options
/// (`limit` as the server's `max_tokens`); Liquid's ASR and TTS routes as their tasks.
fn chat_job(
    headers: &HeaderMap,
    b: &ChatBody,
    (system, history, question): Conversation,
    route: Route,
    ctx: &RequestContext,
) -> Result<Prepared, ApiError> {
    if route != Route::S2s {
        let req = liquid::task_request(b, route, history.len(), question)?;
        return Ok(Prepared {
            job: req.resolve(ctx)?.job,
            key: None,
        });
    }
    // why the first question's bytes (WAV or text): every turn of a conversation starts with
    // them, so its turns find the session that holds its prefill.
    let first = match (history.first(), &question) {
        (Some(a), _) => a.payload.clone(),
        (None, Question::Spoken(wav)) => wav.clone(),
        (None, Question::Typed(text) | Question::Tool(text)) => text.as_bytes().to_vec(),
    };
    let mut history = history;
    let (audio, text) = match question {
        Question::Spoken(wav) => (Some(AudioInput::Wav(wav)), None),
        Question::Typed(text) => (None, Some(text)),
        // why in the history: the engine asks a history's trailing question, and a tool's
        // result is such a question of role tool.
        tool @ Question::Tool(_) => {
            history.push(tool.into_artifact());
            (None, None)
        }
    };
    // The tools go in the system turn, after the instructions (the engine's S2S prompt when the
    // body has none).
    let tools = b.prompt_tools()?;
    let system = match (system, tools.is_empty()) {
        (system, true) => system,
        (system, false) => Some(tool_system_prompt(
            &system.unwrap_or_else(|| S2sOptions::default().system_prompt),
            &tools,
        )),
    };
    let key = conversation_key(headers, Some(&first));
    let mut options = sampling_options(
        b.max_completion_tokens.or(b.max_tokens),
        b.seed,
        b.temperature,
        b.top_k,
    );
    // why: a chat reply always returns its artifact, for the next turn.
    options.insert(RETURN_CODES.into(), serde_json::Value::Bool(true).into());
    let req = Request {
        audio,
        text,
        history,
        system_prompt: system,
        options,
        ..Request::new(Task::S2s)
    };
    Ok(Prepared {
        job: req.resolve(ctx)?.job,
        key,
    })
}

/// One completion's names and output choice: what its JSON, whole or in chunks, is made of.
struct Completion {
    id: String,
    audio_id: String,
    created: u64,
    model: String,
    want_audio: bool,
    audio_format: String,
    /// Liquid's dialect: streamed audio also as `audio_chunk` (float32).
    liquid: bool,
    /// Whether the prompt listed tools: the reply's calls are split from its text.
    tools: bool,
}

impl Completion {
    fn new(
        model: String,
        want_audio: bool,
        audio_format: String,
        liquid: bool,
        tools: bool,
    ) -> Completion {
        Completion {
            id: format!("chatcmpl-{}", IDS.fetch_add(1, Ordering::Relaxed)),
            audio_id: format!("audio-{}", IDS.fetch_add(1, Ordering::Relaxed)),
            created: now_secs(),
            model,
            want_audio,
            audio_format,
            liquid,
            tools,
        }
    }

    fn finish_reason(o: &Finished) -> &'static str {
        if o.ended {
            "stop"
        } else {
            "length"
        }
    }

    fn usage(o: &Finished) -> Value {
        json!({"prompt_tokens": o.prompt_positions, "completion_tokens": o.steps,
               "total_tokens": o.prompt_positions + o.steps})
    }

    /// The `chat.completion` of a finished turn that took `wall`.
    fn completion(&self, o: &Finished, wall: Duration) -> Value {
        let (said, calls) = match self.tools {
            true => split_calls(&o.text),
            false => (o.text.clone(), Vec::new()),
        };
        let mut message = json!({"role": "assistant", "content": said, "refusal": null});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls.iter().map(|c| c.json(None)).collect());
        }
        if self.want_audio {
            let data = if self.audio_format == "pcm16" {
                pcm16(&o.audio)
            } else {
                wav16(&o.audio, 24_000)
            };
            message["audio"] = json!({
                "id": self.audio_id, "data": b64(&data), "expires_at": self.created + 3600,
                "transcript": said, "format": self.audio_format, "sample_rate": 24_000,
            });
        }
        if let Some(a) = &o.artifact {
            message["lfm2_audio_reply"] = artifact_json(a);
        }
        json!({
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": null,
                         "finish_reason": if calls.is_empty() { Self::finish_reason(o) } else { "tool_calls" }}],
            "usage": Self::usage(o),
            "lfm2_audio": {"resumed_prefill_positions": o.resumed_prefill_positions,
                           "reused_questions": o.reused_questions, "session_slot": o.slot,
                           "affinity": o.affine, "wall_ms": wall.as_secs_f64() * 1e3},
        })
    }

    /// A `chat.completion.chunk` carrying `delta`.
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
               "model": self.model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    /// The last chunk: the reply artifact, the audio's transcript, usage and the engine's
    /// figures.
    fn last_chunk(&self, o: &Finished, ttft: Option<Duration>) -> Value {
        let mut delta = json!({});
        if let Some(a) = &o.artifact {
            delta["lfm2_audio_reply"] = artifact_json(a);
        }
        if self.want_audio {
            delta["audio"] = json!({"id": self.audio_id, "expires_at": self.created + 3600, "transcript": o.text});
        }
        let mut last = self.chunk(delta, Some(Self::finish_reason(o)));
        last["usage"] = Self::usage(o);
        last["lfm2_audio"] = json!({"resumed_prefill_positions": o.resumed_prefill_positions,
            "reused_questions": o.reused_questions, "session_slot": o.slot, "affinity": o.affine,
            "ttft_ms": ttft.map(|t| t.as_secs_f64() * 1e3)});
        last
    }

    /// The framer of the streamed completion: the assistant's role first, then a chunk per
    /// text piece and (when asked) per audio piece, the last chunk and `[DONE]`.
    fn chunks(self, state: Arc<AppState>) -> impl FnMut(Msg, &mut SseCtx) -> (Vec<u8>, bool) {
        let mut started = false;
        let mut streamed_text = false;
        let mut splitter = self.tools.then(CallSplitter::new);
        let mut calls = 0usize;
        move |m, ctx| {
            let mut out = Vec::new();
            if !started {
                started = true;
                let role = json!({"role": "assistant", "content": ""});
                out.extend(sse_frame(&self.chunk(role, None)));
            }
            let done = match m {
                Msg::Event(ReplyEvent::Text(t)) => {
                    streamed_text = true;
                    let pieces = match splitter.as_mut() {
                        Some(s) => s.push(&t),
                        None => vec![ReplyPiece::Text(t)],
                    };
                    out.extend(self.piece_frames(pieces, &mut calls));
                    false
                }
                Msg::Event(ReplyEvent::Audio(s)) => {
                    if self.want_audio {
                        let mut delta = json!({"audio": {"id": self.audio_id,
                            "data": b64(&pcm16(&s)), "sample_rate": 24_000}});
                        if self.liquid {
                            delta["audio_chunk"] = json!({"data": b64(&liquid::f32le(&s))});
                        }
                        out.extend(sse_frame(&self.chunk(delta, None)));
                    }
                    false
                }
                Msg::Done(Ok(o)) => {
                    record(&state, &o);
                    if let Some(s) = splitter.as_mut() {
                        out.extend(self.piece_frames(s.finish(), &mut calls));
                    }
                    // why: a transcription (Liquid's `Perform ASR.`) has its text only at the
                    // end; a client reading `content` deltas must still get it.
                    if !streamed_text && !o.text.is_empty() {
                        out.extend(sse_frame(&self.chunk(json!({"content": o.text}), None)));
                    }
                    let mut last = self.last_chunk(&o, ctx.ttft);
                    if calls > 0 {
                        last["choices"][0]["finish_reason"] = json!("tool_calls");
                    }
                    out.extend(sse_frame(&last));
                    out.extend_from_slice(b"data: [DONE]\n\n");
                    true
                }
                Msg::Done(Err(e)) => {
                    let e = ApiError::from(e);
                    out.extend(sse_frame(&json!({"error": e.body()["error"]})));
                    true
                }
            };
            (out, done)
        }
    }
}

impl Completion {
    /// The chunks of a streamed reply's text pieces: `content` deltas for what it says, a
    /// `tool_calls` delta per call (`calls` counts them, for their `index`).
    fn piece_frames(&self, pieces: Vec<ReplyPiece>, calls: &mut usize) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in pieces {
            match piece {
                ReplyPiece::Text(t) => {
                    out.extend(sse_frame(&self.chunk(json!({"content": t}), None)))
                }
                ReplyPiece::Calls(Ok(list)) => {
                    for call in list {
                        let c = Call::new(call).json(Some(*calls));
                        *calls += 1;
                        out.extend(sse_frame(&self.chunk(json!({"tool_calls": [c]}), None)));
                    }
                }
                // why as text: a block that is not a list of calls is no call, and nothing the
                // model wrote is lost.
                ReplyPiece::Calls(Err(e)) => {
                    out.extend(sse_frame(&self.chunk(json!({"content": e.text}), None)))
                }
            }
        }
        out
    }
}

/// A call of the reply, as chat completions show it.
struct Call {
    id: String,
    call: ToolCall,
}

impl Call {
    fn new(call: ToolCall) -> Call {
        Call {
            id: format!("call_{}", IDS.fetch_add(1, Ordering::Relaxed)),
            call,
        }
    }

    /// `{"id", "type": "function", "function": {"name", "arguments"}}`, with `index` in a
    /// streamed delta.
    fn json(&self, index: Option<usize>) -> Value {
        let mut v = json!({"id": self.id, "type": "function", "function": {
            "name": self.call.name,
            "arguments": Value::Object(self.call.arguments.clone()).to_string()}});
        if let Some(i) = index {
            v["index"] = json!(i);
        }
        v
    }
}

/// A whole reply's text split into what it says and its calls (an unreadable block stays
/// text).
fn split_calls(text: &str) -> (String, Vec<Call>) {
    let mut s = CallSplitter::new();
    let mut pieces = s.push(text);
    pieces.extend(s.finish());
    let (mut said, mut calls) = (String::new(), Vec::new());
    for p in pieces {
        match p {
            ReplyPiece::Text(t) => said.push_str(&t),
            ReplyPiece::Calls(Ok(list)) => calls.extend(list.into_iter().map(Call::new)),
            ReplyPiece::Calls(Err(e)) => said.push_str(&e.text),
        }
    }
    (said, calls)
}

/// The JSON body checked as [`chat`] checks it before a model is involved (`limit` as the
/// server's `max_tokens`).
pub(super) fn check(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<(), ApiError> {
    let b: ChatBody = parse_json(body)?;
    chat_output(&b)?;
    let conversation = chat_conversation(&b)?;
    let (_, route) = liquid::dialect(&b, conversation.0.as_deref())?;
    let ctx = test_context(limit);
    chat_job(&HeaderMap::new(), &b, conversation, route, &ctx)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_with_a_call_block_splits_into_content_and_tool_calls() {
        let (said, calls) = split_calls(
            "<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>Checking.",
        );
        assert_eq!(said, "Checking.");
        assert_eq!(calls.len(), 1);
        let j = calls[0].json(Some(0));
        assert_eq!(j["type"], "function");
        assert_eq!(j["index"], 0);
        assert_eq!(j["function"]["name"], "get_weather");
        assert_eq!(j["function"]["arguments"], "{\"city\":\"Paris\"}");
        // No block: all text; an unreadable one stays text.
        assert_eq!(split_calls("Hello.").0, "Hello.");
        let (said, calls) = split_calls("<|tool_call_start|>not a call<|tool_call_end|>ok");
        assert!(calls.is_empty());
        assert_eq!(said, "not a callok");
    }
}
