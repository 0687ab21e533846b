//! A task request turned into the engine's [`Job`]: what each task takes is checked here, before
//! a session is leased.

use axum::body::Bytes;
use axum::http::HeaderMap;

use audio_engine::lfm2_audio::conversation::parse_return_codes;
use audio_engine::lfm2_audio::{
    AsrJob, AsrOptions, Job, S2sOptions, S2sRequest, TtsJob, TtsOptions, QUESTION_ID, RETURN_CODES,
};

use crate::audio_io::wav_from;
use crate::error::ApiError;
use crate::{AppState, Entry};

use super::artifacts::artifacts_in;
use super::body::{parse_json, TaskBody, TaskRequest};
use super::fields::{conversation_key, max_tokens, parse_voice, sampler};

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
    let limit = state.settings.max_tokens;
    let dir = state.audio_dir.as_deref();
    prepare_for(&entry.cfg.task, &entry.language, limit, dir, headers, r)
}

/// [`prepare`] from the few settings it reads: the entry's task and language, the server's
/// `max_tokens` limit and audio directory (so the checks run without a model, e.g. fuzzed).
pub fn prepare_for(
    task: &str,
    language: &str,
    limit: usize,
    dir: Option<&std::path::Path>,
    headers: &HeaderMap,
    r: TaskRequest,
) -> Result<Prepared, ApiError> {
    if let Some(l) = nonempty(&r.language) {
        if l != language {
            return Err(ApiError::invalid(format!(
                "language `{l}` is not this model's (`{language}`)"
            )));
        }
    }
    let allowed: &[&str] = if task == "s2s" { &[RETURN_CODES] } else { &[] };
    if let Some(k) = r.options.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "unknown option `{k}` for task {task} (it takes: {})",
            if allowed.is_empty() {
                "none".to_owned()
            } else {
                allowed.join(", ")
            }
        )));
    }
    match task {
        "s2s" => {
            if nonempty(&r.text).is_some() {
                return Err(ApiError::invalid(
                    "`text`: s2s answers a spoken question; send it as `audio`",
                ));
            }
            if r.voice_id.is_some() {
                return Err(ApiError::invalid("`voice_id` is for tts, not s2s"));
            }
            let audio = nonempty(&r.audio).ok_or_else(|| {
                ApiError::invalid("`audio` (the question, a base64 WAV) is required")
            })?;
            // why: the artifacts' limits are checked before anything is decoded.
            let history = artifacts_in(&r.artifacts, dir)?;
            let question = wav_from(audio, dir, "`audio`")?;
            let first = history
                .iter()
                .find(|a| a.id == QUESTION_ID)
                .map(|a| a.payload.as_slice())
                .unwrap_or(question.as_slice());
            let key = conversation_key(headers, Some(first));
            let d = S2sOptions::default();
            let s2s = S2sOptions {
                max_new_tokens: max_tokens(r.max_tokens, d.max_new_tokens, limit)?,
                audio: sampler(d.audio, r.seed, r.temperature, r.top_k)?,
                ..d
            };
            Ok(Prepared {
                job: Job::S2s(S2sRequest {
                    question: question.into(),
                    history,
                    return_codes: parse_return_codes(&r.options)?,
                    s2s,
                }),
                key,
            })
        }
        "asr" => {
            for (bad, set) in [
                ("text", nonempty(&r.text).is_some()),
                ("voice_id", r.voice_id.is_some()),
                ("seed", r.seed.is_some()),
                ("temperature", r.temperature.is_some()),
                ("top_k", r.top_k.is_some()),
                ("artifacts", !r.artifacts.is_empty()),
            ] {
                if set {
                    return Err(ApiError::invalid(format!(
                        "`{bad}` is not taken by asr (greedy, single request)"
                    )));
                }
            }
            let audio = nonempty(&r.audio)
                .ok_or_else(|| ApiError::invalid("`audio` (a base64 WAV) is required"))?;
            let wav = wav_from(audio, dir, "`audio`")?;
            let d = AsrOptions::default();
            Ok(Prepared {
                job: Job::Asr(AsrJob {
                    audio: wav.into(),
                    options: AsrOptions {
                        max_new_tokens: max_tokens(r.max_tokens, d.max_new_tokens, limit)?,
                        ..d
                    },
                    chunk_seconds: None,
                }),
                key: conversation_key(headers, None),
            })
        }
        _ => {
            if r.audio.is_some() || !r.artifacts.is_empty() {
                return Err(ApiError::invalid(
                    "tts takes `text` only (no `audio`, no artifacts)",
                ));
            }
            let text = nonempty(&r.text)
                .ok_or_else(|| ApiError::invalid("`text` (what to speak) is required"))?;
            let voice = parse_voice(r.voice_id.as_deref())?;
            let d = TtsOptions::default();
            Ok(Prepared {
                job: Job::Tts(TtsJob {
                    text: text.to_owned(),
                    options: TtsOptions {
                        voice,
                        max_new_tokens: max_tokens(r.max_tokens, d.max_new_tokens, limit)?,
                        audio: sampler(d.audio, r.seed, r.temperature, r.top_k)?,
                        ..d
                    },
                }),
                key: conversation_key(headers, None),
            })
        }
    }
}

/// A task route's JSON body checked as the `run` and `stream` handlers check it before a model is
/// involved, for an entry of `task` and language `en` (no server-side paths, `limit` as the
/// server's `max_tokens`). For the fuzz targets (`fuzz/`); not an API.
#[doc(hidden)]
pub fn check_body(task: &str, body: &[u8], limit: usize) -> Result<(), ApiError> {
    let b: TaskBody = parse_json(Ok(Bytes::copy_from_slice(body)))?;
    prepare_for(task, "en", limit, None, &HeaderMap::new(), b.request).map(|_| ())
}
