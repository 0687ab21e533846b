//! Turn detection: the socket's input audio goes through here as it arrives, and the session's
//! `turn_detection` (when it asks for one) says where speech starts and stops, on the timeline
//! of all audio the socket received. The events, barge-in and the commit of
//! `[audio_start_ms, audio_end_ms]` are the socket loop's.
//!
//! Two modes, [`TurnDetection`], each a [`TurnDetector`]:
//! - `server_vad`: [`SilenceDetector`], the workspace's `voice-activity` segmenter (Silero VAD)
//!   with a silence that ends the turn;
//! - `semantic_vad`: [`SemanticDetector`], the same segmenter with smart-turn v3.2
//!   (`voice_activity::SmartTurn`, loaded once per server: [`load_end_of_turn`]) asked at the
//!   checks of the eagerness's policy ([`Eagerness::policy`]); the turn ends at the first check
//!   where the model says complete, else after the policy's longest wait. The model runs on
//!   tokio's blocking pool, never on the socket's task; its answer comes back through
//!   [`Turns::next_answer`].
//!
//! Without the weights file the server logs a warning at startup and `semantic_vad` falls back
//! to the segmenter with a silence set by the eagerness ([`Eagerness::silence_ms`]): sessions
//! keep working, with server_vad's behaviour. A weights path given explicitly
//! (`--smart-turn-weights` or `VAD_SMART_TURN_WEIGHTS`) that cannot be loaded stops the server
//! at startup instead.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::mpsc;
use voice_activity::{Segmenter, SmartTurn, VadConfig, VadError, VadEvent};

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

    /// The end-of-turn policy of this eagerness (`voice_activity::Eagerness::policy`: the
    /// model's checks and the longest wait).
    pub fn policy(self) -> voice_activity::EndOfTurnPolicy {
        let e = match self {
            Eagerness::Low => voice_activity::Eagerness::Low,
            Eagerness::Medium => voice_activity::Eagerness::Medium,
            Eagerness::High => voice_activity::Eagerness::High,
            Eagerness::Auto => voice_activity::Eagerness::Auto,
        };
        e.policy()
    }

    /// The silence that ends a turn when `semantic_vad` runs without the end-of-turn model (its
    /// weights not installed): `auto`/`medium` the same as `server_vad`'s default, `low`
    /// longer, `high` shorter.
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
    /// `semantic_vad`: a turn ends when the speaker sounds done (smart-turn; without its
    /// weights, a silence set by its eagerness: see the module's doc).
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

    /// The segmenter settings a [`SilenceDetector`] runs for this mode (for `semantic_vad`:
    /// the fallback without the end-of-turn model).
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
/// start or last reset).
pub trait TurnDetector: Send {
    /// Hears `samples` (mono, -1..1, at the rate the detector was made for); the turn events
    /// they give.
    fn push(&mut self, samples: &[f32]) -> Vec<TurnEvent>;
    /// Whether the speaker is talking now.
    fn in_speech(&self) -> bool;
    /// Forgets the audio heard so far; the timeline starts again at 0.
    fn reset(&mut self);
    /// Where the answers of work the detector runs elsewhere come in (the end-of-turn model's):
    /// `None` for a detector that decides everything in [`TurnDetector::push`].
    fn answers(&mut self) -> Option<&mut mpsc::UnboundedReceiver<Answer>> {
        None
    }
    /// Takes one of those answers; the turn events it gives.
    fn answer(&mut self, _answer: Answer) -> Vec<TurnEvent> {
        Vec::new()
    }
}

/// The end-of-turn model's answer to one ask: its id and P(complete).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    /// The ask's id (`voice_activity::Ask::id`).
    pub id: u64,
    /// P(the turn is complete).
    pub probability: f32,
}

fn vad_event(e: VadEvent) -> TurnEvent {
    match e {
        VadEvent::SpeechStarted { audio_start_ms } => TurnEvent::SpeechStarted { audio_start_ms },
        VadEvent::SpeechStopped { audio_end_ms } => TurnEvent::SpeechStopped { audio_end_ms },
        VadEvent::Paused { audio_end_ms } => TurnEvent::Paused { audio_end_ms },
        VadEvent::Resumed => TurnEvent::Resumed,
    }
}

