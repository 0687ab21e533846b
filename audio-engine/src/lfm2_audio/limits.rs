//! The limits on what one request can make the engine hold before the model looks at it, in one
//! place: each is defined once (here, or beside the check that owns it, linked below) and
//! checked before anything proportional to it is allocated or computed.
//!
//! | what | limit | defined | checked | past it |
//! |---|---|---|---|---|
//! | audio of one pass (a question, an ASR input) | [`ModelOptions::max_audio_seconds`](super::ModelOptions::max_audio_seconds), default [`DEFAULT_MAX_AUDIO_SECONDS`] (60 s) | here | the WAV header's length before its samples are decoded; samples handed in directly | [`AudioError::TooLong`](super::AudioError::TooLong) ([`EngineError::Audio`]) |
//! | audio the WAV reader takes by default | [`DEFAULT_MAX_SECONDS`](super::DEFAULT_MAX_SECONDS) (600 s) | `io::audio` | as above, for [`ReadOptions::default`](super::ReadOptions) | as above |
//! | a conversation's steps (prompt + `max_tokens`) | [`CONVERSATION_LIMIT`] (8192) | here | each reply's `steps` meta before any payload is read, then after each question is encoded | [`EngineError::Capacity`] |
//! | text of one TTS request | [`MAX_TTS_TEXT_BYTES`] | here | [`check_tts_text`], before the text is split or tokenized | [`EngineError::Capacity`] |
//! | a system prompt (ASR, S2S, sessions) | [`MAX_SYSTEM_PROMPT_BYTES`] | here | [`check_system_prompt`], before it is tokenized | [`EngineError::Capacity`] |
//! | artifacts of one request | [`MAX_ARTIFACTS`] | here | [`check_artifact_count`] and [`check_artifact_bytes`] from [`check_artifacts`](super::conversation::check_artifacts), before any artifact is read; the same [`check_artifact_count`] by the protocol layers before any is copied or decoded | [`EngineError::Capacity`] |
//! | payload bytes of a request's artifacts, together | [`MAX_ARTIFACT_BYTES`] | here | as above; [`check_artifact_bytes`] by the protocol layers with the lengths they are given, before copying or decoding | [`EngineError::Capacity`] |
//!
//! Every message past a limit names the limit (its constant's name and value), what the request
//! had, and what to do instead. Protocol layers (the C ABI, the HTTP server) refuse the same
//! sizes as early as they can with these constants; the engine's checks hold whatever they do.
//!
//! # Out of memory
//!
//! The one allocation of a request that grows with its budget is the backbone's decode cache:
//! K/V rows for prompt + `max_new_tokens` positions (rounded up to whole blocks of 256), up to
//! [`ModelOptions::context`](super::ModelOptions::context) (default 8192: 24 KiB a position,
//! 192 MiB, for a backbone of 6 attention layers with 8 KV heads of 64; 8 MiB on the tiny test
//! package). It is made whole, before any graph of
//! the reply runs, as an anonymous `MAP_NORESERVE` mapping. When that mapping cannot be made
//! (an address-space limit such as `RLIMIT_AS`, `vm.overcommit_memory = 2`, a full address
//! space) the request fails with an error for which
//! [`EngineError::is_out_of_memory`] is true, naming the bytes and positions
//! (`BackboneError::CacheMemory`, with the OS error as its source). Nothing of the request is
//! kept: the model, and a session that ran it, take the next request as before. The C ABI
//! answers `AUDIOCPP_ERR_OUT_OF_MEMORY`, the HTTP server 503; `tests/out_of_memory.rs`
//! provokes it with `RLIMIT_AS`.
//!
//! Everything else a request allocates is bounded by the model's sizes and by the limits above
//! (graph buffers of at most one prefill block, ggml's work buffer, encoder rows of at most
//! `max_audio_seconds`, Rust vectors), independently of the context. Of those, graph buffers
//! and ggml context pools report failure as [`GgmlError`](crate::ggml::GgmlError) (also
//! `is_out_of_memory`); the rest (Rust's allocations, ggml-cpu's C++ `new` of its work buffer,
//! thread stacks) abort the process when the allocator fails, as every Rust and C++ program
//! does: those sizes are small enough that a process that cannot have them cannot do anything.
//!
//! The mapping reserves address space, not memory: a page becomes memory when a position is
//! first written, so a conversation costs what it has used (that is what lets a large context
//! be cheap). Under memory pressure those pages are ordinary anonymous memory: the kernel swaps
//! them or its OOM killer ends a process, which may be this one (anonymous memory is never
//! `SIGBUS`; only file mappings are, see `GgmlError::FileChanged` for the weights). The engine
//! does not pre-fault the cache, since that would make every request pay its whole capacity;
//! to bound the memory instead, lower [`ModelOptions::context`](super::ModelOptions::context),
//! run under `vm.overcommit_memory = 2` (the kernel then accounts the whole mapping when it is
//! made, so running short is the typed error above, at the start of the request) or give the
//! process a cgroup memory limit.

use crate::lfm2_audio::error::EngineError;

/// Default one-pass audio limit, seconds ([`ModelOptions::max_audio_seconds`](super::ModelOptions::max_audio_seconds)).
pub const DEFAULT_MAX_AUDIO_SECONDS: f64 = 60.0;

/// Steps a conversation's prompt and max_tokens may take together: 8192, the default context
/// ([`ModelOptions::context`](super::ModelOptions::context)). Checked by the conversation
/// protocol (`session::conversation::history`) as soon as a request shows it passed.
pub const CONVERSATION_LIMIT: usize = 8192;

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

/// Refuses a request of `count` artifacts when that is more than [`MAX_ARTIFACTS`], as
/// [`EngineError::Capacity`].
///
/// The count alone is the input, so a protocol layer can refuse a request before it decodes
/// or copies any payload (the C ABI with the count it would reach, the HTTP server with the
/// length of the JSON list).
pub fn check_artifact_count(count: usize) -> Result<(), EngineError> {
    if count > MAX_ARTIFACTS {
        return Err(too_large(
            format!("the request carries {count} artifacts"),
            "MAX_ARTIFACTS",
            MAX_ARTIFACTS,
            "artifacts",
            "leave out the oldest turns",
        ));
    }
    Ok(())
}

/// Refuses `bytes` payload bytes of one request's artifacts together when that is more than
/// [`MAX_ARTIFACT_BYTES`], as [`EngineError::Capacity`].
///
/// As [`check_artifact_count`], for the payload sizes a protocol layer knows before it copies
/// or decodes them (a C length argument, the decoded length of a base64 string).
pub fn check_artifact_bytes(bytes: usize) -> Result<(), EngineError> {
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

        assert!(check_artifact_count(MAX_ARTIFACTS).is_ok());
        let e = check_artifact_count(MAX_ARTIFACTS + 1).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("4097 artifacts"),
            "{e}"
        );
        assert!(check_artifact_bytes(MAX_ARTIFACT_BYTES).is_ok());
        let e = check_artifact_bytes(MAX_ARTIFACT_BYTES + 1).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("MAX_ARTIFACT_BYTES"),
            "{e}"
        );
        let e = check_artifact_bytes(usize::MAX).unwrap_err();
        assert!(
            e.is_capacity() && e.to_string().contains("MAX_ARTIFACT_BYTES"),
            "{e}"
        );
    }
}
