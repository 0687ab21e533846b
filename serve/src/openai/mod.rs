//! OpenAI-compatible routes: `POST /v1/audio/transcriptions`, `POST /v1/audio/speech` and
//! `POST /v1/chat/completions` (speech to speech with `modalities: ["text","audio"]`), one file
//! each; they build the engine's `Job` and reply from its outcome with the task routes' pieces
//! ([`crate::tasks`]).
//!
//! Multi-turn chat: the client sends the whole conversation; each earlier user message's
//! `input_audio` (or its text: string content or `text` parts) becomes a question artifact and
//! each earlier assistant message carries the reply artifact it was returned, in the extension
//! field `lfm2_audio_reply` (`{"id","kind","payload","meta"}`, as in the task routes'
//! `artifacts`), or is a text-only reply (its text).
//!
//! The chat route also speaks Liquid's dialect (`reset_context`, the task in the system prompt,
//! float32 `audio_chunk`s), as LiveKit's `livekit-plugins-liquidai` sends it (`liquid.rs`).

mod chat;
mod chat_body;
mod collect;
mod liquid;
mod speech;
mod speech_stream;
mod transcriptions;

use axum::body::Bytes;

use crate::error::ApiError;

pub use chat::chat;
pub use speech::speech;
pub use transcriptions::transcriptions;

/// The OpenAI routes' JSON bodies checked as their handlers check them before a model is
/// involved (no server-side paths, `limit` as the server's `max_tokens`): `route` is
/// `transcriptions`, `speech` or `chat`. For the fuzz targets (`fuzz/`); not an API.
#[doc(hidden)]
pub fn check_body(route: &str, body: &[u8], limit: usize) -> Result<(), ApiError> {
    let body = Ok(Bytes::copy_from_slice(body));
    match route {
        "transcriptions" => transcriptions::check(body, limit),
        "speech" => speech::check(body, limit),
        "chat" => chat::check(body, limit),
        other => Err(ApiError::invalid(format!("no route `{other}`"))),
    }
}
