//! Turn detection: the socket's input audio goes through here as it arrives, and server VAD
//! (when the session asks for it) says where speech starts and stops, on the timeline of all
//! audio the socket received. The detector is the workspace's `voice-activity` crate (Silero
//! VAD by default); the events, barge-in and the commit of `[audio_start_ms, audio_end_ms]` are
//! the socket loop's.

use serde_json::{json, Value};
use voice_activity::{Segmenter, VadConfig, VadEvent};

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
    /// The speaker paused (the server's speculation pause, shorter than the silence duration):
    /// if the silence holds, the turn ends at `audio_end_ms`.
    Paused {
        /// Where the turn's audio would end.
        audio_end_ms: u64,
    },
    /// Speech came back after a pause.
    Resumed,
}

/// The socket's turn detector: none for manual commits.
#[derive(Default)]
pub struct Turns {
    detector: Option<(VadSettings, Segmenter)>,
    /// Where the detector's timeline starts on the socket's (ms of audio received before it).
    base_ms: u64,
}

impl Turns {
    /// A detector for `settings` on input at `sample_rate` whose timeline starts at `base_ms`
    /// of the socket's audio, reporting pauses of `pause_ms` (when shorter than the silence
    /// duration; 0: none); an error event for settings the detector refuses.
    pub fn new(
        settings: Option<&VadSettings>,
        sample_rate: u32,
        base_ms: u64,
        pause_ms: u32,
    ) -> Result<Turns, EventError> {
        let detector = match settings {
            None => None,
            Some(s) => {
                let config = VadConfig {
                    threshold: s.threshold,
                    prefix_padding_ms: s.prefix_padding_ms,
                    silence_duration_ms: s.silence_duration_ms,
                };
                let mut seg = Segmenter::new(config, sample_rate).map_err(|e| {
                    EventError::invalid("invalid_value", e.to_string())
                        .at("session.audio.input.turn_detection")
                })?;
                seg.set_pause_ms(
                    (pause_ms > 0 && pause_ms < s.silence_duration_ms).then_some(pause_ms),
                );
                Some((s.clone(), seg))
            }
        };
        Ok(Turns { detector, base_ms })
    }

    /// The settings in use (`None`: manual commits).
    pub fn settings(&self) -> Option<&VadSettings> {
        self.detector.as_ref().map(|(s, _)| s)
    }

    /// Hears `samples` (PCM16 at the input rate); the turns they start or end.
    pub fn push(&mut self, samples: &[i16]) -> Vec<TurnEvent> {
        let Some((_, seg)) = self.detector.as_mut() else {
            return Vec::new();
        };
        let f: Vec<f32> = samples.iter().map(|&s| f32::from(s) / 32768.0).collect();
        let base = self.base_ms;
        seg.push(&f)
            .into_iter()
            .map(|e| match e {
                VadEvent::SpeechStarted { audio_start_ms } => TurnEvent::SpeechStarted {
                    audio_start_ms: base + audio_start_ms,
                },
                VadEvent::SpeechStopped { audio_end_ms } => TurnEvent::SpeechStopped {
                    audio_end_ms: base + audio_end_ms,
                },
                VadEvent::Paused { audio_end_ms } => TurnEvent::Paused {
                    audio_end_ms: base + audio_end_ms,
                },
                VadEvent::Resumed => TurnEvent::Resumed,
            })
            .collect()
    }

    /// Whether the speaker is talking now.
    pub fn in_speech(&self) -> bool {
        self.detector.as_ref().is_some_and(|(_, s)| s.in_speech())
    }

    /// Forgets the audio heard so far (after a commit or a clear): the timeline starts again
    /// at `base_ms` of the socket's audio.
    pub fn reset(&mut self, base_ms: u64) {
        if let Some((_, s)) = self.detector.as_mut() {
            s.reset();
        }
        self.base_ms = base_ms;
    }
}