/// Loads the end-of-turn model once for the server: from `explicit` (the `--smart-turn-weights`
/// flag or the config file) or `VAD_SMART_TURN_WEIGHTS` when given, where a file that cannot be
/// loaded is an error (the operator asked for it); else from the default cache path, where a
/// missing file is a warning and `None` (semantic_vad falls back to a silence timer).
pub fn load_end_of_turn(explicit: Option<&Path>) -> anyhow::Result<Option<Arc<SmartTurn>>> {
    let from_env = std::env::var_os(voice_activity::WEIGHTS_ENV).filter(|v| !v.is_empty());
    let asked = explicit.is_some() || from_env.is_some();
    let path = explicit.map_or_else(SmartTurn::default_weights_path, Path::to_path_buf);
    match SmartTurn::load(&path) {
        Ok(m) => {
            tracing::info!(path = %path.display(), "semantic_vad: smart-turn v3.2 loaded");
            Ok(Some(Arc::new(m)))
        }
        Err(e @ VadError::TurnWeightsMissing { .. }) if !asked => {
            tracing::warn!("semantic_vad falls back to a silence timer set by its eagerness: {e}");
            Ok(None)
        }
        Err(e) => Err(anyhow::anyhow!("semantic_vad's end-of-turn model: {e}")),
    }
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
        self.0.push(samples).into_iter().map(vad_event).collect()
    }

    fn in_speech(&self) -> bool {
        self.0.in_speech()
    }

    fn reset(&mut self) {
        self.0.reset();
    }
}

/// `semantic_vad` with the end-of-turn model: `voice_activity::TurnDetector`'s deferred API,
/// each ask run on tokio's blocking pool (about 150 ms of CPU on a 2-core machine: never on the
/// socket's task) and answered through a channel the socket loop waits on
/// ([`Turns::next_answer`]). The turn ends when an answer reaches its check's bar, so the
/// model's run time adds to the end-of-turn delay; an answer that comes after speech resumed
/// is dropped (the speaker went on), and the longest wait ends the turn whatever is out.
pub struct SemanticDetector {
    detector: voice_activity::TurnDetector<SmartTurn>,
    tx: mpsc::UnboundedSender<Answer>,
    rx: mpsc::UnboundedReceiver<Answer>,
    /// The silence from which an ask also reports `Paused` (the socket's early turn; 0: never).
    early_turn_ms: u32,
}

impl SemanticDetector {
    /// A detector for `s` with `model` on input at `sample_rate`; asks at checks of at least
    /// `early_turn_ms` of silence also report a `Paused` (0: none).
    pub fn new(
        s: &SemanticSettings,
        model: Arc<SmartTurn>,
        sample_rate: u32,
        early_turn_ms: u32,
    ) -> Result<Self, EventError> {
        let vad = VadConfig {
            threshold: VadSettings::default().threshold,
            prefix_padding_ms: VadSettings::default().prefix_padding_ms,
            silence_duration_ms: VadSettings::default().silence_duration_ms,
        };
        let detector =
            voice_activity::TurnDetector::new(model, s.eagerness.policy(), vad, sample_rate)
                .map_err(|e| {
                    EventError::invalid("invalid_value", e.to_string())
                        .at("session.audio.input.turn_detection")
                })?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(SemanticDetector {
            detector,
            tx,
            rx,
            early_turn_ms,
        })
    }

    /// Runs `ask` off the async runtime's threads (inline where there is no runtime, as in
    /// unit tests); the answer comes through `rx`.
    fn run(&self, ask: voice_activity::Ask) {
        let model = self.detector.model().clone();
        let tx = self.tx.clone();
        let job = move || {
            let probability = model.probability(&ask.audio);
            // why ignored: the socket (and its receiver) may be gone; the answer is moot then.
            let _ = tx.send(Answer {
                id: ask.id,
                probability,
            });
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(job)),
            Err(_) => job(),
        }
    }

    /// The events of the detector's, plus `Paused` for an ask at the early-turn silence, and
    /// runs the ask.
    fn take(
        &mut self,
        (events, ask): (Vec<VadEvent>, Option<voice_activity::Ask>),
    ) -> Vec<TurnEvent> {
        let mut out: Vec<TurnEvent> = events.into_iter().map(vad_event).collect();
        if let Some(ask) = ask {
            if self.early_turn_ms > 0 && ask.silence_ms >= self.early_turn_ms {
                out.push(TurnEvent::Paused {
                    audio_end_ms: ask.audio_end_ms,
                });
            }
            self.run(ask);
        }
        out
    }
}

