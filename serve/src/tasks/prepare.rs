//! A task request turned into the engine's [`Job`]: the JSON becomes the engine's [`Request`]
//! (audio and artifacts decoded within the server's limits, options by name) and the engine
//! checks it, before a session is leased. The route adds no default, range or rule of its own.

use axum::body::Bytes;
use axum::http::HeaderMap;

use audio_engine::lfm2_audio::{
    AudioInput, Job, Request, RequestContext, ResolvedRequest, Task, QUESTION_ID,
};

use crate::audio_io::wav_from;
use crate::error::ApiError;
use crate::{AppState, Entry};

use super::artifacts::artifacts_in;
use super::body::{parse_json, TaskBody, TaskRequest};
use super::fields::conversation_key;

/// A task request turned into an engine job for `entry`.
pub struct Prepared {
    pub job: Job,
    pub key: Option<u64>,
}

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// Builds the job of a task request.
pub fn prepare(
    state: &AppState,
    entry: &Entry,
    headers: &HeaderMap,
    r: TaskRequest,
) -> Result<Prepared, ApiError> {
    let ctx = super::fields::context(state, entry);
    let dir = state.audio_dir.as_deref();
    prepare_for(&entry.cfg.task, &ctx, dir, headers, r)
}

/// The engine's request of a task request for `task` (the audio and artifacts decoded from
/// base64 or read under `dir`); nothing is checked here that the engine checks.
pub fn engine_request(
    task: &str,
    dir: Option<&std::path::Path>,
    r: &TaskRequest,
) -> Result<Request, ApiError> {
    let task = Task::from_name(task)
        .ok_or_else(|| ApiError::internal(format!("model entry has unknown task `{task}`")))?;
    // why: the artifacts' limits are checked before anything is decoded.
    let history = artifacts_in(&r.artifacts, dir)?;
    let audio = match nonempty(&r.audio) {
        Some(a) => Some(AudioInput::Wav(wav_from(a, dir, "`audio`")?)),
        None => None,
    };
    Ok(Request {
        task,
        text: r.text.clone(),
        text_language: None,
        audio,
        voice: r.voice_id.clone(),
        history,
        system_prompt: None,
        options: {
            let mut m = r.option_map()?;
            if let Some(l) = nonempty(&r.language) {
                m.insert("language".into(), serde_json::Value::from(l).into());
            }
            m
        },
    })
}

/// The engine's checked request for a task request (for the option table's tests and the fuzz
/// targets: the checks run without a model).
pub fn resolve_for(
    task: &str,
    ctx: &RequestContext,
    dir: Option<&std::path::Path>,
    r: &TaskRequest,
) -> Result<ResolvedRequest, ApiError> {
    Ok(engine_request(task, dir, r)?.resolve(ctx)?)
}

/// [`prepare`] from the few settings it reads (so the checks run without a model, e.g. fuzzed).
pub fn prepare_for(
    task: &str,
    ctx: &RequestContext,
    dir: Option<&std::path::Path>,
    headers: &HeaderMap,
    r: TaskRequest,
) -> Result<Prepared, ApiError> {
    let job = resolve_for(task, ctx, dir, &r)?.job;
    let key = match &job {
        Job::S2s(req) => {
            let first = req
                .history
                .iter()
                .find(|a| a.id == QUESTION_ID)
                .map(|a| a.payload.as_slice())
                .or(match &req.question {
                    AudioInput::Wav(bytes) => Some(bytes.as_slice()),
                    AudioInput::Pcm { .. } => None,
                });
            conversation_key(headers, first)
        }
        _ => conversation_key(headers, None),
    };
    Ok(Prepared { job, key })
}

/// The context of a model of language `en` whose one-pass limit is 60 s, under a server limit
/// of `limit` tokens: what [`check_body`] and the tests resolve requests with.
pub fn test_context(limit: usize) -> RequestContext {
    RequestContext {
        max_tokens_limit: Some(limit),
        max_input_seconds: Some(60.0),
        ..RequestContext::new("en", 60.0)
    }
}

/// A task route's JSON body checked as the `run` and `stream` handlers check it before a model is
/// involved, for an entry of `task` and language `en` (no server-side paths, `limit` as the
/// server's `max_tokens`). For the fuzz targets (`fuzz/`); not an API.
#[doc(hidden)]
pub fn check_body(task: &str, body: &[u8], limit: usize) -> Result<(), ApiError> {
    resolve_body(task, body, limit).map(|_| ())
}

/// [`check_body`], returning the engine's checked request. For the option table's tests; not
/// an API.
#[doc(hidden)]
pub fn resolve_body(task: &str, body: &[u8], limit: usize) -> Result<ResolvedRequest, ApiError> {
    let b: TaskBody = parse_json(Ok(Bytes::copy_from_slice(body)))?;
    resolve_for(task, &test_context(limit), None, &b.request)
}
