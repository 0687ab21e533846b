//! Turn segmentation: classifier frames to `SpeechStarted` / `SpeechStopped` events.

use crate::classifier::{Classifier, SileroClassifier};
use crate::resample::{Resampler, CLASSIFIER_RATE};
use crate::{VadConfig, VadError};

/// Consecutive speech needed before `SpeechStarted`: a lone frame over the threshold (a click, a
/// burst of noise) must not start a turn, nor interrupt a reply. The onset reported is still
/// the first frame of the run.
pub const MIN_SPEECH_MS: u32 = 64;

/// 16 kHz samples per millisecond: the timeline's unit conversions.
const SAMPLES_PER_MS: u64 = CLASSIFIER_RATE as u64 / 1000;

/// What the segmenter saw happen in the audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VadEvent {
    /// Speech began; `audio_start_ms` is where the committed item should start: the speech
    /// onset minus `prefix_padding_ms` (not before 0), on the timeline of all samples pushed
    /// since `new`/`reset`.
    SpeechStarted {
        /// Onset minus the prefix padding, in ms since the stream began.
        audio_start_ms: u64,
    },
    /// Speech ended: `audio_end_ms` is the end of the last speech frame (the
    /// `silence_duration_ms` of silence after it were already seen when this is emitted).
    SpeechStopped {
        /// End of the last speech frame, in ms since the stream began.
        audio_end_ms: u64,
    },
    /// Only with [`Segmenter::set_pause_ms`]: the speaker has been silent for the pause
    /// length, less than the silence duration. If the silence holds, the `SpeechStopped` that
    /// follows has this `audio_end_ms`, so a listener may start on that audio early.
    Paused {
        /// End of the last speech frame, in ms since the stream began.
        audio_end_ms: u64,
    },
    /// Only with [`Segmenter::set_pause_ms`]: speech came back after a `Paused`; the turn goes
    /// on and work started at the pause is moot.
    Resumed,
}

/// Splits a stream of audio into speech turns (OpenAI's `server_vad`). One per stream.
///
/// Events depend only on the audio, not on how it is chunked: the input is resampled to 16 kHz
/// at exact positions and classified in fixed frames. Events come out when the frame that
/// decides them is complete, so `SpeechStarted` lags the onset by `MIN_SPEECH_MS` plus up to a
/// frame, and `SpeechStopped` lags the last speech by `silence_duration_ms` plus up to a frame
/// (and, for rates other than 16 kHz, the resampler's 1 ms look-ahead).
pub struct Segmenter<C: Classifier = SileroClassifier> {
    config: VadConfig,
    resampler: Option<Resampler>,
    classifier: C,
    frame_len: usize,
    /// 16 kHz samples that do not make a whole frame yet.
    pending: Vec<f32>,
    /// Reused buffer for the resampler's output.
    resampled: Vec<f32>,
    samples_seen: u64,
    /// 16 kHz samples already classified (a whole number of frames).
    classified: u64,
    turn: TurnState,
    /// Silence (16 kHz samples) after which a turn reports `Paused`; `None`: never.
    pause: Option<u64>,
}

/// Where the segmenter is between frames.
#[derive(Debug, Default, Clone, Copy)]
struct TurnState {
    in_speech: bool,
    /// Outside speech: where the current run of speech frames began (16 kHz samples), if any.
    run_start: Option<u64>,
    /// In speech: the end of the last speech frame (16 kHz samples).
    last_speech_end: u64,
    /// In speech: non-speech samples since then.
    silence: u64,
    /// In speech: whether this silence was reported as `Paused`.
    paused: bool,
}

impl Segmenter<SileroClassifier> {
    /// A segmenter for mono audio at `sample_rate` (16 kHz, 24 kHz and the other common rates
    /// from 8 to 192 kHz) with the default classifier, Silero VAD (its weights are parsed once
    /// per process and shared by all segmenters).
    pub fn new(config: VadConfig, sample_rate: u32) -> Result<Segmenter, VadError> {
        Segmenter::with_classifier(config, sample_rate, SileroClassifier::default())
    }
}

impl<C: Classifier> Segmenter<C> {
    /// A segmenter that asks `classifier` (for the evaluation of other classifiers).
    pub fn with_classifier(
        config: VadConfig,
        sample_rate: u32,
        classifier: C,
    ) -> Result<Segmenter<C>, VadError> {
        config.validate()?;
        if sample_rate == 0 {
            return Err(VadError::UnsupportedSampleRate {
                rate: 0,
                reason: "a rate must be positive",
            });
        }
        let resampler = if sample_rate == CLASSIFIER_RATE {
            None
        } else {
            Some(Resampler::new(sample_rate, CLASSIFIER_RATE)?)
        };
        let frame_len = classifier.frame_len();
        Ok(Segmenter {
            config,
            resampler,
            classifier,
            frame_len,
            pending: Vec::with_capacity(2 * frame_len),
            resampled: Vec::new(),
            samples_seen: 0,
            classified: 0,
            turn: TurnState::default(),
            pause: None,
        })
    }

