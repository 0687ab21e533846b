//! Request fields every route reads the same way: the conversation key, `max_tokens` under the
//! server's limit, the audio sampler's `seed`/`temperature`/`top_k`, and the voice.

use axum::http::HeaderMap;

use audio_engine::lfm2_audio::{
    OptionMap, OptionValue, RequestContext, SamplerConfig, UnknownVoice, Voice,
};
use serde_json::Value;

use crate::error::ApiError;
use crate::pool::fnv1a;
use crate::{AppState, Entry};

/// The conversation key: `X-Conversation-Id`, else the hash of the first question's bytes.
pub fn conversation_key(headers: &HeaderMap, first_question: Option<&[u8]>) -> Option<u64> {
    if let Some(v) = headers.get("x-conversation-id") {
        return Some(fnv1a(v.as_bytes()));
    }
    first_question.map(fnv1a)
}

/// Checks and caps `max_tokens`.
pub fn max_tokens(req: Option<usize>, default: usize, limit: usize) -> Result<usize, ApiError> {
    match req {
        Some(0) => Err(ApiError::invalid("max_tokens must be positive")),
        Some(n) if n > limit => Err(ApiError::invalid(format!(
            "max_tokens {n} is above this server's limit of {limit}"
        ))),
        Some(n) => Ok(n),
        None => Ok(default.min(limit)),
    }
}

/// An audio sampler from the request's `seed`, `temperature` and `top_k` over `base`.
pub fn sampler(
    base: SamplerConfig,
    seed: Option<u64>,
    temperature: Option<f32>,
    top_k: Option<usize>,
) -> Result<SamplerConfig, ApiError> {
    let mut s = base;
    if let Some(t) = temperature {
        if !t.is_finite() || t < 0.0 {
            return Err(ApiError::invalid(format!(
                "temperature {t} must be a finite number >= 0"
            )));
        }
        s.temperature = t;
    }
    if let Some(k) = top_k {
        s.top_k = k;
    }
    if let Some(seed) = seed {
        s.seed = seed;
    }
    Ok(s)
}

/// A voice id (`us_male`, `uk-female`, ...; see [`Voice`]); none or empty: the default
/// (audio.cpp's, as through the C ABI).
pub fn parse_voice(v: Option<&str>) -> Result<Voice, ApiError> {
    match v.filter(|v| !v.is_empty()) {
        None => Ok(Voice::default()),
        Some(v) => v
            .parse()
            .map_err(|e: UnknownVoice| ApiError::invalid(e.to_string())),
    }
}

/// The OpenAI routes' typed sampling fields as engine options (by the option table's names), so
/// the engine's one validator reads them as it reads a task request's.
pub fn sampling_options(
    max_tokens: Option<usize>,
    seed: Option<u64>,
    temperature: Option<f32>,
    top_k: Option<usize>,
) -> OptionMap {
    let mut m = OptionMap::new();
    let mut put = |name: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(name.to_owned(), OptionValue::Json(v));
        }
    };
    put("max_tokens", max_tokens.map(Value::from));
    put("seed", seed.map(Value::from));
    // why through f64: the JSON number of the f32 a client sent, as the task route reads it.
    put(
        "temperature",
        temperature.map(|t| Value::from(f64::from(t))),
    );
    put("top_k", top_k.map(Value::from));
    m
}

/// The request context of `entry` on this server (its language, the one-pass limit, the
/// server's `max_tokens` limit).
pub fn context(state: &AppState, entry: &Entry) -> RequestContext {
    RequestContext {
        max_tokens_limit: Some(state.settings.max_tokens),
        max_input_seconds: Some(state.settings.max_audio_seconds),
        ..RequestContext::new(&entry.language, state.settings.max_audio_seconds)
    }
}
