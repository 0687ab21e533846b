//! A chat completion's body: its fields, the output it asks for, and the conversation its
//! messages hold (the system prompt, the earlier turns as artifacts, the new spoken question),
//! each checked before a model is involved.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use audio_engine::lfm2_audio::conversation::REPLY_ID;
use audio_engine::lfm2_audio::{Artifact, ArtifactKind, QUESTION_ID};

use crate::artifact_limits::ArtifactTally;
use crate::audio_io::{unb64, unb64_len};
use crate::error::ApiError;
use crate::tasks::{artifacts_in, ArtifactIn};

/// The body of `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChatBody {
    #[serde(default)]
    pub(super) model: Option<String>,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    modalities: Option<Vec<String>>,
    #[serde(default)]
    audio: Option<AudioParams>,
    #[serde(default)]
    pub(super) stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<Value>,
    #[serde(default)]
    pub(super) max_tokens: Option<usize>,
    #[serde(default)]
    pub(super) max_completion_tokens: Option<usize>,
    #[serde(default)]
    pub(super) seed: Option<u64>,
    #[serde(default)]
    pub(super) temperature: Option<f32>,
    #[serde(default)]
    pub(super) top_k: Option<usize>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    pub(super) busy_timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AudioParams {
    #[serde(default)]
    voice: Option<String>,
    #[serde(default)]
    format: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
    /// OpenAI's assistant audio reference (`{"id"}`), accepted and ignored.
    #[serde(default)]
    audio: Option<Value>,
    /// Our extension: the reply artifact the assistant turn was returned.
    #[serde(default)]
    lfm2_audio_reply: Option<ArtifactIn>,
    #[serde(default)]
    name: Option<String>,
}

/// The WAV bytes of a user message's `input_audio` part (text parts are refused: S2S takes
/// speech).
fn user_audio(m: &ChatMessage, i: usize) -> Result<Vec<u8>, ApiError> {
    let parts = match &m.content {
        Some(Value::Array(p)) => p,
        _ => {
            return Err(ApiError::invalid(format!(
                "messages[{i}]: a user message needs an `input_audio` content part (speech in)"
            )))
        }
    };
    let mut audio = None;
    for (j, p) in parts.iter().enumerate() {
        match p.get("type").and_then(Value::as_str) {
            Some("input_audio") => {
                let ia = p.get("input_audio").ok_or_else(|| {
                    ApiError::invalid(format!("messages[{i}].content[{j}]: `input_audio` missing"))
                })?;
                if let Some(f) = ia.get("format").and_then(Value::as_str) {
                    if f != "wav" {
                        return Err(ApiError::invalid(format!(
                            "messages[{i}].content[{j}]: input_audio format `{f}` is not wav"
                        )));
                    }
                }
                let data = ia.get("data").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid(format!(
                        "messages[{i}].content[{j}]: input_audio.data (base64 WAV) missing"
                    ))
                })?;
                let b = unb64(data)
                    .filter(|b| b.starts_with(b"RIFF"))
                    .ok_or_else(|| {
                        ApiError::invalid(format!(
                            "messages[{i}].content[{j}]: input_audio.data is not a base64 WAV"
                        ))
                    })?;
                if audio.replace(b).is_some() {
                    return Err(ApiError::invalid(format!(
                        "messages[{i}]: one input_audio part per user message"
                    )));
                }
            }
            Some("text") => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}].content[{j}]: text parts are not taken; this model answers \
                     speech (send an input_audio part)"
                )))
            }
            other => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}].content[{j}]: unknown content part type {other:?}"
                )))
            }
        }
    }
    audio.ok_or_else(|| ApiError::invalid(format!("messages[{i}]: no input_audio content part")))
}

