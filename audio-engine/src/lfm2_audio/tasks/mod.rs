//! The one-shot tasks on a loaded model: speech recognition ([`asr`]), speech synthesis
//! ([`tts`]) and a single speech-to-speech reply ([`s2s`]); multi-turn conversations are a
//! [`Session`](super::Session)'s.

pub mod asr;
pub mod s2s;
pub mod tts;