impl TurnDetector for SemanticDetector {
    fn push(&mut self, samples: &[f32]) -> Vec<TurnEvent> {
        let heard = self.detector.push_deferred(samples);
        self.take(heard)
    }

    fn in_speech(&self) -> bool {
        self.detector.in_speech()
    }

    fn reset(&mut self) {
        // Answers still out become stale (the detector forgets its ask).
        self.detector.reset();
    }

    fn answers(&mut self) -> Option<&mut mpsc::UnboundedReceiver<Answer>> {
        Some(&mut self.rx)
    }

    fn answer(&mut self, a: Answer) -> Vec<TurnEvent> {
        let heard = self.detector.answer(a.id, a.probability);
        self.take(heard)
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
    /// ends a turn; 0: none); `semantic_vad` runs `model` (the server's end-of-turn model;
    /// `None`: the silence fallback). An error event for settings the detector refuses.
    pub fn new(
        mode: Option<&TurnDetection>,
        sample_rate: u32,
        base_ms: u64,
        pause_ms: u32,
        model: Option<&Arc<SmartTurn>>,
    ) -> Result<Turns, EventError> {
        let detector: Option<Box<dyn TurnDetector>> = match (mode, model) {
            (None, _) => None,
            (Some(TurnDetection::Semantic(s)), Some(model)) => Some(Box::new(
                SemanticDetector::new(s, model.clone(), sample_rate, pause_ms)?,
            )),
            (Some(m), _) => Some(Box::new(SilenceDetector::new(
                &m.silence_settings(),
                sample_rate,
                pause_ms,
            )?)),
        };
        Ok(Turns {
            detector: mode.cloned().zip(detector),
            base_ms,
        })
    }

    /// The next answer of work the detector runs elsewhere (pending forever when there is
    /// none to come): give it to [`Turns::answer`].
    pub async fn next_answer(&mut self) -> Answer {
        match self.detector.as_mut().and_then(|(_, d)| d.answers()) {
            // why `None` cannot come: the detector holds a sender of its own channel.
            Some(rx) => match rx.recv().await {
                Some(a) => a,
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    /// Takes an answer from [`Turns::next_answer`]; the turn events it gives, on the socket's
    /// timeline.
    pub fn answer(&mut self, a: Answer) -> Vec<TurnEvent> {
        let Some((_, d)) = self.detector.as_mut() else {
            return Vec::new();
        };
        let events = d.answer(a);
        self.rebase(events)
    }

    fn rebase(&self, events: Vec<TurnEvent>) -> Vec<TurnEvent> {
        let base = self.base_ms;
        events
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
        let events = d.push(&f);
        self.rebase(events)
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
        assert!(Turns::new(Some(&m(Eagerness::Low)), 24_000, 0, 0, None).is_ok());
        let policy = |e: Eagerness| e.policy();
        assert_eq!(policy(Eagerness::Auto), policy(Eagerness::Medium));
        assert!(policy(Eagerness::High).max_silence_ms <= policy(Eagerness::Low).max_silence_ms);
    }

    #[test]
    fn an_explicit_weights_file_must_load() {
        let dir = std::env::temp_dir().join(format!("turns-weights-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.safetensors");
        let err = load_end_of_turn(Some(&missing))
            .err()
            .expect("a missing file named explicitly");
        assert!(err.to_string().contains("smart_turn_weights.sh"), "{err}");
        let broken = dir.join("broken.safetensors");
        std::fs::write(&broken, b"not a safetensors file").unwrap();
        assert!(load_end_of_turn(Some(&broken)).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn semantic_vad_without_the_model_is_the_silence_fallback() {
        let mode = TurnDetection::Semantic(SemanticSettings {
            eagerness: Eagerness::High,
            ..SemanticSettings::default()
        });
        let mut t = Turns::new(Some(&mode), 16_000, 0, 0, None).unwrap();
        // A fallback detector has no answers to wait for.
        let (_, d) = t.detector.as_mut().unwrap();
        assert!(d.answers().is_none());
        assert_eq!(mode.silence_settings().silence_duration_ms, 250);
    }
}
