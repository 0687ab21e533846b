//! End of turn: whether the speaker *sounds* finished, for `turn_detection: semantic_vad`.
//!
//! [`SmartTurn`] is pipecat's smart-turn v3.2 (BSD-2-Clause, Daily), a Whisper-tiny encoder
//! and a classifier over the last 8 s of the turn's audio giving P(turn complete), run in plain
//! Rust from its quantized ONNX model's weights (converted by `scripts/smart_turn_weights.sh`
//! into a file outside the crate: see [`SmartTurn::default_weights_path`]). [`Eagerness`]
//! maps OpenAI's `eagerness` to an [`EndOfTurnPolicy`], and [`TurnDetector`] puts the two
//! on top of the [`Segmenter`]: the same [`VadEvent`]s, with `SpeechStopped` coming at one of the
//! policy's checks (a silence at which the model is asked, and the P(complete) it must reach
//! there) when the model says the turn is complete, and after the policy's longest silence
//! otherwise.

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

    /// The settings it stands for: an early check at 100 ms of silence that ends the turn only
    /// when the model is nearly sure (P >= 0.98), a later check with a lower bar, and a longest
    /// wait above the corpus's longest mid-sentence pause (965 ms), so that the timer alone
    /// never cuts one there.
    ///
    /// Why this shape: on the espeak-ng turn corpus smart-turn barely tells a mid-sentence pause
    /// from an end (after 200 ms of silence P >= 0.5 at 54 % of pauses and 60 % of ends; after
    /// 100 ms P >= 0.95 at 4 % and 15 %; onnxruntime agrees, scripts/smart_turn_check.py), so a
    /// single ask at a short pause with pipecat's P >= 0.5 ends most pauses. The checks were
    /// chosen on that corpus's P(complete) curves (`TURN_EVAL_CURVE`, examples/turn_eval) and
    /// its detector runs, i.e. tuned and measured on the same questions. Measured there (delay
    /// from the last voiced sample, model time excluded; false ends at the 48 mid-sentence
    /// pauses): `low` p50 1260 ms, 2.1 %; `medium` 787 ms, 18.8 %; `high` 587 ms, 37.5 %;
    /// server_vad 500 ms: 563 ms, 62.5 %.
    pub fn policy(self) -> EndOfTurnPolicy {
        let check = |silence_ms, threshold| Check {
            silence_ms,
            threshold,
        };
        match self {
            Eagerness::Low => EndOfTurnPolicy {
                checks: [check(100, 0.98), check(700, 0.99)],
                max_silence_ms: 1200,
            },
            Eagerness::Medium | Eagerness::Auto => EndOfTurnPolicy {
                checks: [check(100, 0.98), check(700, 0.95)],
                max_silence_ms: 1000,
            },
            Eagerness::High => EndOfTurnPolicy {
                checks: [check(100, 0.98), check(500, 0.9)],
                max_silence_ms: 1000,
            },
        }
    }
}

/// One ask of the end-of-turn model during a silence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    /// Silence after the last speech at which the model is asked (ms).
    pub silence_ms: u32,
    /// P(complete) at or above which the turn ends then.
    pub threshold: f32,
}

/// When a turn ends: at the first of `checks` where the model says complete, else after
/// `max_silence_ms`. The bar is high at the early check and lower at the later one: the
/// longer the silence, the less the model must say for the turn to end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EndOfTurnPolicy {
    /// The asks, by growing silence.
    pub checks: [Check; 2],
    /// Silence after which the turn ends whatever the model said (ms).
    pub max_silence_ms: u32,
}

impl EndOfTurnPolicy {
    /// [`VadError::InvalidPolicy`] unless `0 < checks[0] < checks[1] < max_silence_ms`, and
    /// [`VadError::InvalidThreshold`] for a threshold outside `0..=1`.
    pub fn validate(&self) -> Result<(), VadError> {
        for c in &self.checks {
            if !(0.0..=1.0).contains(&c.threshold) {
                return Err(VadError::InvalidThreshold(c.threshold));
            }
        }
        let [a, b] = self.checks;
        if a.silence_ms == 0 || a.silence_ms >= b.silence_ms || b.silence_ms >= self.max_silence_ms
        {
            return Err(VadError::InvalidPolicy {
                checks_ms: [a.silence_ms, b.silence_ms],
                max_silence_ms: self.max_silence_ms,
            });
        }
        Ok(())
    }
}

