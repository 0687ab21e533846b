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
use crate::tasks::{error_frame, record, sse_frame, stream_response, SseCtx, PCM, SSE};
use crate::work::Msg;
use crate::AppState;

/// The speech on `rx` streamed as `stream_format` (`audio` or `sse`); a request the engine
/// refuses before its first event is answered with its status instead.
pub(super) async fn speech_stream(
    state: Arc<AppState>,
    rx: Receiver<Msg>,
    t0: Instant,
    permit: OwnedSemaphorePermit,
    stream_format: &str,
) -> Result<Response, ApiError> {
    let st = state.clone();
    if stream_format == "sse" {
        let framer = move |m: Msg, ctx: &mut SseCtx| match m {
            Msg::Event(ReplyEvent::Audio(s)) => (
                sse_frame(&json!({"type": "speech.audio.delta", "audio": b64(&pcm16(&s))})),
                false,
            ),
            Msg::Event(_) => (Vec::new(), false),
            Msg::Done(Ok(o)) => {
                record(&st, &o);
                let ttft = ctx.ttft.map(|t| t.as_secs_f64() * 1e3);
                let mut out =
                    sse_frame(&json!({"type": "speech.audio.done", "timing": {"ttft_ms": ttft}}));
                out.extend_from_slice(b"data: [DONE]\n\n");
                (out, true)
            }
            Msg::Done(Err(e)) => (error_frame(e), true),
        };
        stream_response(&state, rx, t0, permit, SSE, framer).await
    } else {
        let framer = move |m: Msg, _: &mut SseCtx| match m {
            Msg::Event(ReplyEvent::Audio(s)) => (pcm16(&s), false),
            Msg::Event(_) => (Vec::new(), false),
            Msg::Done(Ok(o)) => {
                record(&st, &o);
                (Vec::new(), true)
            }
            // why: raw PCM has no place for an error; end the body early (the client sees a
            // short stream) and log it.
            Msg::Done(Err(e)) => {
                tracing::warn!("speech stream failed: {e}");
                (Vec::new(), true)
            }
        };
        stream_response(&state, rx, t0, permit, PCM, framer).await
    }
}
