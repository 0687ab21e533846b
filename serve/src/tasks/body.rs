//! The task routes' request JSON, and the parsing of a JSON body every route shares.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;
use serde_json::Value;

use audio_engine::lfm2_audio::{OptionMap, OptionValue};

use crate::error::ApiError;

/// The body of both task routes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskBody {
    pub model: String,
    pub request: TaskRequest,
    #[serde(default)]
    pub busy_timeout_ms: Option<u64>,
    #[serde(default)]
    pub stream_format: Option<String>,
}

/// The CLI request JSON, as far as the LFM2 family takes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub language: Option<String>,
    /// Base64 WAV, or a server-side path under `--audio-dir`.
    #[serde(default)]
    pub audio: Option<String>,
    #[serde(default)]
    pub voice_id: Option<String>,
    /// audio.cpp's top-level request options: each is the engine option of the same name, read
    /// by the engine's one option table like a value in `options` (so a wrong type or range
    /// gets the engine's error, as through the C ABI).
    #[serde(default)]
    pub seed: Option<Value>,
    #[serde(default)]
    pub max_tokens: Option<Value>,
    #[serde(default)]
    pub temperature: Option<Value>,
    #[serde(default)]
    pub top_k: Option<Value>,
    #[serde(default)]
    pub text_chunk_size: Option<Value>,
    #[serde(default)]
    pub text_chunk_mode: Option<Value>,
    #[serde(default)]
    pub audio_chunk_seconds: Option<Value>,
    #[serde(default)]
    pub audio_chunk_mode: Option<Value>,
    /// Any engine request option by name (`return_codes`, `stream_frames_per_event`, ...).
    #[serde(default)]
    pub options: BTreeMap<String, Value>,
    #[serde(default)]
    pub artifacts: Vec<ArtifactIn>,
}

/// An input artifact: `payload` (base64) or `path` (server-side), with `meta`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactIn {
    pub id: String,
    pub kind: String,
    #[serde(default)]
    pub payload: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub meta: BTreeMap<String, Value>,
}

/// Parses a JSON body, mapping the body limit (413) and serde's message (400, naming unknown
/// fields) into the envelope.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let body = body.map_err(|r| ApiError::with_status(r.status(), r.body_text()))?;
    serde_json::from_slice(&body).map_err(|e| ApiError::invalid(format!("request body: {e}")))
}

impl TaskRequest {
    /// The request's options as the engine reads them: the top-level option fields and
    /// `options`, by name; one given both ways is refused (which would win is not obvious).
    pub fn option_map(&self) -> Result<OptionMap, ApiError> {
        let mut map: OptionMap = self
            .options
            .iter()
            .map(|(k, v)| (k.clone(), OptionValue::Json(v.clone())))
            .collect();
        let top = [
            ("seed", &self.seed),
            ("max_tokens", &self.max_tokens),
            ("temperature", &self.temperature),
            ("top_k", &self.top_k),
            ("text_chunk_size", &self.text_chunk_size),
            ("text_chunk_mode", &self.text_chunk_mode),
            ("audio_chunk_seconds", &self.audio_chunk_seconds),
            ("audio_chunk_mode", &self.audio_chunk_mode),
        ];
        for (name, value) in top {
            let Some(v) = value else { continue };
            if map.contains_key(name) {
                return Err(ApiError::invalid(format!(
                    "`{name}` is given both as a request field and in `options`; give it once"
                )));
            }
            map.insert(name.to_owned(), OptionValue::Json(v.clone()));
        }
        Ok(map)
    }
}