/// The chat body's output choices: whether the reply carries audio, and its format; checked
/// before any model is picked.
pub(super) fn chat_output(b: &ChatBody) -> Result<(bool, String), ApiError> {
    let _ = (&b.user, &b.stream_options);
    if b.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid("n must be 1"));
    }
    let modalities = b
        .modalities
        .clone()
        .unwrap_or_else(|| vec!["text".into(), "audio".into()]);
    if let Some(m) = modalities.iter().find(|m| *m != "text" && *m != "audio") {
        return Err(ApiError::invalid(format!(
            "unknown modality `{m}` (text, audio)"
        )));
    }
    let want_audio = modalities.iter().any(|m| m == "audio");
    let audio_format = b
        .audio
        .as_ref()
        .and_then(|a| a.format.clone())
        .unwrap_or_else(|| "wav".into());
    if !["wav", "pcm16"].contains(&audio_format.as_str()) {
        return Err(ApiError::invalid(format!(
            "audio.format `{audio_format}` is not wav or pcm16"
        )));
    }
    if let Some(v) = b.audio.as_ref().and_then(|a| a.voice.as_deref()) {
        if !v.is_empty() && v != "default" {
            return Err(ApiError::invalid(format!(
                "audio.voice `{v}`: speech-to-speech replies have the model's own voice \
                 (leave it out or use \"default\")"
            )));
        }
    }
    Ok((want_audio, audio_format))
}

/// Decoded bytes of a user message's `input_audio` data, from the base64 lengths alone.
fn declared_audio_bytes(m: &ChatMessage) -> usize {
    let Some(Value::Array(parts)) = &m.content else {
        return 0;
    };
    parts
        .iter()
        .filter_map(|p| p.get("input_audio")?.get("data")?.as_str())
        .fold(0usize, |n, d| n.saturating_add(unb64_len(d)))
}

/// The artifacts the earlier turns of `messages` become (each assistant message: the user
/// question before it and its reply), counted from the JSON before anything is decoded.
fn declared_history(messages: &[ChatMessage]) -> ArtifactTally {
    let mut t = ArtifactTally::default();
    let mut question = 0;
    for m in messages {
        match m.role.as_str() {
            "user" => question = declared_audio_bytes(m),
            "assistant" => {
                t.add(std::mem::take(&mut question));
                let reply = m.lfm2_audio_reply.as_ref();
                t.add(
                    reply
                        .and_then(|r| r.payload.as_deref())
                        .map_or(0, unb64_len),
                );
            }
            _ => {}
        }
    }
    t
}

/// A chat body's system prompt, earlier turns (as artifacts) and new question (WAV bytes).
pub(super) type Conversation = (Option<String>, Vec<Artifact>, Vec<u8>);

/// The conversation of a chat body: the system prompt, the earlier turns as artifacts and the
/// new question's WAV bytes.
pub(super) fn chat_conversation(b: &ChatBody) -> Result<Conversation, ApiError> {
    // why: the engine's artifact limits, before any turn is decoded (see
    // crate::artifact_limits).
    declared_history(&b.messages).check()?;
    // The conversation: [system] (user assistant)* user.
    let mut system = None;
    let mut history = Vec::new();
    let mut question = None;
    let mut expect_user = true;
    for (i, m) in b.messages.iter().enumerate() {
        let _ = &m.name;
        match m.role.as_str() {
            "system" | "developer" if i == 0 => {
                system = Some(match &m.content {
                    Some(Value::String(s)) => s.clone(),
                    _ => {
                        return Err(ApiError::invalid(
                            "messages[0]: system content must be a string",
                        ))
                    }
                })
            }
            "user" if expect_user => {
                question = Some(user_audio(m, i)?);
                expect_user = false;
            }
            "assistant" if !expect_user => {
                let _ = &m.audio;
                let mut reply = m.lfm2_audio_reply.clone().ok_or_else(|| {
                    ApiError::invalid(format!(
                        "messages[{i}]: an earlier assistant turn must carry the \
                         `lfm2_audio_reply` its response returned"
                    ))
                })?;
                if reply.id.is_empty() {
                    reply.id = REPLY_ID.into();
                }
                let mut a = artifacts_in(&[reply], None)?;
                history.push(Artifact {
                    id: QUESTION_ID.into(),
                    kind: ArtifactKind::Custom,
                    payload: question.take().unwrap_or_default(),
                    meta: BTreeMap::new(),
                });
                history.append(&mut a);
                expect_user = true;
            }
            r => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}]: role `{r}` out of order (expected [system] then user and \
                     assistant in turn, ending with user)"
                )))
            }
        }
    }
    let question = match (question, expect_user) {
        (Some(q), false) => q,
        _ => {
            return Err(ApiError::invalid(
                "the last message must be a user message with input_audio",
            ))
        }
    };
    Ok((system, history, question))
}
