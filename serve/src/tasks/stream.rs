//! `POST /v1/tasks/stream`: the events as they come (SSE with `stream_format: "sse"`), else
//! all of them with the result in one JSON.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tokio::sync::mpsc::Receiver;
use tokio::sync::OwnedSemaphorePermit;

use audio_engine::lfm2_audio::ReplyEvent;

use crate::error::ApiError;
use crate::work::Msg;
use crate::{AppState, Entry};

use super::body::{parse_json, TaskBody};
use super::prepare::prepare;
use super::result::{event_json, record, result_json};
use super::sse::{error_frame, sse_frame, stream_response, SseCtx, SSE};
use super::start::start;

/// `POST /v1/tasks/stream`: SSE with `stream_format: "sse"`, else `{"events", "result"}`.
pub async fn stream(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: TaskBody = parse_json(body)?;
    let sse = match b.stream_format.as_deref() {
        None => false,
        Some("sse") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "stream_format `{other}` is not supported (only \"sse\")"
            )))
        }
    };
    let entry = state.entry(&b.model)?;
    let p = prepare(&state, &entry, &headers, b.request)?;
    let permit = state.stream_permit()?;
    let rx = start(&state, &entry, p, b.busy_timeout_ms).await?;
    if sse {
        sse_events(&state, entry, rx, t0, permit).await
    } else {
        all_events(&state, &entry, rx, t0).await
    }
}

/// Every event, then the result, in one JSON once the job is done.
async fn all_events(
    state: &AppState,
    entry: &Entry,
    mut rx: Receiver<Msg>,
    t0: Instant,
) -> Result<Response, ApiError> {
    let mut events = Vec::new();
    let mut ttft = None;
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Event(ev) => {
                if ttft.is_none() && matches!(ev, ReplyEvent::Audio(_)) {
                    ttft = Some(t0.elapsed());
                    state
                        .metrics
                        .time_to_first_audio
                        .observe(t0.elapsed().as_secs_f64());
                }
                events.push(event_json(&ev, &entry.language));
            }
            Msg::Done(r) => {
                let o = r?;
                record(state, &o);
                events.push(json!({"is_final": true}));
                let result = result_json(entry, &o, t0.elapsed(), Some(ttft.unwrap_or_default()));
                return Ok(Json(json!({"events": events, "result": result})).into_response());
            }
        }
    }
    Err(ApiError::internal(
        "the engine worker ended without a result",
    ))
}

/// The events as `task.stream.event` SSE frames, then `task.stream.done` with the result.
async fn sse_events(
    state: &Arc<AppState>,
    entry: Entry,
    rx: Receiver<Msg>,
    t0: Instant,
    permit: OwnedSemaphorePermit,
) -> Result<Response, ApiError> {
    let st = state.clone();
    let framer = move |msg: Msg, ctx: &mut SseCtx| -> (Vec<u8>, bool) {
        match msg {
            Msg::Event(ev) => {
                let v =
                    json!({"type": "task.stream.event", "event": event_json(&ev, &entry.language)});
                (sse_frame(&v), false)
            }
            Msg::Done(Ok(o)) => {
                record(&st, &o);
                let fin = json!({"type": "task.stream.event", "event": {"is_final": true}});
                let r = result_json(
                    &entry,
                    &o,
                    ctx.t0.elapsed(),
                    Some(ctx.ttft.unwrap_or_default()),
                );
                let mut out = sse_frame(&fin);
                out.extend(sse_frame(&json!({"type": "task.stream.done", "result": r})));
                (out, true)
            }
            Msg::Done(Err(e)) => (error_frame(e), true),
        }
    };
    stream_response(state, rx, t0, permit, SSE, framer).await
}