/// A request to ask the end-of-turn model, from [`TurnDetector::push_deferred`]: run
/// [`EndOfTurn::probability`] on `audio` (off the caller's thread if it must not block) and
/// give the result to [`TurnDetector::answer`] with `id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// Which ask this is (an answer to an older one is ignored).
    pub id: u64,
    /// The turn's 16 kHz audio so far, the silence since its last speech included.
    pub audio: Vec<f32>,
    /// Where the turn ends if the model says complete (ms on the detector's timeline).
    pub audio_end_ms: u64,
    /// The check's silence (ms).
    pub silence_ms: u32,
}

/// Server VAD with an end-of-turn model: a [`Segmenter`] whose `SpeechStopped` comes at the
/// first of the [`EndOfTurnPolicy`]'s checks where [`SmartTurn`] gives the turn's audio
/// P(complete) at or above that check's threshold, and after
/// [`EndOfTurnPolicy::max_silence_ms`] otherwise. Emits only `SpeechStarted` and
/// `SpeechStopped`, with the segmenter's times.
///
/// [`TurnDetector::push`] runs the model inline (tens of ms per check). A caller that must not
/// block that long uses [`TurnDetector::push_deferred`] and [`TurnDetector::answer`] and runs
/// the model elsewhere: the turn then ends when the answer comes, if speech has not come back
/// meanwhile (an answer after that is stale: the speaker went on), so the events are
/// [`TurnDetector::push`]'s whenever each answer comes before the speech resumes (the model's
/// run time, tens of ms, against a pause of hundreds); the longest wait ends the turn whether or
/// not an answer is out.
pub struct TurnDetector<M: EndOfTurn = SmartTurn> {
    segmenter: Segmenter,
    model: Arc<M>,
    policy: EndOfTurnPolicy,
    resampler: Option<Resampler>,
    /// Input samples per 10 ms: the granularity at which the checks are timed.
    step: usize,
    /// The last 16 kHz samples heard (at most the model's window plus the prefix).
    audio: Vec<f32>,
    /// The 16 kHz index of `audio[0]`.
    audio_start: u64,
    /// The open turn's first 16 kHz sample (its `audio_start_ms`).
    turn_start: Option<u64>,
    /// The next check of this silence (2: all asked).
    next_check: usize,
    /// The ask awaiting its answer: its id, its check and the turn's end it would commit.
    pending: Option<(u64, usize, u64)>,
    /// The end of the current silence's speech (from the segmenter's `Paused`, set at the first
    /// check's silence); `None` while speech goes on.
    pause_end: Option<u64>,
    /// Ids of asks so far.
    asks: u64,
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
        policy.validate()?;
        let config = VadConfig {
            silence_duration_ms: policy.max_silence_ms,
            ..vad
        };
        let mut segmenter = Segmenter::new(config, sample_rate)?;
        segmenter.set_pause_ms(Some(policy.checks[0].silence_ms));
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
            step: (sample_rate as usize / 100).max(1),
            audio: Vec::new(),
            audio_start: 0,
            turn_start: None,
            next_check: 0,
            pending: None,
            pause_end: None,
            asks: 0,
            last_probability: None,
        })
    }

    /// Feeds mono samples in `[-1, 1]` (any chunk size), asking the model inline; the turns
    /// they start or end.
    pub fn push(&mut self, samples: &[f32]) -> Vec<VadEvent> {
        let model = self.model.clone();
        self.feed(samples, &mut |audio| Some(model.probability(audio)))
            .0
    }

    /// [`TurnDetector::push`] without running the model: a check that falls due is returned
    /// as an [`Ask`] (at most one is outstanding; a later check waits for its answer).
    pub fn push_deferred(&mut self, samples: &[f32]) -> (Vec<VadEvent>, Option<Ask>) {
        self.feed(samples, &mut |_| None)
    }

    /// The model's answer `p` to the [`Ask`] `id` of [`TurnDetector::push_deferred`]:
    /// `SpeechStopped` when it is the outstanding ask of the open turn's current silence and
    /// `p` reaches its check's threshold; nothing for a stale ask (speech came back, the turn
    /// ended, or the detector was reset); and the next ask when its check fell due while this
    /// one was out.
    pub fn answer(&mut self, id: u64, p: f32) -> (Vec<VadEvent>, Option<Ask>) {
        let out = self.settle(id, p);
        if !out.is_empty() {
            return (out, None);
        }
        let next = self.pause_end.and_then(|end| self.due(end));
        (out, next)
    }

    /// Applies the answer `p` to ask `id`: the `SpeechStopped` it gives.
    fn settle(&mut self, id: u64, p: f32) -> Vec<VadEvent> {
        let Some((pending, check, audio_end_ms)) = self.pending else {
            return Vec::new();
        };
        if pending != id {
            return Vec::new();
        }
        self.pending = None;
        self.last_probability = Some(p);
        if p >= self.policy.checks[check].threshold {
            self.end_turn();
            return vec![VadEvent::SpeechStopped { audio_end_ms }];
        }
        Vec::new()
    }

    fn end_turn(&mut self) {
        self.segmenter.end_turn();
        self.turn_start = None;
        self.next_check = 0;
        self.pending = None;
        self.pause_end = None;
    }

    /// The ask of the check that is due now, if one is and none is out.
    fn due(&mut self, audio_end_ms: u64) -> Option<Ask> {
        if self.pending.is_some() || !self.segmenter.in_speech() {
            return None;
        }
        let check = *self.policy.checks.get(self.next_check)?;
        if self.segmenter.silence_ms() < check.silence_ms {
            return None;
        }
        let from = self.turn_start.unwrap_or(0).max(self.audio_start) - self.audio_start;
        let from = (from as usize).min(self.audio.len());
        self.asks += 1;
        self.pending = Some((self.asks, self.next_check, audio_end_ms));
        self.next_check += 1;
        Some(Ask {
            id: self.asks,
            audio: self.audio[from..].to_vec(),
            audio_end_ms,
            silence_ms: check.silence_ms,
        })
    }

    /// Feeds `samples` 10 ms at a time, so that each check is asked within 10 ms of falling
    /// due; `model` answers an ask at once (`Some`) or defers it (`None`: returned).
    fn feed(
        &mut self,
        samples: &[f32],
        model: &mut dyn FnMut(&[f32]) -> Option<f32>,
    ) -> (Vec<VadEvent>, Option<Ask>) {
        let mut out = Vec::new();
        let mut deferred = None;
        for chunk in samples.chunks(self.step) {
            self.hear(chunk);
            // The segmenter's `Paused` is the first check's silence: where this turn would end.
            for event in self.segmenter.push(chunk) {
                match event {
                    VadEvent::SpeechStarted { audio_start_ms } => {
                        self.turn_start = Some(audio_start_ms * 16);
                        self.next_check = 0;
                        self.pending = None;
                        self.pause_end = None;
                        out.push(event);
                    }
                    VadEvent::SpeechStopped { .. } => {
                        self.end_turn();
                        out.push(event);
                    }
                    VadEvent::Paused { audio_end_ms } => self.pause_end = Some(audio_end_ms),
                    VadEvent::Resumed => {
                        // A new silence starts the checks again; an answer still out is stale.
                        self.next_check = 0;
                        self.pending = None;
                        self.pause_end = None;
                    }
                }
            }
            let Some(audio_end_ms) = self.pause_end.filter(|_| self.segmenter.in_speech()) else {
                continue;
            };
            // At most one check falls due per 10 ms (they are further apart than that).
            if let Some(ask) = self.due(audio_end_ms) {
                match model(&ask.audio) {
                    Some(p) => out.extend(self.settle(ask.id, p)),
                    // Deferred: no other check is asked until its answer.
                    None => deferred = Some(ask),
                }
            }
        }
        (out, deferred)
    }

    /// Keeps the 16 kHz audio of `samples` for the model.
    fn hear(&mut self, samples: &[f32]) {
        let clean = samples.iter().map(|s| if s.is_nan() { 0.0 } else { *s });
        match &mut self.resampler {
            None => self.audio.extend(clean),
            Some(r) => {
                let clean: Vec<f32> = clean.collect();
                r.process(&clean, &mut self.audio);
            }
        }
        let keep = WINDOW_SAMPLES + CLASSIFIER_RATE as usize;
        if self.audio.len() > 2 * keep {
            let drop = self.audio.len() - keep;
            self.audio.drain(..drop);
            self.audio_start += drop as u64;
        }
    }

    /// What the model said at the last answered check.
    pub fn last_probability(&self) -> Option<f32> {
        self.last_probability
    }

    /// The model the detector was made with (to run a deferred [`Ask`] with).
    pub fn model(&self) -> &Arc<M> {
        &self.model
    }

    /// Whether a turn is open.
    pub fn in_speech(&self) -> bool {
        self.segmenter.in_speech()
    }

    /// The policy in use.
    pub fn policy(&self) -> EndOfTurnPolicy {
        self.policy
    }

    /// Forgets the stream (the timeline starts again at 0; an answer still out is stale).
    pub fn reset(&mut self) {
        self.segmenter.reset();
        if let Some(r) = &mut self.resampler {
            r.reset();
        }
        self.audio.clear();
        self.audio_start = 0;
        self.end_turn();
        self.last_probability = None;
    }
}
