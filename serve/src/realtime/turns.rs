//! Turn detection: the socket's input audio goes through here as it arrives, and server VAD
//! (when the session asks for it) says where speech starts and stops.
//!
//! The detector is the workspace's voice-activity crate once it lands; until then a session
//! asking for `server_vad` is refused with an error event and keeps manual commits
//! (`turn_detection: null`). Everything else (the events, barge-in, the commit of
//! `[audio_start_ms, audio_end_ms]`) is in the socket loop and does not change when it comes.

use serde_json::{json, Value};

use super::error::EventError;

/// `server_vad`'s settings, as `session.update` gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct VadSettings {
    /// Speech probability above which a frame is speech (0..1).
    pub threshold: f32,
    /// Audio kept before the detected start of speech, ms.
    pub prefix_padding_ms: u32,
    /// Silence that ends a turn, ms.
    pub silence_duration_ms: u32,
    /// Whether the end of a turn starts a response by itself.
    pub create_response: bool,
    /// Whether speech during a response cancels it (barge-in).
    pub interrupt_response: bool,
}

impl Default for VadSettings {
    /// The OpenAI API's defaults.
    fn default() -> Self {
        VadSettings {
            threshold: 0.5,
            prefix_padding_ms: 300,
            silence_duration_ms: 500,
            create_response: true,
            interrupt_response: true,
        }
    }
}

impl VadSettings {
    /// The `turn_detection` object sessions echo.
    pub fn json(&self) -> Value {
        json!({
            "type": "server_vad",
            "threshold": self.threshold,
            "prefix_padding_ms": self.prefix_padding_ms,
            "silence_duration_ms": self.silence_duration_ms,
            "create_response": self.create_response,
            "interrupt_response": self.interrupt_response,
        })
    }
}

/// Where speech starts or stops, in ms of all audio the socket received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEvent {
    /// Speech began (the prefix padding included).
    SpeechStarted {
        /// Where the turn's audio begins.
        audio_start_ms: u64,
    },
    /// The speaker fell silent for the silence duration.
    SpeechStopped {
        /// Where the turn's audio ends.
        audio_end_ms: u64,
    },
}

/// The socket's turn detector: `None` for manual commits.
#[derive(Default)]
pub struct Turns {
    settings: Option<VadSettings>,
}

impl Turns {
    /// A detector for `settings` on input at `sample_rate`; an error event when server VAD is
    /// not available.
    pub fn new(settings: Option<&VadSettings>, _sample_rate: u32) -> Result<Turns, EventError> {
        match settings {
            None => Ok(Turns { settings: None }),
            Some(_) => Err(EventError::invalid(
                "turn_detection_unavailable",
                "server_vad is not available in this build of the server yet: use \
                 turn_detection null and commit the input audio buffer yourself",
            )
            .at("session.audio.input.turn_detection")),
        }
    }

    /// The settings in use (`None`: manual commits).
    pub fn settings(&self) -> Option<&VadSettings> {
        self.settings.as_ref()
    }

    /// Hears `samples` (PCM16 at the input rate); the turns they start or end.
    pub fn push(&mut self, _samples: &[i16]) -> Vec<TurnEvent> {
        Vec::new()
    }

    /// Whether the speaker is talking now.
    pub fn in_speech(&self) -> bool {
        false
    }

    /// Forgets the audio heard so far (after a `clear`).
    pub fn reset(&mut self) {}
}
