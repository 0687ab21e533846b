//! Streamed response bodies, for the task and OpenAI routes alike: the worker's messages framed
//! as they arrive (SSE frames or raw bytes), a refusal before the first event answered with its
//! status, the time to first audio measured, the stream permit held until the body ends, and a
//! client that went away counted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc::Receiver;
use tokio::sync::OwnedSemaphorePermit;

use audio_engine::lfm2_audio::{EngineError, ReplyEvent};

use crate::error::ApiError;
use crate::work::Msg;
use crate::AppState;

/// The content type of an SSE body.
pub const SSE: &str = "text/event-stream";

/// The content type of a raw PCM body.
pub const PCM: &str = "audio/pcm";

/// `data: {json}\n\n`.
pub fn sse_frame(v: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend(serde_json::to_vec(v).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    out
}

/// `{"type": "error", "error": {...}}`: an engine failure after the stream began, as the task
/// routes and the speech stream report it.
pub fn error_frame(e: EngineError) -> Vec<u8> {
    sse_frame(&json!({"type": "error", "error": ApiError::from(e).body()["error"]}))
}

/// What a stream's framer keeps.
pub struct SseCtx {
    pub t0: Instant,
    pub first_audio_seen: bool,
    pub ttft: Option<Duration>,
    pub done: bool,
    pub state: Arc<AppState>,
    _permit: OwnedSemaphorePermit,
}

impl SseCtx {
    /// Notes an audio event: the first one sets [`SseCtx::ttft`] and observes it in the
    /// metrics.
    fn saw_audio(&mut self) {
        if !self.first_audio_seen {
            self.first_audio_seen = true;
            let t = self.t0.elapsed();
            self.ttft = Some(t);
            self.state
                .metrics
                .time_to_first_audio
                .observe(t.as_secs_f64());
        }
    }
}

impl Drop for SseCtx {
    fn drop(&mut self) {
        if !self.done {
            // The body was dropped before the end: the client went away (the worker's next
            // send fails and generation stops).
            self.state
                .metrics
                .disconnects
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!("client disconnected mid-stream; generation stopped");
        }
    }
}

/// The worker's first message, unless it is the engine's refusal: a request the engine refuses
/// fails before its first event, so waiting for that message answers such a request with its
/// status code rather than with a stream that carries the error.
pub async fn first_message(rx: &mut Receiver<Msg>) -> Result<Msg, ApiError> {
    let first = rx
        .recv()
        .await
        .ok_or_else(|| ApiError::internal("the engine worker ended without a result"))?;
    if let Msg::Done(Err(e)) = first {
        return Err(e.into());
    }
    Ok(first)
}

/// The worker's messages on `rx` as a streamed `content_type` body ([`SSE`], [`PCM`]) framed by
/// `framer`, after [`first_message`]: what every streaming route answers.
pub async fn stream_response(
    state: &Arc<AppState>,
    mut rx: Receiver<Msg>,
    t0: Instant,
    permit: OwnedSemaphorePermit,
    content_type: &'static str,
    framer: impl FnMut(Msg, &mut SseCtx) -> (Vec<u8>, bool) + Send + 'static,
) -> Result<Response, ApiError> {
    let first = first_message(&mut rx).await?;
    Ok(body_stream(
        state.clone(),
        rx,
        Some(first),
        t0,
        permit,
        framer,
        content_type,
    ))
}

/// A streamed `content_type` body of the worker's messages (`first`, then those on `rx`), each
/// framed by `framer`, which says when it is done. The first audio event is noted in the
/// context ([`SseCtx::ttft`]) before it is framed.
fn body_stream(
    state: Arc<AppState>,
    rx: Receiver<Msg>,
    first: Option<Msg>,
    t0: Instant,
    permit: OwnedSemaphorePermit,
    framer: impl FnMut(Msg, &mut SseCtx) -> (Vec<u8>, bool) + Send + 'static,
    content_type: &'static str,
) -> Response {
    let ctx = SseCtx {
        t0,
        first_audio_seen: false,
        ttft: None,
        done: false,
        state,
        _permit: permit,
    };
    let s = futures_util::stream::unfold(
        (rx, first, ctx, framer),
        |(mut rx, mut first, mut ctx, mut framer)| async move {
            if ctx.done {
                return None;
            }
            let msg = match first.take() {
                Some(m) => Some(m),
                None => rx.recv().await,
            };
            if let Some(Msg::Event(ReplyEvent::Audio(_))) = &msg {
                ctx.saw_audio();
            }
            let (bytes, done) = match msg {
                Some(m) => framer(m, &mut ctx),
                None => (Vec::new(), true),
            };
            ctx.done = done;
            Some((
                Ok::<_, std::io::Error>(Bytes::from(bytes)),
                (rx, first, ctx, framer),
            ))
        },
    );
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(s),
    )
        .into_response()
}
