//! `POST /v1/chat/completions`: one speech-to-speech turn of a client-carried conversation,
//! answered as a chat completion (text and audio) or streamed as completion chunks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use audio_engine::lfm2_audio::{Job, ReplyEvent, S2sOptions, S2sRequest};

use crate::audio_io::{b64, pcm16, wav16};
use crate::error::ApiError;
use crate::tasks::{
    artifact_json, conversation_key, max_tokens, parse_json, record, sampler, sse_frame,
    sse_response, Prepared,
};
use crate::work::{Finished, Msg};
use crate::AppState;

use super::chat_body::{chat_conversation, chat_output, ChatBody};
use super::collect::collect;

static IDS: AtomicU64 = AtomicU64::new(1);

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `POST /v1/chat/completions`.
pub async fn chat(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: ChatBody = parse_json(body)?;
    let (want_audio, audio_format) = chat_output(&b)?;
    let entry = state.entry_for(b.model.as_deref(), "s2s")?;
    let (system, history, question) = chat_conversation(&b)?;
    let first = history
        .first()
        .map(|a| a.payload.clone())
        .unwrap_or_else(|| question.clone());
    let key = conversation_key(&headers, Some(&first));
    let d = S2sOptions::default();
    let s2s = S2sOptions {
        max_new_tokens: max_tokens(
            b.max_completion_tokens.or(b.max_tokens),
            d.max_new_tokens,
            state.settings.max_tokens,
        )?,
        audio: sampler(d.audio, b.seed, b.temperature, b.top_k)?,
        system_prompt: system.unwrap_or(d.system_prompt.clone()),
        ..d
    };
    let p = Prepared {
        job: Job::S2s(S2sRequest {
            question: question.into(),
            history,
            return_codes: true,
            s2s,
        }),
        key,
    };
    let id = format!("chatcmpl-{}", IDS.fetch_add(1, Ordering::Relaxed));
    let audio_id = format!("audio-{}", IDS.fetch_add(1, Ordering::Relaxed));
    let created = now_secs();
    let model = entry.cfg.id.clone();
    let streaming = b.stream == Some(true);
    let permit = if streaming {
        Some(state.stream_permit()?)
    } else {
        None
    };
    let mut rx = crate::tasks::start(&state, &entry, p, b.busy_timeout_ms).await?;
    let finish = |o: &Finished| if o.ended { "stop" } else { "length" };
    let usage = |o: &Finished| {
        json!({"prompt_tokens": o.prompt_positions, "completion_tokens": o.steps,
               "total_tokens": o.prompt_positions + o.steps})
    };
    let Some(permit) = permit else {
        let o = collect(rx).await?;
        record(&state, &o);
        let mut message = json!({"role": "assistant", "content": o.text, "refusal": null});
        if want_audio {
            let data = if audio_format == "pcm16" {
                pcm16(&o.audio)
            } else {
                wav16(&o.audio, 24_000)
            };
            message["audio"] = json!({
                "id": audio_id, "data": b64(&data), "expires_at": created + 3600,
                "transcript": o.text, "format": audio_format, "sample_rate": 24_000,
            });
        }
        if let Some(a) = &o.artifact {
            message["lfm2_audio_reply"] = artifact_json(a);
        }
        return Ok(Json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish(&o), "logprobs": null}],
            "usage": usage(&o),
            "lfm2_audio": {"resumed_prefill_positions": o.resumed_prefill_positions,
                           "reused_questions": o.reused_questions, "session_slot": o.slot,
                           "affinity": o.affine, "wall_ms": t0.elapsed().as_secs_f64() * 1e3},
        }))
        .into_response());
    };
    let first = rx
        .recv()
        .await
        .ok_or_else(|| ApiError::internal("the engine worker ended without a result"))?;
    if let Msg::Done(Err(e)) = first {
        return Err(e.into());
    }
    let st = state.clone();
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut started = false;
    Ok(sse_response(
        state.clone(),
        rx,
        Some(first),
        t0,
        permit,
        move |m, ctx| {
            let mut out = Vec::new();
            if !started {
                started = true;
                out.extend(sse_frame(&chunk(
                    json!({"role": "assistant", "content": ""}),
                    None,
                )));
            }
            let done = match m {
                Msg::Event(ReplyEvent::Text(t)) => {
                    out.extend(sse_frame(&chunk(json!({"content": t}), None)));
                    false
                }
                Msg::Event(ReplyEvent::Audio(s)) => {
                    if !ctx.first_audio_seen {
                        ctx.first_audio_seen = true;
                        ctx.ttft = Some(ctx.t0.elapsed());
                        st.metrics
                            .time_to_first_audio
                            .observe(ctx.t0.elapsed().as_secs_f64());
                    }
                    if want_audio {
                        out.extend(sse_frame(&chunk(
                        json!({"audio": {"id": audio_id, "data": b64(&pcm16(&s)), "sample_rate": 24_000}}),
                        None,
                    )));
                    }
                    false
                }
                Msg::Done(Ok(o)) => {
                    record(&st, &o);
                    let mut delta = json!({});
                    if let Some(a) = &o.artifact {
                        delta["lfm2_audio_reply"] = artifact_json(a);
                    }
                    if want_audio {
                        delta["audio"] = json!({"id": audio_id, "expires_at": created + 3600, "transcript": o.text});
                    }
                    let mut last = chunk(delta, Some(finish(&o)));
                    last["usage"] = usage(&o);
                    last["lfm2_audio"] = json!({"resumed_prefill_positions": o.resumed_prefill_positions,
                    "reused_questions": o.reused_questions, "session_slot": o.slot, "affinity": o.affine,
                    "ttft_ms": ctx.ttft.map(|t| t.as_secs_f64() * 1e3)});
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
        },
    ))
}

/// The JSON body checked as [`chat`] checks it before a model is involved (`limit` as the
/// server's `max_tokens`).
pub(super) fn check(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<(), ApiError> {
    let b: ChatBody = parse_json(body)?;
    chat_output(&b)?;
    chat_conversation(&b)?;
    let d = S2sOptions::default();
    max_tokens(
        b.max_completion_tokens.or(b.max_tokens),
        d.max_new_tokens,
        limit,
    )?;
    sampler(d.audio, b.seed, b.temperature, b.top_k)?;
    Ok(())
}
