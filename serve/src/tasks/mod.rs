//! audio.cpp's task routes: `POST /v1/tasks/run` and `POST /v1/tasks/stream`, with its request
//! JSON (`{"model", "request": {...}, "busy_timeout_ms"?, "stream_format"?}`), result JSON and
//! stream events. A request goes down once: the handler ([`run()`], [`stream()`]) parses the
//! body ([`body`]), [`prepare()`] turns it into the engine's `Job`, [`start()`] leases a session
//! and starts the work ([`crate::work`]); the outcome comes back as [`result`] JSON, streamed
//! through [`sse`]. The OpenAI routes share these pieces.

pub mod artifacts;
pub mod body;
pub mod fields;
pub mod prepare;
pub mod result;
pub mod run;
pub mod sse;
pub mod start;
pub mod stream;

pub use artifacts::{artifact_json, artifacts_in, declared_artifacts, string_meta};
pub use body::{parse_json, ArtifactIn, TaskBody, TaskRequest};
pub use fields::{context, conversation_key, max_tokens, parse_voice, sampler, sampling_options};
pub use prepare::{
    check_body, engine_request, prepare, prepare_for, resolve_body, resolve_for, test_context,
    Prepared,
};
pub use result::{event_json, record, result_json};
pub use run::run;
pub use sse::{error_frame, first_message, sse_frame, stream_response, SseCtx, PCM, SSE};
pub use start::start;
pub use stream::stream;
