//! Turn detection: the socket's input audio goes through here as it arrives, and the session's
//! `turn_detection` (when it asks for one) says where speech starts and stops, on the timeline
//! of all audio the socket received. The events, barge-in and the commit of
//! `[audio_start_ms, audio_end_ms]` are the socket loop's.
//!
//! Two modes, [`TurnDetection`]: `server_vad` (a turn ends after a fixed silence) and
//! `semantic_vad` (a turn ends when the speaker sounds done). Both run a [`TurnDetector`]:
//! today that is [`SilenceDetector`], the workspace's `voice-activity` segmenter (Silero VAD by
//! default) with a silence that ends the turn. **`semantic_vad` is interim**: until the
//! end-of-turn model lands, it is the same segmenter with a silence that depends on its
//! `eagerness` ([`Eagerness::silence_ms`]); nothing in it judges whether the speech sounds
//! finished. The model plugs in as another [`TurnDetector`] chosen in [`Turns::new`].

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
            // why null: no idle timeout is implemented; a client's value is not claimed.
            "idle_timeout_ms": null,
        })
    }
}

/// `semantic_vad`'s `eagerness`: how readily a turn ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eagerness {
    /// Waits longest for the speaker to go on.
    Low,
    /// Between the two.
    Medium,
    /// Ends a turn soonest.
    High,
    /// The API's default (medium).
    Auto,
}

impl Eagerness {
    /// The API's name.
    pub fn name(self) -> &'static str {
        match self {
            Eagerness::Low => "low",
            Eagerness::Medium => "medium",
            Eagerness::High => "high",
            Eagerness::Auto => "auto",
        }
    }

    /// The value of the API's name.
    pub fn parse(s: &str) -> Option<Eagerness> {
        Some(match s {
            "low" => Eagerness::Low,
            "medium" => Eagerness::Medium,
            "high" => Eagerness::High,
            "auto" => Eagerness::Auto,
            _ => return None,
        })
    }

    /// The silence that ends a turn in the interim `semantic_vad` (no end-of-turn model yet):
    /// `auto`/`medium` the same as `server_vad`'s default, `low` longer, `high` shorter.
    pub fn silence_ms(self) -> u32 {
        match self {
            Eagerness::Low => 800,
            Eagerness::Medium | Eagerness::Auto => 500,
            Eagerness::High => 250,
        }
    }
}

/// `semantic_vad`'s settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticSettings {
    /// How readily a turn ends.
    pub eagerness: Eagerness,
    /// Whether the end of a turn starts a response by itself.
    pub create_response: bool,
    /// Whether speech during a response cancels it (barge-in).
    pub interrupt_response: bool,
}

impl Default for SemanticSettings {
    /// The OpenAI API's defaults.
    fn default() -> Self {
        SemanticSettings {
            eagerness: Eagerness::Auto,
            create_response: true,
            interrupt_response: true,
        }
    }
}

/// A session's turn detection (`None` in the session: manual commits).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnDetection {
    /// `server_vad`: a turn ends after a fixed silence.
    Server(VadSettings),
    /// `semantic_vad`: a turn ends when the speaker sounds done (interim: a silence set by
    /// its eagerness, see the module's doc).
    Semantic(SemanticSettings),
}

impl TurnDetection {
    /// Whether the end of a turn starts a response by itself.
    pub fn create_response(&self) -> bool {
        match self {
            TurnDetection::Server(s) => s.create_response,
            TurnDetection::Semantic(s) => s.create_response,
        }
    }

    /// Whether speech during a response cancels it.
    pub fn interrupt_response(&self) -> bool {
        match self {
            TurnDetection::Server(s) => s.interrupt_response,
            TurnDetection::Semantic(s) => s.interrupt_response,
        }
    }

    /// The segmenter settings a [`SilenceDetector`] runs for this mode.
    pub fn silence_settings(&self) -> VadSettings {
        match self {
            TurnDetection::Server(s) => s.clone(),
            TurnDetection::Semantic(s) => VadSettings {
                silence_duration_ms: s.eagerness.silence_ms(),
                create_response: s.create_response,
                interrupt_response: s.interrupt_response,
                ..VadSettings::default()
            },
        }
    }

