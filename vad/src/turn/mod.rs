//! End of turn: whether the speaker *sounds* finished, for `turn_detection: semantic_vad`.
//!
//! [`SmartTurn`] is pipecat's smart-turn v3.2 (BSD-2-Clause, Daily), a Whisper-tiny encoder
//! and a classifier over the last 8 s of the turn's audio giving P(turn complete), run in plain
//! Rust from its quantized ONNX model's weights (converted by `scripts/smart_turn_weights.sh`
//! into a file outside the crate: see [`SmartTurn::default_weights_path`]). [`Eagerness`]
//! maps OpenAI's `eagerness` to an [`EndOfTurnPolicy`], and [`TurnDetector`] puts the two
//! on top of the [`Segmenter`]: the same [`VadEvent`]s, with `SpeechStopped` coming after a
//! short pause when the model says the turn is complete, and after the policy's longest
//! silence otherwise.

mod features;
mod gemm;
mod model;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use features::{FRAMES, MELS, WINDOW_SAMPLES};
pub use model::SmartTurnWeights;

use crate::resample::{Resampler, CLASSIFIER_RATE};
use crate::{Segmenter, VadConfig, VadError, VadEvent};

/// The environment variable naming the weight file (else the cache path, see
/// [`SmartTurn::default_weights_path`]).
pub const WEIGHTS_ENV: &str = "VAD_SMART_TURN_WEIGHTS";
/// The converted file's name in the cache directory.
pub const WEIGHTS_FILE: &str = "smart-turn-v3.2.safetensors";

/// smart-turn v3.2: P(the turn is complete) from the turn's audio. Cheap to share (`Arc`
/// weights); one call runs the whole network over 8 s (tens of ms on one core).
pub struct SmartTurn {
    weights: Arc<SmartTurnWeights>,
    front: features::FrontEnd,
}

impl SmartTurn {
    /// A model over loaded weights.
    pub fn new(weights: Arc<SmartTurnWeights>) -> SmartTurn {
        SmartTurn {
            weights,
            front: features::FrontEnd::new(),
        }
    }

