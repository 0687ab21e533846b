//! Voice-activity detection for the server's Realtime route (`turn_detection: server_vad`).
//!
//! A [`Segmenter`] takes the microphone's PCM (16 kHz, 24 kHz or another common rate, any
//! chunk size), resamples it to 16 kHz, asks a [`Classifier`] for each frame's speech
//! probability and turns the frames into [`VadEvent::SpeechStarted`] /
//! [`VadEvent::SpeechStopped`] with OpenAI's `threshold`, `prefix_padding_ms` and
//! `silence_duration_ms` ([`VadConfig`]). The default classifier is Silero VAD
//! ([`SileroClassifier`], run in plain Rust from weights embedded in the crate), chosen on
//! labelled espeak-ng speech in noise over `earshot` (`EarshotClassifier`, feature `earshot`,
//! for the evaluation only) and WebRTC's VAD (BENCHMARKS.md, "Voice activity detection");
//! [`EnergyClassifier`] is the energy-threshold baseline.
//!
//! `turn_detection: semantic_vad` adds an end-of-turn model: [`TurnDetector`] asks
//! [`SmartTurn`] (pipecat's smart-turn v3.2, run in plain Rust; its weights are installed by
//! `scripts/smart_turn_weights.sh`) at a short pause whether the turn sounds complete, with
//! the timing of an [`Eagerness`] ([`EndOfTurnPolicy`]).
//!
//! ```
//! use voice_activity::{Segmenter, VadConfig, VadEvent};
//!
//! // One segmenter per Realtime session, fed the session's PCM16 as floats.
//! let mut vad = Segmenter::new(VadConfig::default(), 24_000)?;
//! for event in vad.push(&vec![0.0; 2_400]) {
//!     match event {
//!         VadEvent::SpeechStarted { audio_start_ms } => println!("speech from {audio_start_ms} ms"),
//!         VadEvent::SpeechStopped { audio_end_ms } => println!("commit up to {audio_end_ms} ms"),
//!         // Only with `set_pause_ms`: a pause shorter than the silence duration, and its end.
//!         VadEvent::Paused { .. } | VadEvent::Resumed => {}
//!     }
//! }
//! assert!(!vad.in_speech());
//! # Ok::<(), voice_activity::VadError>(())
//! ```
// why deny, not forbid: smart-turn's matrix products call matrixmultiply's unsafe sgemm in one
// function (turn/gemm.rs) that checks every bound first.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod classifier;
mod config;
mod error;
mod resample;
mod segmenter;
mod turn;

#[cfg(feature = "earshot")]
pub use classifier::EarshotClassifier;
pub use classifier::{Classifier, EnergyClassifier, SileroClassifier, SileroWeights};
pub use config::VadConfig;
pub use error::VadError;
pub use resample::{Resampler, CLASSIFIER_RATE};
pub use segmenter::{Segmenter, VadEvent, MIN_SPEECH_MS};
pub use turn::{
    Ask, Check, Eagerness, EndOfTurn, EndOfTurnPolicy, SmartTurn, SmartTurnWeights, TurnDetector,
    FRAMES, MELS, WEIGHTS_ENV, WEIGHTS_FILE, WINDOW_SAMPLES,
};
