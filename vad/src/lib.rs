//! Voice-activity detection for the server's Realtime route (`turn_detection: server_vad`).
//!
//! A [`Segmenter`] takes the microphone's PCM (16 kHz, 24 kHz or another common rate, any
//! chunk size), resamples it to 16 kHz, asks a [`Classifier`] for each frame's speech
//! probability and turns the frames into [`VadEvent::SpeechStarted`] /
//! [`VadEvent::SpeechStopped`] with OpenAI's `threshold`, `prefix_padding_ms` and
//! `silence_duration_ms` ([`VadConfig`]). The default classifier is Silero VAD
//! ([`SileroClassifier`], run in plain Rust from weights embedded in the crate), chosen on
//! labelled espeak-ng speech in noise over `earshot` ([`EarshotClassifier`]) and WebRTC's VAD
//! (BENCHMARKS.md, "Voice activity detection"); [`EnergyClassifier`] is the energy-threshold
//! baseline.
#![forbid(unsafe_code)]

mod classifier;
mod config;
mod error;
mod resample;
mod segmenter;

pub use classifier::{
    Classifier, EarshotClassifier, EnergyClassifier, SileroClassifier, SileroWeights,
};
pub use config::VadConfig;
pub use error::VadError;
pub use resample::{Resampler, CLASSIFIER_RATE};
pub use segmenter::{Segmenter, VadEvent, MIN_SPEECH_MS};
