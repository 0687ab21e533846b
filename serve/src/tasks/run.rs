//! `POST /v1/tasks/run`: one request, one result JSON.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;

use audio_engine::lfm2_audio::ReplyEvent;

use crate::error::ApiError;
use crate::work::Msg;
use crate::AppState;

use super::body::{parse_json, TaskBody};
use super::prepare::prepare;
use super::result::{record, result_json};
use super::start::start;

/// `POST /v1/tasks/run`.
pub async fn run(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: TaskBody = parse_json(body)?;
    if b.stream_format.is_some() {
        return Err(ApiError::invalid("`stream_format` is for /v1/tasks/stream"));
    }
    let entry = state.entry(&b.model)?;
    let p = prepare(&state, &entry, &headers, b.request)?;
    let mut rx = start(&state, &entry, p, b.busy_timeout_ms).await?;
    let mut ttft = None;
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Event(ReplyEvent::Audio(_)) if ttft.is_none() => ttft = Some(t0.elapsed()),
            Msg::Event(_) => {}
            Msg::Done(r) => {
                let o = r?;
                record(&state, &o);
                if let Some(t) = ttft {
                    state.metrics.time_to_first_audio.observe(t.as_secs_f64());
                }
                return Ok(Json(result_json(&entry, &o, t0.elapsed(), None)).into_response());
            }
        }
    }
    Err(ApiError::internal(
        "the engine worker ended without a result",
    ))
}
