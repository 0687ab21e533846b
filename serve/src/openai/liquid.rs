//! Liquid's own dialect of `POST /v1/chat/completions`, as LiquidAI's `llama-liquid-audio-server`
//! speaks it and LiveKit's `livekit-plugins-liquidai` (its STT and TTS) sends it.
//!
//! A body in this dialect carries `reset_context` (Liquid's server keeps a context between
//! requests unless told to reset it; this server keeps none, so only `true` is taken). The task
//! comes from the system prompt, as the model was trained:
//! - `Perform ASR.` with one spoken user message: a transcription, its text in `content`;
//! - `Perform TTS. Use the {US|UK} {male|female} voice.` with one typed user message: speech in
//!   that voice;
//! - anything else: a speech-to-speech turn, as in OpenAI's dialect.
//!
//! Streamed audio is sent twice in each chunk's `delta`: in OpenAI's shape (`audio.data`, s16le)
//! and in Liquid's (`audio_chunk.data`: base64 little-endian float32 PCM, 24 kHz mono), which is
//! the one Liquid's clients read. Model ids that this server does not serve fall back to the
//! task's first entry, since Liquid's clients name the model family (`LFM2.5-Audio`), not an id.

use audio_engine::lfm2_audio::{AsrOptions, AudioInput, Request, Task, Voice};

use crate::error::ApiError;
use crate::state::{AppState, Entry};
use crate::tasks::sampling_options;

use super::chat_body::{ChatBody, Question};

/// What a chat body asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// A speech-to-speech turn (OpenAI's dialect, or Liquid's without a task prompt).
    S2s,
    /// Liquid's `Perform ASR.`.
    Asr,
    /// Liquid's `Perform TTS. Use the ... voice.`.
    Tts(Voice),
}

impl Route {
    /// The entry task it runs on.
    pub(super) fn task(self) -> &'static str {
        match self {
            Route::S2s => "s2s",
            Route::Asr => "asr",
            Route::Tts(_) => "tts",
        }
    }
}

/// Whether `b` is in Liquid's dialect (it carries `reset_context`), and what it asks for: its
/// task from the system prompt in that dialect, speech to speech otherwise.
/// `reset_context: false` is refused, since this server keeps no context between requests.
pub(super) fn dialect(b: &ChatBody, system: Option<&str>) -> Result<(bool, Route), ApiError> {
    match b.reset_context {
        None => Ok((false, Route::S2s)),
        Some(true) => Ok((true, route(system)?)),
        Some(false) => Err(ApiError::invalid(
            "reset_context: false asks the server to continue a context it kept; this server \
             keeps none (the client carries the conversation): send every message with \
             reset_context: true",
        )),
    }
}

/// The route of a Liquid-dialect body from its system prompt (`None`: speech to speech).
fn route(system: Option<&str>) -> Result<Route, ApiError> {
    let Some(s) = system.map(str::trim) else {
        return Ok(Route::S2s);
    };
    // why the engine's own prompt: the one its ASR task was trained with.
    if s == AsrOptions::default().system_prompt {
        return Ok(Route::Asr);
    }
    if s.starts_with("Perform TTS.") {
        return Voice::ALL
            .into_iter()
            .find(|v| v.system_prompt() == s)
            .map(Route::Tts)
            .ok_or_else(|| {
                let prompts: Vec<String> = Voice::ALL.iter().map(|v| v.system_prompt()).collect();
                ApiError::invalid(format!(
                    "unknown TTS system prompt `{s}`; the model knows: {}",
                    prompts.join(" | ")
                ))
            });
    }
    Ok(Route::S2s)
}

/// The entry serving `route`: the named one when this server has it, else the task's first
/// (Liquid's clients send the family name).
pub(super) fn entry(
    state: &AppState,
    model: Option<&str>,
    route: Route,
) -> Result<Entry, ApiError> {
    let named = model.filter(|m| state.entries.iter().any(|e| e.cfg.id == *m));
    state.entry_for(named, route.task())
}

/// The engine request of an ASR or TTS body: its one user message, with the body's
/// `max_tokens`, `seed`, `temperature` and `top_k`.
pub(super) fn task_request(
    b: &ChatBody,
    route: Route,
    history_len: usize,
    question: Question,
) -> Result<Request, ApiError> {
    if history_len > 0 {
        return Err(ApiError::invalid(format!(
            "a `{}` request takes one user message, not a conversation",
            route.task()
        )));
    }
    let options = sampling_options(
        b.max_completion_tokens.or(b.max_tokens),
        b.seed,
        b.temperature,
        b.top_k,
    );
    match (route, question) {
        (Route::Asr, Question::Spoken(wav)) => Ok(Request {
            audio: Some(AudioInput::Wav(wav)),
            options,
            ..Request::new(Task::Asr)
        }),
        (Route::Tts(voice), Question::Typed(text)) => Ok(Request {
            text: Some(text),
            voice: Some(voice.id().into()),
            options,
            ..Request::new(Task::Tts)
        }),
        (Route::Asr, Question::Typed(_)) => Err(ApiError::invalid(
            "`Perform ASR.` transcribes speech: the user message needs an input_audio part",
        )),
        (Route::Tts(_), Question::Spoken(_)) => Err(ApiError::invalid(
            "`Perform TTS.` speaks text: the user message needs text content",
        )),
        (_, Question::Tool(_)) => Err(ApiError::invalid(
            "Liquid's ASR and TTS routes take no tool messages",
        )),
        (Route::S2s, _) => Err(ApiError::internal("a speech-to-speech body as a task")),
    }
}

/// Liquid's audio: little-endian float32 samples.
pub(super) fn f32le(samples: &[f32]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_prompt_picks_the_task() {
        assert_eq!(route(Some("Perform ASR.")).unwrap(), Route::Asr);
        assert_eq!(route(Some(" Perform ASR. ")).unwrap(), Route::Asr);
        assert_eq!(
            route(Some("Perform TTS. Use the UK female voice.")).unwrap(),
            Route::Tts(Voice::UkFemale)
        );
        assert_eq!(
            route(Some("Perform TTS. Use the US male voice.")).unwrap(),
            Route::Tts(Voice::UsMale)
        );
        assert_eq!(route(None).unwrap(), Route::S2s);
        assert_eq!(
            route(Some("You are a helpful assistant.")).unwrap(),
            Route::S2s
        );
        let e = route(Some("Perform TTS. Use the French voice.")).unwrap_err();
        assert!(e.body()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("UK female"));
    }

    #[test]
    fn float_samples_are_little_endian_f32() {
        let b = f32le(&[1.0, -0.5]);
        assert_eq!(b, [0, 0, 0x80, 0x3f, 0, 0, 0, 0xbf]);
    }
}