    /// Feeds mono samples in `[-1, 1]` (chunks of any size) and returns the events they
    /// complete, in order. Samples outside the range are clamped and NaN counts as 0, so no
    /// input can upset the classifier.
    pub fn push(&mut self, samples: &[f32]) -> Vec<VadEvent> {
        self.samples_seen += samples.len() as u64;
        let clean = |s: &f32| if s.is_nan() { 0.0 } else { s.clamp(-1.0, 1.0) };
        match &mut self.resampler {
            None => self.pending.extend(samples.iter().map(clean)),
            Some(resampler) => {
                let sanitized: Vec<f32> = samples.iter().map(clean).collect();
                self.resampled.clear();
                resampler.process(&sanitized, &mut self.resampled);
                // why clamp again: the filter rings past full scale on clipped input.
                self.pending
                    .extend(self.resampled.iter().map(|s| s.clamp(-1.0, 1.0)));
            }
        }
        let mut events = Vec::new();
        let mut at = 0;
        while self.pending.len() - at >= self.frame_len {
            let p = self
                .classifier
                .speech_probability(&self.pending[at..at + self.frame_len]);
            at += self.frame_len;
            if let Some(event) = self.step(p >= self.config.threshold) {
                events.push(event);
            }
        }
        self.pending.drain(..at);
        events
    }

    /// Advances the turn state by one classified frame.
    fn step(&mut self, speech: bool) -> Option<VadEvent> {
        let start = self.classified;
        self.classified += self.frame_len as u64;
        let end = self.classified;
        let turn = &mut self.turn;
        if !turn.in_speech {
            if !speech {
                turn.run_start = None;
                return None;
            }
            let run_start = *turn.run_start.get_or_insert(start);
            if end - run_start < u64::from(MIN_SPEECH_MS) * SAMPLES_PER_MS {
                return None;
            }
            *turn = TurnState {
                in_speech: true,
                run_start: None,
                last_speech_end: end,
                silence: 0,
                paused: false,
            };
            let onset_ms = run_start / SAMPLES_PER_MS;
            return Some(VadEvent::SpeechStarted {
                audio_start_ms: onset_ms.saturating_sub(u64::from(self.config.prefix_padding_ms)),
            });
        }
        if speech {
            turn.last_speech_end = end;
            turn.silence = 0;
            let resumed = std::mem::take(&mut turn.paused);
            return resumed.then_some(VadEvent::Resumed);
        }
        turn.silence += self.frame_len as u64;
        if turn.silence < u64::from(self.config.silence_duration_ms) * SAMPLES_PER_MS {
            if !turn.paused && self.pause.is_some_and(|p| turn.silence >= p) {
                turn.paused = true;
                return Some(VadEvent::Paused {
                    audio_end_ms: turn.last_speech_end / SAMPLES_PER_MS,
                });
            }
            return None;
        }
        let audio_end_ms = turn.last_speech_end / SAMPLES_PER_MS;
        *turn = TurnState::default();
        Some(VadEvent::SpeechStopped { audio_end_ms })
    }

    /// Also reports pauses: `Paused` once a turn's silence has lasted `ms` (rounded up to whole
    /// frames; it needs to be shorter than `silence_duration_ms` to come before the
    /// `SpeechStopped`), and `Resumed` when speech comes back after one. `None` (the default)
    /// turns them off.
    pub fn set_pause_ms(&mut self, ms: Option<u32>) {
        self.pause = ms.map(|ms| u64::from(ms.max(1)) * SAMPLES_PER_MS);
    }

    /// Ends the open turn now, without an event (a caller that decided the end itself, as
    /// [`crate::TurnDetector`] does): the next speech starts a new turn.
    pub fn end_turn(&mut self) {
        self.turn = TurnState::default();
    }

    /// How long the open turn has been silent since its last speech frame, ms (0 outside a
    /// turn and while speech goes on): what [`crate::TurnDetector`] times its checks by.
    pub fn silence_ms(&self) -> u32 {
        if !self.turn.in_speech {
            return 0;
        }
        u32::try_from(self.turn.silence / SAMPLES_PER_MS).unwrap_or(u32::MAX)
    }

    /// Whether a `SpeechStarted` is open (no `SpeechStopped` after it yet).
    pub fn in_speech(&self) -> bool {
        self.turn.in_speech
    }

