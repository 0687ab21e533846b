//! The limits on what one request can make the engine hold before the model looks at it, in one
//! place: each is defined once (here, or beside the check that owns it, linked below) and
//! checked before anything proportional to it is allocated or computed.
//!
//! | what | limit | defined | checked | past it |
//! |---|---|---|---|---|
//! | audio of one pass (a question, an ASR input) | [`ModelOptions::max_audio_seconds`](super::ModelOptions::max_audio_seconds), default [`DEFAULT_MAX_AUDIO_SECONDS`] (60 s) | `model::engine` | the WAV header's length before its samples are decoded; samples handed in directly | [`AudioError::TooLong`](super::AudioError::TooLong) ([`EngineError::Audio`]) |
//! | audio the WAV reader takes by default | [`DEFAULT_MAX_SECONDS`](super::DEFAULT_MAX_SECONDS) (600 s) | `io::audio` | as above, for [`ReadOptions::default`](super::ReadOptions) | as above |
//! | a conversation's steps (prompt + `max_tokens`) | [`CONVERSATION_LIMIT`] (8192) | `session::conversation::history` | each reply's `steps` meta before any payload is read, then after each question is encoded | [`EngineError::Capacity`] |
//! | text of one TTS request | [`MAX_TTS_TEXT_BYTES`] | here | [`check_tts_text`], before the text is split or tokenized | [`EngineError::Capacity`] |
//! | a system prompt (ASR, S2S, sessions) | [`MAX_SYSTEM_PROMPT_BYTES`] | here | [`check_system_prompt`], before it is tokenized | [`EngineError::Capacity`] |
//! | artifacts of one request | [`MAX_ARTIFACTS`] | here | [`check_artifact_limits`] (from [`check_artifacts`](super::conversation::check_artifacts)), before any artifact is read | [`EngineError::Capacity`] |
//! | payload bytes of a request's artifacts, together | [`MAX_ARTIFACT_BYTES`] | here | as above | [`EngineError::Capacity`] |
//!
//! Every message past a limit names the limit (its constant's name and value), what the request
//! had, and what to do instead. Protocol layers (the C ABI, the HTTP server) refuse the same
//! sizes as early as they can with these constants; the engine's checks hold whatever they do.

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::session::conversation::Artifact;

pub use crate::lfm2_audio::model::engine::DEFAULT_MAX_AUDIO_SECONDS;
pub use crate::lfm2_audio::session::conversation::CONVERSATION_LIMIT;

/// Longest text one TTS request takes, in UTF-8 bytes: 64 KiB, about 10 000 English words or
/// an hour of speech. The text is split into chunks that are generated one after another, so
/// nothing else bounds how much a single request asks for; longer texts are several requests.
pub const MAX_TTS_TEXT_BYTES: usize = 64 << 10;

/// Longest system prompt, in UTF-8 bytes: 32 KiB, about 8 000 tokens of English (4 bytes a
/// token), the whole default context ([`ModelOptions::context`](super::ModelOptions::context),
/// 8192 positions); a longer one could not leave room for a turn.
pub const MAX_SYSTEM_PROMPT_BYTES: usize = 32 << 10;

/// Most artifacts one request carries: 4096. Every turn of a conversation is two artifacts (its
/// question and its reply) and takes at least four markup steps (`<|im_end|>` and
/// `<|im_start|>` after its question and after its reply), so a conversation within
/// [`CONVERSATION_LIMIT`] has fewer than `CONVERSATION_LIMIT / 4` turns, that is fewer than
/// `CONVERSATION_LIMIT / 2` artifacts.
pub const MAX_ARTIFACTS: usize = CONVERSATION_LIMIT / 2;

/// Most payload bytes one request's artifacts carry together: 256 MiB. A conversation within
/// [`CONVERSATION_LIMIT`] holds at most 8192 encoder rows of question audio (12.5 a second),
/// 655 s; as 48 kHz stereo 32-bit float WAVs that is 252 MB, and its replies' codes take under
/// 300 KB. A request carrying more could never be a conversation the engine can answer.
pub const MAX_ARTIFACT_BYTES: usize = 256 << 20;

