//! Streamed response bodies: the worker's messages framed as they arrive (SSE frames or raw
//! bytes), the stream permit held until the body ends, and a client that went away counted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::work::Msg;
use crate::AppState;

/// `data: {json}\n\n`.
pub fn sse_frame(v: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend(serde_json::to_vec(v).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    out
}

/// What a stream's framer keeps.
pub struct SseCtx {
    pub t0: Instant,
    pub first_audio_seen: bool,
    pub ttft: Option<Duration>,
    pub done: bool,
    pub state: Arc<AppState>,
    _permit: tokio::sync::OwnedSemaphorePermit,
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

/// A streamed body of the worker's messages, framed by `framer` (which says when it is done).
pub fn sse_response(
    state: Arc<AppState>,
    rx: tokio::sync::mpsc::Receiver<Msg>,
    first: Option<Msg>,
    t0: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
    framer: impl FnMut(Msg, &mut SseCtx) -> (Vec<u8>, bool) + Send + 'static,
) -> Response {
    body_stream(state, rx, first, t0, permit, framer, "text/event-stream")
}

/// [`sse_response`] with any content type (chunked PCM).
pub fn body_stream(
    state: Arc<AppState>,
    rx: tokio::sync::mpsc::Receiver<Msg>,
    first: Option<Msg>,
    t0: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
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
