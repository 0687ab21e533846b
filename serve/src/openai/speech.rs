//! `POST /v1/audio/speech`: text to speech, answered whole (`wav`, `pcm` s16le 24 kHz, or
//! `json`) or streamed (`speech_stream`).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc::Receiver;

use audio_engine::lfm2_audio::{Request, Task};

use crate::audio_io::{b64, pcm16, wav16};
use crate::error::ApiError;
use crate::tasks::{context, parse_json, record, sampling_options, test_context, Prepared};
use crate::work::Msg;
use crate::AppState;

use super::collect::collect;
use super::speech_stream::speech_stream;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpeechBody {
    #[serde(default)]
    model: Option<String>,
    input: String,
    #[serde(default)]
    voice: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_format: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_k: Option<usize>,
    #[serde(default)]
    max_tokens: Option<usize>,
    #[serde(default)]
    busy_timeout_ms: Option<u64>,
}

/// The speech body's output choices: the response format and, when streamed, the stream
/// format (`audio` or `sse`); checked before any model is picked.
fn speech_format(b: &SpeechBody) -> Result<(String, Option<&'static str>), ApiError> {
    let streaming = b.stream == Some(true) || b.stream_format.is_some();
    let format = b.response_format.clone().unwrap_or_else(|| {
        if streaming {
            "pcm".into()
        } else {
            "wav".into()
        }
    });
    if !["wav", "pcm", "json", "b64_json"].contains(&format.as_str()) {
        return Err(ApiError::invalid(format!(
            "response_format `{format}` is not wav, pcm or json"
        )));
    }
    let stream_format = match (streaming, b.stream_format.as_deref()) {
        (false, _) => None,
        (true, None) | (true, Some("audio")) => Some("audio"),
        (true, Some("sse")) => Some("sse"),
        (true, Some(other)) => {
            return Err(ApiError::invalid(format!(
                "stream_format `{other}` is not sse or audio"
            )))
        }
    };
    if streaming && format != "pcm" {
        return Err(ApiError::invalid(
            "streamed speech needs response_format \"pcm\" (s16le, 24 kHz mono)",
        ));
    }
    if b.input.trim().is_empty() {
        return Err(ApiError::invalid("`input` (what to speak) is empty"));
    }
    Ok((format, stream_format))
}

/// The engine's request for a speech body: the input spoken with the voice and sampling
/// fields as the option table names them.
fn speech_request(b: &SpeechBody) -> Request {
    Request {
        text: Some(b.input.clone()),
        voice: b.voice.clone().filter(|v| !v.is_empty()),
        options: sampling_options(b.max_tokens, b.seed, b.temperature, b.top_k),
        ..Request::new(Task::Tts)
    }
}

/// `POST /v1/audio/speech`: `wav` (default), `pcm` (s16le 24 kHz) or `json`; streamed with
/// `stream: true` / `stream_format` (`audio`: chunked PCM, `sse`: `speech.audio.delta` events).
pub async fn speech(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: SpeechBody = parse_json(body)?;
    let (format, stream_format) = speech_format(&b)?;
    let streaming = stream_format.is_some();
    let entry = state.entry_for(b.model.as_deref(), "tts")?;
    let job = speech_request(&b).resolve(&context(&state, &entry))?.job;
    let p = Prepared { job, key: None };
    let permit = if streaming {
        Some(state.stream_permit()?)
    } else {
        None
    };
    let rx = crate::tasks::start(&state, &entry, p, b.busy_timeout_ms).await?;
    match (permit, stream_format) {
        (Some(permit), Some(stream_format)) => {
            speech_stream(state, rx, t0, permit, stream_format).await
        }
        _ => speech_file(&state, rx, t0, &format).await,
    }
}

/// The whole speech in one response of `format`, with its timing (in the JSON, else headers).
async fn speech_file(
    state: &AppState,
    rx: Receiver<Msg>,
    t0: Instant,
    format: &str,
) -> Result<Response, ApiError> {
    let o = collect(rx).await?;
    record(state, &o);
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    let audio_ms = o.audio.len() as f64 / 24.0;
    let rtf = if audio_ms > 0.0 {
        wall_ms / audio_ms
    } else {
        0.0
    };
    let timing = json!({"wall_ms": wall_ms, "audio_duration_ms": audio_ms, "rtf": rtf});
    if format == "json" || format == "b64_json" {
        return Ok(Json(
            json!({"audio": b64(&wav16(&o.audio, 24_000)), "format": "wav", "timing": timing}),
        )
        .into_response());
    }
    let (ct, bytes) = if format == "pcm" {
        ("audio/pcm", pcm16(&o.audio))
    } else {
        ("audio/wav", wav16(&o.audio, 24_000))
    };
    let mut resp = ([(header::CONTENT_TYPE, ct)], bytes).into_response();
    let h = resp.headers_mut();
    for (k, v) in [
        ("x-audiocpp-wall-ms", format!("{wall_ms:.1}")),
        ("x-audiocpp-audio-duration-ms", format!("{audio_ms:.1}")),
        ("x-audiocpp-rtf", format!("{rtf:.4}")),
    ] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    }
    Ok(resp)
}

/// The JSON body checked as [`speech`] checks it before a model is involved (`limit` as the
/// server's `max_tokens`).
pub(super) fn check(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<(), ApiError> {
    let b: SpeechBody = parse_json(body)?;
    speech_format(&b)?;
    speech_request(&b).resolve(&test_context(limit))?;
    Ok(())
}
