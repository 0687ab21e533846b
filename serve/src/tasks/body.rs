//! The task routes' request JSON, and the parsing of a JSON body every route shares.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;
use serde_json::Value;

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
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub max_tokens: Option<usize>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_k: Option<usize>,
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
