//! Streamed speech of `POST /v1/audio/speech`: raw s16le PCM as it is produced
//! (`stream_format: "audio"`), or `speech.audio.delta` SSE events (`"sse"`).

use std::sync::Arc;
use std::time::Instant;

use axum::response::Response;
use serde_json::json;
use tokio::sync::mpsc::Receiver;
use tokio::sync::OwnedSemaphorePermit;

use audio_engine::lfm2_audio::ReplyEvent;

use crate::audio_io::{b64, pcm16};
use crate::error::ApiError;
use crate::tasks::{body_stream, record, sse_frame, sse_response, SseCtx};
use crate::work::Msg;
use crate::AppState;

/// The speech on `rx` streamed as `stream_format` (`audio` or `sse`); a request the engine
/// refuses before its first event is answered with its status instead.
pub(super) async fn speech_stream(
    state: Arc<AppState>,
    mut rx: Receiver<Msg>,
    t0: Instant,
    permit: OwnedSemaphorePermit,
    stream_format: &str,
) -> Result<Response, ApiError> {
    let first = rx
        .recv()
        .await
        .ok_or_else(|| ApiError::internal("the engine worker ended without a result"))?;
    if let Msg::Done(Err(e)) = first {
        return Err(e.into());
    }
    let st = state.clone();
    let first_audio = move |ctx: &mut SseCtx| {
        if !ctx.first_audio_seen {
            ctx.first_audio_seen = true;
            ctx.ttft = Some(ctx.t0.elapsed());
            st.metrics
                .time_to_first_audio
                .observe(ctx.t0.elapsed().as_secs_f64());
        }
    };
    let st2 = state.clone();
    if stream_format == "sse" {
        let fa = first_audio;
        Ok(sse_response(
            state.clone(),
            rx,
            Some(first),
            t0,
            permit,
            move |m, ctx| match m {
                Msg::Event(ReplyEvent::Audio(s)) => {
                    fa(ctx);
                    (
                        sse_frame(&json!({"type": "speech.audio.delta", "audio": b64(&pcm16(&s))})),
                        false,
                    )
                }
                Msg::Event(ReplyEvent::Text(_)) => (Vec::new(), false),
                Msg::Done(Ok(o)) => {
                    record(&st2, &o);
                    let ttft = ctx.ttft.map(|t| t.as_secs_f64() * 1e3);
                    let mut out = sse_frame(
                        &json!({"type": "speech.audio.done", "timing": {"ttft_ms": ttft}}),
                    );
                    out.extend_from_slice(b"data: [DONE]\n\n");
                    (out, true)
                }
                Msg::Done(Err(e)) => {
                    let e = ApiError::from(e);
                    (
                        sse_frame(&json!({"type": "error", "error": e.body()["error"]})),
                        true,
                    )
                }
            },
        ))
    } else {
        let fa = first_audio;
        Ok(body_stream(
            state.clone(),
            rx,
            Some(first),
            t0,
            permit,
            move |m, ctx| match m {
                Msg::Event(ReplyEvent::Audio(s)) => {
                    fa(ctx);
                    (pcm16(&s), false)
                }
                Msg::Event(_) => (Vec::new(), false),
                Msg::Done(Ok(o)) => {
                    record(&st2, &o);
                    (Vec::new(), true)
                }
                // why: raw PCM has no place for an error; end the body early (the client sees
                // a short stream) and log it.
                Msg::Done(Err(e)) => {
                    tracing::warn!("speech stream failed: {e}");
                    (Vec::new(), true)
                }
            },
            "audio/pcm",
        ))
    }
}
