//! LFM2-Audio: LiquidAI's speech-in/speech-out model on top of the LFM2 backbone.
//!
//! Applications use the names re-exported here: [`Lfm2Audio`] (a loaded model) and [`Session`]
//! (multi-turn S2S with caches), whose doors run every task as a [`Job`] (`run`,
//! `run_cancellable`, and a session's `prepare_turn`), the options, requests, outcomes,
//! [`Voice`], the WAV helpers and the errors; protocol layers (the C ABI,
//! the HTTP server) also use [`conversation`], the multi-turn protocol's artifacts and checks.
//! The checkpoint converter, synthetic checkpoints and the built-in demo package are another
//! crate's (lfm2-audio-tooling, library `audio_tooling`).
//!
//! Inside, the modules are private and grouped by role, as layers: bottom first, each
//! importing only the ones below it (`tests/layers.rs` keeps this true, listing the upward
//! imports that remain):
//!
//! | module | role |
//! |---|---|
//! | `io` | WAV in and out |
//! | `model` | the components: features, encoder, backbone + decode cache, depthformer, detokenizer; sampling; shared `nn` blocks; typed weights bound once at load; the four-file package; each with its own error type |
//! | `text` | tokenizer, the one prompt type |
//! | `error` | the engine's error type, wrapping the stages' own errors (of `io`, `model`, `text`) |
//! | `limits` | the request limits, each refused as the engine's capacity error |
//! | `engine` | the loaded model ([`Lfm2Audio`]): the components, tokenizer and schedulers on one device |
//! | `generation` | the one generation loop, schedules, event streams |
//! | `tasks` | ASR, TTS, one-shot S2S |
//! | `session` | multi-turn sessions: the conversation protocol, prefill-block cache, prefill ahead, encoder-output reuse |
//! | `api` | the one request model: `Job` in, events to a sink, `Outcome` out (the doors: `Lfm2Audio::run`, `Session::run`, `Session::prepare_turn`); the binaries' environment variables parsed (`vars`) |
//!
//! [`limits`] (public) lists every limit on what one request may make the engine hold (audio
//! seconds, conversation steps, TTS text, system prompt, artifacts), each defined once.
//!
//! Nothing here touches raw pointers: every operation on them lives in [`crate::ggml`], which
//! states why each is sound; this module tree forbids them.
#![forbid(unsafe_code)]
// The components' inspection methods (cache sizes, sampler state, table shapes) exist for the
// integration tests, which reach them through `internals` (feature `testkit`); each such item
// says so with `#[cfg_attr(not(feature = "testkit"), allow(dead_code))]`, so that any other dead
// code in a default build is still reported.

mod api;
mod audio_in;
mod engine;
mod error;
mod generation;
mod io;
pub mod limits;
mod model;
mod session;
mod tasks;
mod text;

// The facade: what an application needs, importable from here alone.
pub use crate::ggml::ThreadBudgetStats;
/// The option table and its reader ([`options::resolve`]), README's table
/// ([`options::markdown_table`]).
pub use api::options;
/// The environment variables the binaries read, parsed ([`ModelOptions::with_vars`],
/// [`vars::log_level_from_vars`]).
pub use api::vars;
pub use api::{
    AsrJob, Job, OptionMap, OptionSpec, OptionType, OptionValue, Outcome, Request, RequestContext,
    ResolvedRequest, TtsJob, REQUEST_OPTIONS,
};
pub use engine::{Lfm2Audio, ModelOptions, DEFAULT_BATCH_FROM, DEFAULT_MAX_BATCH};
pub use error::EngineError;
pub use generation::reply::{ReplyEvent, ReplyResult, ReplyStream, ReplyTimings, StepTimings};
pub use io::audio::{
    decode_wav_bytes, decode_wav_file, encode_wav_24k, load_wav_bytes_16k, load_wav_file_16k,
    pcm_16k, write_wav_f32, write_wav_file_24k, AudioError, AudioInput, MonoAudio, ReadOptions,
    DEFAULT_MAX_SECONDS, INPUT_SAMPLE_RATE, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE, OUTPUT_SAMPLE_RATE,
};
pub use model::backbone::scheduler::TickStats;
pub use model::load_error::LoadError;
pub use model::package::{ModelPackage, PackagePaths, Quant, UnknownQuant};
pub use model::sampling::SamplerConfig;
pub use session::ahead::BackgroundWork;
pub use session::conversation::{
    Artifact, ArtifactKind, Task, QUESTION_ID, REPLY_ID, RETURN_CODES,
};
pub use session::{S2sRequest, Session, SessionOptions, TurnResult, TurnStream};
pub use tasks::asr::{AsrOptions, AsrResult, AsrTimings, StopReason};
pub use tasks::s2s::S2sOptions;
pub use tasks::tts::{TtsOptions, UnknownVoice, Voice};

/// The multi-turn protocol for layers that carry it over the wire: reply artifacts (bytes and
/// meta), reading a request's history, the 8192-step conversation limit, and the per-task
/// checks of options and artifacts.
pub use session::conversation;

/// The one way a job runs on a worker thread and hands out its events and its end
/// ([`worker::Worker`], [`worker::Outlet`]): the library's streams, the C ABI's stream and the
/// server's routes all run on it.
pub use generation::worker;

/// LFM2's tool format, for front ends that offer tools: the tool list in the system turn, the
/// calls read from a reply's text.
pub use text::tools;

/// Model packages from the Hugging Face Hub and its shared cache (feature `hub`).
#[cfg(feature = "hub")]
pub use model::hub;

/// The engine's modules under their former flat names, for this workspace's integration tests,
/// benches and tooling crate (feature `testkit`): they reach into components (a backbone
/// forward, a detokenizer stream, the tokenizer, the GGUF key names) that applications do not
/// need. Not a stable API.
#[cfg(feature = "testkit")]
#[doc(hidden)]
pub mod internals {
    /// The errors (`lfm2_audio::error`).
    pub mod error {
        pub use super::super::error::*;
    }
    pub use super::generation::{frame_threads, reply, schedule};
    pub use super::io::audio;
    pub use super::model::backbone::config as backbone_config;
    pub use super::model::detokenizer::config as vocoder_config;
    pub use super::model::{
        backbone, depthformer, detokenizer, encoder, features, gguf_keys, load_error, nn, package,
        sampling, weights,
    };
    /// The loaded model (`lfm2_audio::engine`).
    pub mod engine {
        pub use super::super::engine::*;
    }
    /// Sessions (`lfm2_audio::session`).
    pub mod session {
        pub use super::super::session::*;
    }
    /// The per-task calls under the doors, for tests and benches.
    pub use super::api::task_calls;
    pub use super::session::{conversation, prefill_cache};
    pub use super::tasks::{asr, s2s, tts};
    pub use super::text::{prompt, tokenizer};
}
