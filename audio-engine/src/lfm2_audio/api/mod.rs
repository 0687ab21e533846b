//! The one request model every front end uses: a [`Job`] (ASR, TTS, or a speech-to-speech turn
//! with its client-carried history) goes in, events go to one sink as they are produced, and
//! an [`Outcome`] comes back ([`Session::run`](crate::lfm2_audio::Session::run)). The C ABI and
//! the HTTP server translate their wire formats to a `Job` and an `Outcome` back, so a request
//! means the same thing through each of them.

pub mod job;
pub mod outcome;
mod run;

pub use job::{AsrJob, Job, TtsJob};
pub use outcome::Outcome;