    /// The `turn_detection` object sessions echo.
    pub fn json(&self) -> Value {
        match self {
            TurnDetection::Server(s) => s.json(),
            TurnDetection::Semantic(s) => json!({
                "type": "semantic_vad",
                "eagerness": s.eagerness.name(),
                "create_response": s.create_response,
                "interrupt_response": s.interrupt_response,
            }),
        }
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
    /// The turn ended.
    SpeechStopped {
        /// Where the turn's audio ends.
        audio_end_ms: u64,
    },
    /// The speaker paused (the server's speculation pause, shorter than what ends the turn):
    /// if the turn ends there, it ends at `audio_end_ms`.
    Paused {
        /// Where the turn's audio would end.
        audio_end_ms: u64,
    },
    /// Speech came back after a pause.
    Resumed,
}

/// What decides where turns start and end, on the detector's own timeline (ms from its
/// start or last reset). The end-of-turn model is to be one of these.
pub trait TurnDetector: Send {
    /// Hears `samples` (mono, -1..1, at the rate the detector was made for); the turn events
    /// they give.
    fn push(&mut self, samples: &[f32]) -> Vec<TurnEvent>;
    /// Whether the speaker is talking now.
    fn in_speech(&self) -> bool;
    /// Forgets the audio heard so far; the timeline starts again at 0.
    fn reset(&mut self);
}

/// A turn ends after a silence: the `voice-activity` segmenter.
pub struct SilenceDetector(Segmenter);

impl SilenceDetector {
    /// A detector for `s` on input at `sample_rate`, reporting pauses of `pause_ms` (when
    /// shorter than the silence; 0: none).
    pub fn new(s: &VadSettings, sample_rate: u32, pause_ms: u32) -> Result<Self, EventError> {
        let config = VadConfig {
            threshold: s.threshold,
            prefix_padding_ms: s.prefix_padding_ms,
            silence_duration_ms: s.silence_duration_ms,
        };
        let mut seg = Segmenter::new(config, sample_rate).map_err(|e| {
            EventError::invalid("invalid_value", e.to_string())
                .at("session.audio.input.turn_detection")
        })?;
        seg.set_pause_ms((pause_ms > 0 && pause_ms < s.silence_duration_ms).then_some(pause_ms));
        Ok(SilenceDetector(seg))
    }
}

impl TurnDetector for SilenceDetector {
    fn push(&mut self, samples: &[f32]) -> Vec<TurnEvent> {
        self.0
            .push(samples)
            .into_iter()
            .map(|e| match e {
                VadEvent::SpeechStarted { audio_start_ms } => {
                    TurnEvent::SpeechStarted { audio_start_ms }
                }
                VadEvent::SpeechStopped { audio_end_ms } => {
                    TurnEvent::SpeechStopped { audio_end_ms }
                }
                VadEvent::Paused { audio_end_ms } => TurnEvent::Paused { audio_end_ms },
                VadEvent::Resumed => TurnEvent::Resumed,
            })
            .collect()
    }

    fn in_speech(&self) -> bool {
        self.0.in_speech()
    }

    fn reset(&mut self) {
        self.0.reset();
    }
}

/// The socket's turn detector: none for manual commits.
#[derive(Default)]
pub struct Turns {
    detector: Option<(TurnDetection, Box<dyn TurnDetector>)>,
    /// Where the detector's timeline starts on the socket's (ms of audio received before it).
    base_ms: u64,
}

impl Turns {
    /// A detector for `mode` on input at `sample_rate` whose timeline starts at `base_ms` of
    /// the socket's audio, reporting pauses of `pause_ms` (when shorter than the silence that
    /// ends a turn; 0: none); an error event for settings the detector refuses.
    pub fn new(
        mode: Option<&TurnDetection>,
        sample_rate: u32,
        base_ms: u64,
        pause_ms: u32,
    ) -> Result<Turns, EventError> {
        let detector = match mode {
            None => None,
            Some(m) => {
                // The one detector there is today; `semantic_vad`'s end-of-turn model goes
                // here when it lands.
                let d = SilenceDetector::new(&m.silence_settings(), sample_rate, pause_ms)?;
                Some((m.clone(), Box::new(d) as Box<dyn TurnDetector>))
            }
        };
        Ok(Turns { detector, base_ms })
    }

    /// The mode in use (`None`: manual commits).
    pub fn mode(&self) -> Option<&TurnDetection> {
        self.detector.as_ref().map(|(m, _)| m)
    }

    /// Hears `samples` (PCM16 at the input rate); the turns they start or end, on the
    /// socket's timeline.
    pub fn push(&mut self, samples: &[i16]) -> Vec<TurnEvent> {
        let Some((_, d)) = self.detector.as_mut() else {
            return Vec::new();
        };
        let f: Vec<f32> = samples.iter().map(|&s| f32::from(s) / 32768.0).collect();
        let base = self.base_ms;
        d.push(&f)
            .into_iter()
            .map(|e| match e {
                TurnEvent::SpeechStarted { audio_start_ms } => TurnEvent::SpeechStarted {
                    audio_start_ms: base + audio_start_ms,
                },
                TurnEvent::SpeechStopped { audio_end_ms } => TurnEvent::SpeechStopped {
                    audio_end_ms: base + audio_end_ms,
                },
                TurnEvent::Paused { audio_end_ms } => TurnEvent::Paused {
                    audio_end_ms: base + audio_end_ms,
                },
                TurnEvent::Resumed => TurnEvent::Resumed,
            })
            .collect()
    }

    /// Whether the speaker is talking now.
    pub fn in_speech(&self) -> bool {
        self.detector.as_ref().is_some_and(|(_, d)| d.in_speech())
    }

    /// Forgets the audio heard so far (after a commit or a clear): the timeline starts again
    /// at `base_ms` of the socket's audio.
    pub fn reset(&mut self, base_ms: u64) {
        if let Some((_, d)) = self.detector.as_mut() {
            d.reset();
        }
        self.base_ms = base_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semantic_vad_runs_the_segmenter_with_its_eagerness_silence() {
        let m = |e| {
            TurnDetection::Semantic(SemanticSettings {
                eagerness: e,
                ..SemanticSettings::default()
            })
        };
        let s = |e| m(e).silence_settings().silence_duration_ms;
        assert!(s(Eagerness::High) < s(Eagerness::Medium));
        assert!(s(Eagerness::Medium) < s(Eagerness::Low));
        assert_eq!(s(Eagerness::Auto), s(Eagerness::Medium));
        assert_eq!(m(Eagerness::High).json()["eagerness"], "high");
        assert!(Turns::new(Some(&m(Eagerness::Low)), 24_000, 0, 0).is_ok());
    }
}
