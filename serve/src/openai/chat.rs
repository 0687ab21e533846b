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

use audio_engine::lfm2_audio::{
    AudioInput, ReplyEvent, Request, RequestContext, Task, RETURN_CODES,
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
    let reply = Completion::new(entry.cfg.id.clone(), want_audio, audio_format, liquid);
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
        (None, Question::Typed(text)) => text.as_bytes().to_vec(),
    };
    let (audio, text) = match question {
        Question::Spoken(wav) => (Some(AudioInput::Wav(wav)), None),
        Question::Typed(text) => (None, Some(text)),
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
}

impl Completion {
    fn new(model: String, want_audio: bool, audio_format: String, liquid: bool) -> Completion {
        Completion {
            id: format!("chatcmpl-{}", IDS.fetch_add(1, Ordering::Relaxed)),
            audio_id: format!("audio-{}", IDS.fetch_add(1, Ordering::Relaxed)),
            created: now_secs(),
            model,
            want_audio,
            audio_format,
            liquid,
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
        let mut message = json!({"role": "assistant", "content": o.text, "refusal": null});
        if self.want_audio {
            let data = if self.audio_format == "pcm16" {
                pcm16(&o.audio)
            } else {
                wav16(&o.audio, 24_000)
            };
            message["audio"] = json!({
                "id": self.audio_id, "data": b64(&data), "expires_at": self.created + 3600,
                "transcript": o.text, "format": self.audio_format, "sample_rate": 24_000,
            });
        }
        if let Some(a) = &o.artifact {
            message["lfm2_audio_reply"] = artifact_json(a);
        }
        json!({
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": Self::finish_reason(o), "logprobs": null}],
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
                    out.extend(sse_frame(&self.chunk(json!({"content": t}), None)));
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
                    // why: a transcription (Liquid's `Perform ASR.`) has its text only at the
                    // end; a client reading `content` deltas must still get it.
                    if !streamed_text && !o.text.is_empty() {
                        out.extend(sse_frame(&self.chunk(json!({"content": o.text}), None)));
                    }
                    out.extend(sse_frame(&self.last_chunk(&o, ctx.ttft)));
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