    /// Loads the converted weight file at `path` ([`VadError::TurnWeightsMissing`] when it
    /// cannot be read, naming the script that makes it; [`VadError::InvalidWeights`] when it is
    /// not the model's).
    pub fn load(path: &Path) -> Result<SmartTurn, VadError> {
        let bytes = std::fs::read(path).map_err(|e| VadError::TurnWeightsMissing {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(SmartTurn::new(Arc::new(
            SmartTurnWeights::from_safetensors(&bytes)?,
        )))
    }

    /// Where the weights are looked for by default: `$VAD_SMART_TURN_WEIGHTS` when set, else
    /// `$XDG_CACHE_HOME/voice-activity/smart-turn-v3.2.safetensors`, else the same under
    /// `~/.cache` (where `scripts/smart_turn_weights.sh` writes it).
    pub fn default_weights_path() -> PathBuf {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(path) = var(WEIGHTS_ENV) {
            return PathBuf::from(path);
        }
        let cache = var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache.join("voice-activity").join(WEIGHTS_FILE)
    }

    /// [`SmartTurn::load`] from [`SmartTurn::default_weights_path`].
    pub fn load_default() -> Result<SmartTurn, VadError> {
        SmartTurn::load(&SmartTurn::default_weights_path())
    }

    /// P(turn complete) for the turn's 16 kHz audio so far (samples in `[-1, 1]`; the last 8 s
    /// are used, shorter audio is padded with silence in front, as pipecat does). Include the
    /// silence heard since the last speech: the model was trained on turns ending in a short one.
    pub fn probability(&self, audio_16k: &[f32]) -> f32 {
        self.weights.probability(&self.front.features(audio_16k))
    }

    /// The model's input features for `audio_16k`: `MELS x FRAMES` (mel-major) log-mel values.
    pub fn features(&self, audio_16k: &[f32]) -> Vec<f32> {
        self.front.features(audio_16k)
    }

    /// P(turn complete) for features made by [`SmartTurn::features`] (or pipecat's own).
    pub fn probability_of_features(&self, features: &[f32]) -> Result<f32, VadError> {
        if features.len() != MELS * FRAMES {
            return Err(VadError::InvalidFeatures {
                got: features.len(),
                expected: MELS * FRAMES,
            });
        }
        Ok(self.weights.probability(features))
    }
}

/// An end-of-turn model: P(the turn is complete) from the turn's 16 kHz audio so far (the
/// silence since the last speech included). [`SmartTurn`] is the real one.
pub trait EndOfTurn {
    /// P(complete), in `0..=1`.
    fn probability(&self, audio_16k: &[f32]) -> f32;
}

impl EndOfTurn for SmartTurn {
    fn probability(&self, audio_16k: &[f32]) -> f32 {
        SmartTurn::probability(self, audio_16k)
    }
}

/// OpenAI's `semantic_vad` eagerness: how soon a turn may end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Eagerness {
    /// Waits longest: the user may take their time.
    Low,
    /// The middle ground.
    Medium,
    /// Ends turns soonest.
    High,
    /// The server's choice: [`Eagerness::Medium`], as OpenAI documents.
    #[default]
    Auto,
}

impl Eagerness {
    /// The API's spelling (`"low"`, `"medium"`, `"high"`, `"auto"`); `None` for others.
    pub fn parse(s: &str) -> Option<Eagerness> {
        match s {
            "low" => Some(Eagerness::Low),
            "medium" => Some(Eagerness::Medium),
            "high" => Some(Eagerness::High),
            "auto" => Some(Eagerness::Auto),
            _ => None,
        }
    }

    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Eagerness::Low => "low",
            Eagerness::Medium => "medium",
            Eagerness::High => "high",
            Eagerness::Auto => "auto",
        }
    }

    /// The settings it stands for. `Medium` is smart-turn's own operating point in pipecat
    /// (the model asked after 200 ms of silence, complete at P >= 0.5); `Low` asks later and
    /// wants more certainty, `High` asks sooner. The longest waits stay above the 300-900 ms
    /// mid-sentence pauses of the turn corpus, so the timer alone never cuts those. On espeak-ng
    /// speech smart-turn barely tells such pauses from ends (examples/turn_eval), so these are
    /// not tuned on it.
    pub fn policy(self) -> EndOfTurnPolicy {
        match self {
            Eagerness::Low => EndOfTurnPolicy {
                pause_ms: 300,
                threshold: 0.7,
                max_silence_ms: 2500,
            },
            Eagerness::Medium | Eagerness::Auto => EndOfTurnPolicy {
                pause_ms: 200,
                threshold: 0.5,
                max_silence_ms: 1500,
            },
            Eagerness::High => EndOfTurnPolicy {
                pause_ms: 150,
                threshold: 0.5,
                max_silence_ms: 1000,
            },
        }
    }
}

/// When a turn ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EndOfTurnPolicy {
    /// Silence after speech at which the model is asked once (ms).
    pub pause_ms: u32,
    /// P(complete) at or above which the turn ends then.
    pub threshold: f32,
    /// Silence after which the turn ends whatever the model said (ms).
    pub max_silence_ms: u32,
}

/// Server VAD with an end-of-turn model: a [`Segmenter`] whose `SpeechStopped` comes
/// [`EndOfTurnPolicy::pause_ms`] after the last speech when [`SmartTurn`] gives the turn's audio
/// P(complete) >= the threshold, and after [`EndOfTurnPolicy::max_silence_ms`] otherwise. Emits
/// only `SpeechStarted` and `SpeechStopped`, with the segmenter's times; one per stream.
///
/// The model runs inside [`TurnDetector::push`] (once per pause; tens of ms): a caller that
/// must not block that long pushes from a worker thread.
pub struct TurnDetector<M: EndOfTurn = SmartTurn> {
    segmenter: Segmenter,
    model: Arc<M>,
    policy: EndOfTurnPolicy,
    resampler: Option<Resampler>,
    /// The last 16 kHz samples heard (at most the model's window plus the prefix).
    audio: Vec<f32>,
    /// The 16 kHz index of `audio[0]`.
    audio_start: u64,
    /// The open turn's first 16 kHz sample (its `audio_start_ms`).
    turn_start: Option<u64>,
    last_probability: Option<f32>,
}