    /// Forgets the stream: the timeline starts again at 0 with the next push.
    pub fn reset(&mut self) {
        if let Some(resampler) = &mut self.resampler {
            resampler.reset();
        }
        self.classifier.reset();
        self.pending.clear();
        self.samples_seen = 0;
        self.classified = 0;
        self.turn = TurnState::default();
    }

    /// Input samples pushed since `new`/`reset` (at the input rate).
    pub fn samples_seen(&self) -> u64 {
        self.samples_seen
    }

    /// The settings this segmenter runs with.
    pub fn config(&self) -> &VadConfig {
        &self.config
    }

    /// The classifier, e.g. for its name.
    pub fn classifier(&self) -> &C {
        &self.classifier
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_segmenter_is_send() {
        fn is_send<T: Send + 'static>() {}
        is_send::<Segmenter>();
    }

    /// A classifier that replays a script of decisions, to test the turn logic exactly.
    struct Scripted(Vec<bool>, usize);

    impl Classifier for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn frame_len(&self) -> usize {
            160
        }
        fn speech_probability(&mut self, _: &[f32]) -> f32 {
            let v = self.0.get(self.1).copied().unwrap_or(false);
            self.1 += 1;
            if v {
                1.0
            } else {
                0.0
            }
        }
        fn reset(&mut self) {
            self.1 = 0;
        }
    }

    fn run(script: &str, config: VadConfig) -> Vec<VadEvent> {
        run_pausing(script, config, None)
    }

    fn run_pausing(script: &str, config: VadConfig, pause_ms: Option<u32>) -> Vec<VadEvent> {
        let frames: Vec<bool> = script.chars().map(|c| c == '#').collect();
        let n = frames.len();
        let mut s = Segmenter::with_classifier(config, 16_000, Scripted(frames, 0)).unwrap();
        s.set_pause_ms(pause_ms);
        s.push(&vec![0.0; n * 160])
    }

    #[test]
    fn pauses_are_reported_once_per_silence_with_the_end_the_stop_will_have() {
        // 10 ms frames. A 40 ms gap pauses (30 ms) and resumes; the final silence pauses, then
        // stops at the same end.
        let config = VadConfig {
            threshold: 0.5,
            prefix_padding_ms: 0,
            silence_duration_ms: 100,
        };
        let script = format!(
            "{}{}{}{}{}",
            ".".repeat(10),
            "#".repeat(10),
            ".".repeat(4),
            "#".repeat(10),
            ".".repeat(12)
        );
        assert_eq!(
            run_pausing(&script, config, Some(30)),
            vec![
                VadEvent::SpeechStarted {
                    audio_start_ms: 100
                },
                VadEvent::Paused { audio_end_ms: 200 },
                VadEvent::Resumed,
                VadEvent::Paused { audio_end_ms: 340 },
                VadEvent::SpeechStopped { audio_end_ms: 340 },
            ]
        );
        // Off by default: the same audio gives only the turn's two events.
        assert_eq!(run(&script, config).len(), 2);
        // A gap shorter than the pause reports nothing.
        assert_eq!(
            run_pausing(&script, config, Some(50)),
            vec![
                VadEvent::SpeechStarted {
                    audio_start_ms: 100
                },
                VadEvent::Paused { audio_end_ms: 340 },
                VadEvent::SpeechStopped { audio_end_ms: 340 },
            ]
        );
    }

    #[test]
    fn turn_logic_on_scripted_frames() {
        // 10 ms frames; 64 ms of speech needs 7 frames. Onset at frame 50 = 500 ms.
        let config = VadConfig {
            threshold: 0.5,
            prefix_padding_ms: 300,
            silence_duration_ms: 100,
        };
        let script = format!(
            "{}{}{}{}{}",
            ".".repeat(50),
            "#".repeat(20),
            ".".repeat(5),
            "#".repeat(10),
            ".".repeat(10)
        );
        let events = run(&script, config);
        assert_eq!(
            events,
            vec![
                VadEvent::SpeechStarted {
                    audio_start_ms: 200
                },
                // Last speech frame ends at frame 85 = 850 ms; the 5-frame gap did not stop it.
                VadEvent::SpeechStopped { audio_end_ms: 850 },
            ]
        );
        // Bursts shorter than MIN_SPEECH_MS never start a turn; the onset is the run's first frame.
        let bursts = format!("{}{}", "######.".repeat(20), "#".repeat(8));
        assert_eq!(
            run(&bursts, config),
            vec![VadEvent::SpeechStarted {
                audio_start_ms: 1100
            }]
        );
        // The padding does not go before 0.
        let early = format!("{}{}", ".".repeat(10), "#".repeat(8));
        assert_eq!(
            run(&early, config),
            vec![VadEvent::SpeechStarted { audio_start_ms: 0 }]
        );
    }
}
