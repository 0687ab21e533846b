//! LFM2-Audio: LiquidAI's speech-in/speech-out model on top of the LFM2 backbone.
//!
//! Applications use the names re-exported here: [`Lfm2Audio`] (a loaded model: ASR, TTS, S2S,
//! offline or streamed), [`Session`] (multi-turn S2S with caches), the options, requests,
//! results and streams, [`Voice`], the WAV helpers and the errors. With feature `convert`, the
//! checkpoint converter (`convert_checkpoint`); with `testkit`, the built-in demo package
//! (`load_demo`).
//!
//! Nothing here touches raw pointers: every `unsafe` block of the engine lives in
//! [`crate::ggml`], which states why each is sound.
#![forbid(unsafe_code)]

pub mod asr;
pub mod audio;
pub mod backbone;
pub mod backbone_config;
pub mod conversation;
#[cfg(feature = "convert")]
pub mod convert;
#[cfg(feature = "testkit")]
pub mod demo;
pub mod depthformer;
pub mod detokenizer;
pub mod encoder;
pub mod engine;
pub mod error;
pub mod features;
pub mod gguf_keys;
pub mod load_error;
pub mod nn;
pub mod package;
pub mod prefill_cache;
pub mod prompt;
pub mod reply;
pub mod s2s;
#[cfg(feature = "convert")]
pub mod safetensors;
pub mod sampling;
pub mod schedule;
pub mod session;
#[cfg(feature = "testkit")]
pub mod synthetic;
pub mod tokenizer;
pub mod tts;
pub mod vocoder_config;
pub mod weights;

// The facade: what an application needs, importable from here alone (the modules above stay
// public for the tests while the layout is reworked; see /ARCHITECTURE.md).
pub use asr::{AsrOptions, AsrResult, AsrTimings, StopReason};
pub use audio::{
    decode_wav_bytes, decode_wav_file, encode_wav_24k, write_wav_f32, write_wav_file_24k,
    AudioError, MonoAudio, ReadOptions, INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE,
};
pub use conversation::{Artifact, ArtifactKind, RequestOptions, QUESTION_ID, RETURN_CODES};
pub use engine::{Lfm2Audio, ModelOptions};
pub use error::EngineError;
pub use load_error::LoadError;
pub use package::{ModelPackage, PackagePaths, Quant, UnknownQuant};
pub use reply::{ReplyEvent, ReplyResult, ReplyStream, ReplyTimings, StepTimings};
pub use s2s::S2sOptions;
pub use sampling::SamplerConfig;
pub use session::{S2sRequest, Session, SessionOptions, TurnResult, TurnStream};
pub use tts::{TtsOptions, Voice};

/// The checkpoint converter's entry point ([`convert::convert`]), named for the facade.
#[cfg(feature = "convert")]
pub use convert::convert as convert_checkpoint;
#[cfg(feature = "convert")]
pub use convert::{ConvertError, NoProgress, Progress};
#[cfg(feature = "testkit")]
pub use demo::{default_demo_dir, ensure_demo_package, load_demo, DEMO_MODEL};