impl<M: EndOfTurn> TurnDetector<M> {
    /// A detector for mono audio at `sample_rate` with the segmenter's `threshold` and
    /// `prefix_padding_ms` from `vad` (its `silence_duration_ms` is replaced by the policy's
    /// longest silence).
    pub fn new(
        model: Arc<M>,
        policy: EndOfTurnPolicy,
        vad: VadConfig,
        sample_rate: u32,
    ) -> Result<TurnDetector<M>, VadError> {
        if !(0.0..=1.0).contains(&policy.threshold) {
            return Err(VadError::InvalidThreshold(policy.threshold));
        }
        if policy.pause_ms == 0 || policy.pause_ms >= policy.max_silence_ms {
            return Err(VadError::InvalidPolicy {
                pause_ms: policy.pause_ms,
                max_silence_ms: policy.max_silence_ms,
            });
        }
        let config = VadConfig {
            silence_duration_ms: policy.max_silence_ms,
            ..vad
        };
        let mut segmenter = Segmenter::new(config, sample_rate)?;
        segmenter.set_pause_ms(Some(policy.pause_ms));
        let resampler = if sample_rate == CLASSIFIER_RATE {
            None
        } else {
            Some(Resampler::new(sample_rate, CLASSIFIER_RATE)?)
        };
        Ok(TurnDetector {
            segmenter,
            model,
            policy,
            resampler,
            audio: Vec::new(),
            audio_start: 0,
            turn_start: None,
            last_probability: None,
        })
    }

    /// Feeds mono samples in `[-1, 1]` (any chunk size); the turns they start or end.
    pub fn push(&mut self, samples: &[f32]) -> Vec<VadEvent> {
        match &mut self.resampler {
            None => self
                .audio
                .extend(samples.iter().map(|s| if s.is_nan() { 0.0 } else { *s })),
            Some(r) => {
                let clean: Vec<f32> = samples
                    .iter()
                    .map(|s| if s.is_nan() { 0.0 } else { *s })
                    .collect();
                r.process(&clean, &mut self.audio);
            }
        }
        let keep = WINDOW_SAMPLES + CLASSIFIER_RATE as usize;
        if self.audio.len() > 2 * keep {
            let drop = self.audio.len() - keep;
            self.audio.drain(..drop);
            self.audio_start += drop as u64;
        }
        let mut out = Vec::new();
        for event in self.segmenter.push(samples) {
            match event {
                VadEvent::SpeechStarted { audio_start_ms } => {
                    self.turn_start = Some(audio_start_ms * 16);
                    out.push(event);
                }
                VadEvent::Paused { audio_end_ms } => {
                    let from =
                        self.turn_start.unwrap_or(0).max(self.audio_start) - self.audio_start;
                    let from = (from as usize).min(self.audio.len());
                    let p = self.model.probability(&self.audio[from..]);
                    self.last_probability = Some(p);
                    if p >= self.policy.threshold {
                        self.segmenter.end_turn();
                        self.turn_start = None;
                        out.push(VadEvent::SpeechStopped { audio_end_ms });
                    }
                }
                VadEvent::SpeechStopped { .. } => {
                    self.turn_start = None;
                    out.push(event);
                }
                VadEvent::Resumed => {}
            }
        }
        out
    }

    /// What the model said at the last pause.
    pub fn last_probability(&self) -> Option<f32> {
        self.last_probability
    }

    /// Whether a turn is open.
    pub fn in_speech(&self) -> bool {
        self.segmenter.in_speech()
    }

    /// The policy in use.
    pub fn policy(&self) -> EndOfTurnPolicy {
        self.policy
    }

    /// Forgets the stream (the timeline starts again at 0).
    pub fn reset(&mut self) {
        self.segmenter.reset();
        if let Some(r) = &mut self.resampler {
            r.reset();
        }
        self.audio.clear();
        self.audio_start = 0;
        self.turn_start = None;
        self.last_probability = None;
    }
}
