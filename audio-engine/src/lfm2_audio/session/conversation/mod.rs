//! Multi-turn speech-to-speech with client-carried history: the protocol layer.
//!
//! The session keeps nothing between requests. A request carries its earlier turns as input
//! artifacts, per turn in order an [`QUESTION_ID`] (the question's WAV bytes, or a typed
//! question's text) and the [`REPLY_ID`] artifact that turn's result returned (request option
//! `return_codes`; or a text-only reply's text: see [`is_text`]). Each
//! turn's prompt replays the whole conversation ([`ChatMarkup::build`]), within
//! [`CONVERSATION_LIMIT`] steps of prompt and max_tokens together.
//!
//! This module is pure data and validation: [`artifact`] writes and reads reply artifacts,
//! [`history`] reads a request's turns and tracks the limit, [`prompt`] lays out the prompt,
//! [`truncate`] cuts a reply where its listener interrupted it, and [`check_artifacts`] says
//! which task takes which artifacts (the options are the request model's, `api::options`).

pub mod artifact;
pub mod history;
pub mod prompt;
pub mod truncate;

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::limits;

pub use artifact::{
    check_reply_meta, decode_reply, encode_reply, meta_from_json, meta_from_text, meta_to_text,
    Artifact, ArtifactKind, Reply, ReplyFormat, ReplyMeta, ReplyStep, FRAME_MARK, QUESTION_ID,
    REPLY_FORMAT, REPLY_ID, REPLY_META_KEYS,
};
pub use history::{
    check_room, is_text, is_tool_result, read_history, ConversationBudget, History, HistoryConfig,
    Question, Turn, CONVERSATION_LIMIT,
};
pub use prompt::{ChatMarkup, QuestionLayout};
pub use truncate::{reply_audio_ms, truncate_reply, FRAME_MS};

/// The request option that makes a result return its reply artifact.
pub const RETURN_CODES: &str = "return_codes";

/// The LFM2-Audio tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// Speech recognition.
    Asr,
    /// Speech synthesis.
    Tts,
    /// Speech-to-speech: the only task that takes history and `return_codes`.
    S2s,
}

impl Task {
    /// The three tasks.
    pub const ALL: [Task; 3] = [Task::Asr, Task::Tts, Task::S2s];

    /// The task a name spells (`asr`, `tts`, `s2s`).
    pub fn from_name(name: &str) -> Option<Task> {
        Task::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The task's name as requests spell it.
    pub fn name(self) -> &'static str {
        match self {
            Task::Asr => "asr",
            Task::Tts => "tts",
            Task::S2s => "s2s",
        }
    }
}

/// Refuses more than [`MAX_ARTIFACTS`](limits::MAX_ARTIFACTS) artifacts, or payloads over
/// [`MAX_ARTIFACT_BYTES`](limits::MAX_ARTIFACT_BYTES) together, as [`EngineError::Capacity`].
/// Reads only the lengths.
fn check_artifact_sizes(artifacts: &[Artifact]) -> Result<(), EngineError> {
    limits::check_artifact_count(artifacts.len())?;
    limits::check_artifact_bytes(
        artifacts
            .iter()
            .fold(0usize, |n, a| n.saturating_add(a.payload.len())),
    )
}

/// Checks a request's artifacts against what `task` takes of the conversation protocol: more
/// than [`MAX_ARTIFACTS`](crate::lfm2_audio::limits::MAX_ARTIFACTS) of them, or payloads over
/// [`MAX_ARTIFACT_BYTES`](crate::lfm2_audio::limits::MAX_ARTIFACT_BYTES) together, are
/// [`EngineError::Capacity`]; ASR and TTS turn away every `lfm2_audio.*` artifact, S2S any but
/// questions and replies (both [`EngineError::InvalidRequest`]). Returns whether the request
/// carries earlier turns; the turns themselves are read by [`read_history`].
pub fn check_artifacts(task: Task, artifacts: &[Artifact]) -> Result<bool, EngineError> {
    check_artifact_sizes(artifacts)?;
    match task {
        Task::Asr | Task::Tts => {
            // why: a conversation's artifacts sent to another task would be ignored silently.
            if let Some((i, a)) = artifacts
                .iter()
                .enumerate()
                .find(|(_, a)| a.id.starts_with("lfm2_audio."))
            {
                return Err(EngineError::InvalidRequest(format!(
                    "input artifact {i} (`{}`) is conversation history, which only s2s takes; \
                     {} answers a single request",
                    a.id,
                    task.name()
                )));
            }
            Ok(false)
        }
        Task::S2s => {
            if let Some((i, a)) = artifacts
                .iter()
                .enumerate()
                .find(|(_, a)| a.id != QUESTION_ID && a.id != REPLY_ID)
            {
                return Err(EngineError::InvalidRequest(format!(
                    "input artifact {i} has unknown id `{}`; s2s takes only {QUESTION_ID} and \
                     {REPLY_ID} artifacts",
                    a.id
                )));
            }
            Ok(!artifacts.is_empty())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn art(n: usize) -> Artifact {
        Artifact {
            id: "x".into(),
            kind: ArtifactKind::Custom,
            payload: vec![0; n],
            meta: Default::default(),
        }
    }

    #[test]
    fn artifact_sizes_hold_at_the_limits_and_refuse_one_past_them() {
        let many: Vec<Artifact> = (0..limits::MAX_ARTIFACTS).map(|_| art(0)).collect();
        assert!(check_artifact_sizes(&many).is_ok());
        let mut more = many;
        more.push(art(0));
        let e = check_artifact_sizes(&more).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("MAX_ARTIFACTS"),
            "{e}"
        );

        // why: calloc'd zeros, never touched, so the test costs no memory.
        let big = vec![art(limits::MAX_ARTIFACT_BYTES - 1), art(1)];
        assert!(check_artifact_sizes(&big).is_ok());
        let e = check_artifact_sizes(&[art(limits::MAX_ARTIFACT_BYTES), art(1)]).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("MAX_ARTIFACT_BYTES"),
            "{e}"
        );
    }
}
