//! `POST /v1/audio/transcriptions`: speech to text, from a multipart form (OpenAI's) or JSON
//! with the audio as base64; answered as json, text or verbose_json.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use audio_engine::lfm2_audio::{AudioInput, Request as EngineRequest, Task};

use crate::audio_io::wav_from;
use crate::error::ApiError;
use crate::tasks::{context, parse_json, sampling_options, test_context, Prepared};
use crate::AppState;

use super::collect::collect;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TranscriptionJson {
    #[serde(default)]
    model: Option<String>,
    audio: String,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    max_tokens: Option<usize>,
    #[serde(default)]
    busy_timeout_ms: Option<u64>,
}

/// The transcription's response format (`json` by default).
fn transcription_format(t: &TranscriptionJson) -> Result<String, ApiError> {
    let format = t.response_format.clone().unwrap_or_else(|| "json".into());
    if !["json", "text", "verbose_json"].contains(&format.as_str()) {
        return Err(ApiError::invalid(format!(
            "response_format `{format}` is not json, text or verbose_json"
        )));
    }
    Ok(format)
}

/// `POST /v1/audio/transcriptions`: multipart (`file`, `model`, `language`, `response_format`
/// json|text|verbose_json, `prompt`, `temperature`), or JSON with `audio` (base64 WAV).
pub async fn transcriptions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let mut t = TranscriptionJson::default();
    let wav = if is_json {
        let body = Bytes::from_request(req, &()).await;
        t = parse_json(body)?;
        wav_from(&t.audio, state.audio_dir.as_deref(), "`audio`")?
    } else {
        multipart_form(req, &mut t).await?
    };
    let format = transcription_format(&t)?;
    let entry = state.entry_for(t.model.as_deref(), "asr")?;
    let job = transcription_request(&t, wav)
        .resolve(&context(&state, &entry))?
        .job;
    let p = Prepared { job, key: None };
    let o = collect(crate::tasks::start(&state, &entry, p, t.busy_timeout_ms).await?).await?;
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok(match format.as_str() {
        "text" => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], o.outcome.text).into_response(),
        "verbose_json" => Json(json!({
            "task": "transcribe",
            "language": entry.language,
            "duration": o.input_seconds,
            "text": o.text,
            "segments": [{
                "id": 0, "seek": 0, "start": 0.0, "end": o.input_seconds, "text": o.text,
                "tokens": [], "temperature": 0.0,
            }],
            "timing": {"wall_ms": wall_ms, "audio_duration_ms": o.input_seconds * 1e3,
                       "rtf": if o.input_seconds > 0.0 { wall_ms / (o.input_seconds * 1e3) } else { 0.0 }},
        }))
        .into_response(),
        _ => Json(json!({
            "text": o.text,
            "timing": {"wall_ms": wall_ms, "audio_duration_ms": o.input_seconds * 1e3,
                       "rtf": if o.input_seconds > 0.0 { wall_ms / (o.input_seconds * 1e3) } else { 0.0 }},
        }))
        .into_response(),
    })
}

/// The multipart form's fields into `t`; returns the `file` field's WAV bytes.
async fn multipart_form(req: Request, t: &mut TranscriptionJson) -> Result<Vec<u8>, ApiError> {
    let mut mp = Multipart::from_request(req, &())
        .await
        .map_err(|r| ApiError::with_status(r.status(), r.body_text()))?;
    let mut file = None;
    while let Some(field) = mp
        .next_field()
        .await
        .map_err(|e| ApiError::with_status(e.status(), e.body_text()))?
    {
        let name = field.name().unwrap_or("").to_owned();
        let data = field
            .bytes()
            .await
            .map_err(|e| ApiError::with_status(e.status(), e.body_text()))?;
        let text = || String::from_utf8_lossy(&data).into_owned();
        match name.as_str() {
            "file" => file = Some(data.to_vec()),
            "model" => t.model = Some(text()),
            "language" => t.language = Some(text()),
            "response_format" => t.response_format = Some(text()),
            "max_tokens" => {
                t.max_tokens = Some(text().trim().parse().map_err(|_| {
                    ApiError::invalid(format!("max_tokens `{}` is not a number", text()))
                })?)
            }
            "busy_timeout_ms" => t.busy_timeout_ms = text().trim().parse().ok(),
            // why: accepted for OpenAI clients; ASR here is greedy and takes no prompt.
            "prompt" | "temperature" => {}
            "stream" if text() == "false" => {}
            other => {
                return Err(ApiError::invalid(format!(
                    "unknown multipart field `{other}` (fields: file, model, language, \
                     response_format, prompt, temperature, max_tokens)"
                )))
            }
        }
    }
    let wav = file.ok_or_else(|| ApiError::invalid("multipart field `file` is required"))?;
    if !wav.starts_with(b"RIFF") {
        return Err(ApiError::invalid(
            "`file` is not a WAV file (no RIFF header)",
        ));
    }
    Ok(wav)
}

/// The JSON body checked as [`transcriptions`] checks it before a model is involved (no
/// server-side paths, `limit` as the server's `max_tokens`).
pub(super) fn check(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<(), ApiError> {
    let t: TranscriptionJson = parse_json(body)?;
    transcription_format(&t)?;
    let wav = wav_from(&t.audio, None, "`audio`")?;
    transcription_request(&t, wav).resolve(&test_context(limit))?;
    Ok(())
}

/// The engine's request for a transcription: the audio, `language` and `max_tokens` by the
/// option table's names.
fn transcription_request(t: &TranscriptionJson, wav: Vec<u8>) -> EngineRequest {
    let mut options = sampling_options(t.max_tokens, None, None, None);
    if let Some(l) = t.language.as_deref().filter(|l| !l.is_empty()) {
        options.insert("language".into(), serde_json::Value::from(l).into());
    }
    EngineRequest {
        audio: Some(AudioInput::Wav(wav)),
        options,
        ..EngineRequest::new(Task::Asr)
    }
}