fn too_large(
    what: String,
    limit_name: &str,
    limit: usize,
    unit: &str,
    advice: &str,
) -> EngineError {
    EngineError::Capacity(format!(
        "{what}, over the limit of {limit} {unit} ({limit_name}); {advice}"
    ))
}

/// Refuses a TTS text longer than [`MAX_TTS_TEXT_BYTES`] as [`EngineError::Capacity`].
pub fn check_tts_text(text: &str) -> Result<(), EngineError> {
    if text.len() > MAX_TTS_TEXT_BYTES {
        return Err(too_large(
            format!("the text to speak is {} bytes", text.len()),
            "MAX_TTS_TEXT_BYTES",
            MAX_TTS_TEXT_BYTES,
            "bytes",
            "send it as several requests",
        ));
    }
    Ok(())
}

/// Refuses a system prompt longer than [`MAX_SYSTEM_PROMPT_BYTES`] as [`EngineError::Capacity`].
pub fn check_system_prompt(system_prompt: &str) -> Result<(), EngineError> {
    if system_prompt.len() > MAX_SYSTEM_PROMPT_BYTES {
        return Err(too_large(
            format!("the system prompt is {} bytes", system_prompt.len()),
            "MAX_SYSTEM_PROMPT_BYTES",
            MAX_SYSTEM_PROMPT_BYTES,
            "bytes",
            "shorten it",
        ));
    }
    Ok(())
}

/// Refuses more than [`MAX_ARTIFACTS`] artifacts, or payloads over [`MAX_ARTIFACT_BYTES`]
/// together, as [`EngineError::Capacity`]. Reads only the lengths.
pub fn check_artifact_limits(artifacts: &[Artifact]) -> Result<(), EngineError> {
    if artifacts.len() > MAX_ARTIFACTS {
        return Err(too_large(
            format!("the request carries {} artifacts", artifacts.len()),
            "MAX_ARTIFACTS",
            MAX_ARTIFACTS,
            "artifacts",
            "leave out the oldest turns",
        ));
    }
    let bytes = artifacts
        .iter()
        .fold(0usize, |n, a| n.saturating_add(a.payload.len()));
    if bytes > MAX_ARTIFACT_BYTES {
        return Err(too_large(
            format!("the request's artifacts carry {bytes} payload bytes"),
            "MAX_ARTIFACT_BYTES",
            MAX_ARTIFACT_BYTES,
            "bytes",
            "leave out the oldest turns or send questions at a lower sample rate",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lfm2_audio::session::conversation::ArtifactKind;

    fn art(n: usize) -> Artifact {
        Artifact {
            id: "x".into(),
            kind: ArtifactKind::Custom,
            payload: vec![0; n],
            meta: Default::default(),
        }
    }

    #[test]
    fn limits_hold_at_the_value_and_refuse_one_past_it() {
        assert!(check_tts_text(&"a".repeat(MAX_TTS_TEXT_BYTES)).is_ok());
        let e = check_tts_text(&"a".repeat(MAX_TTS_TEXT_BYTES + 1)).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("MAX_TTS_TEXT_BYTES"),
            "{e}"
        );

        assert!(check_system_prompt(&"a".repeat(MAX_SYSTEM_PROMPT_BYTES)).is_ok());
        let e = check_system_prompt(&"a".repeat(MAX_SYSTEM_PROMPT_BYTES + 1)).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("MAX_SYSTEM_PROMPT_BYTES"),
            "{e}"
        );

        let many: Vec<Artifact> = (0..MAX_ARTIFACTS).map(|_| art(0)).collect();
        assert!(check_artifact_limits(&many).is_ok());
        let mut more = many;
        more.push(art(0));
        let e = check_artifact_limits(&more).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("MAX_ARTIFACTS"),
            "{e}"
        );

        // why: calloc'd zeros, never touched, so the test costs no memory.
        let big = vec![art(MAX_ARTIFACT_BYTES - 1), art(1)];
        assert!(check_artifact_limits(&big).is_ok());
        let e = check_artifact_limits(&[art(MAX_ARTIFACT_BYTES), art(1)]).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("MAX_ARTIFACT_BYTES"),
            "{e}"
        );
    }
}
