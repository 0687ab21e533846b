//! LFM2-Audio: LiquidAI's speech-in/speech-out model on top of the LFM2 backbone.
//!
//! Nothing here touches raw pointers: every `unsafe` block of the engine lives in
//! [`crate::ggml`], which states why each is sound.
#![forbid(unsafe_code)]

pub mod asr;
pub mod audio;
pub mod backbone;
pub mod backbone_config;
pub mod conversation;
pub mod convert;
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
pub mod safetensors;
pub mod sampling;
pub mod schedule;
pub mod session;
pub mod synthetic;
pub mod tokenizer;
pub mod tts;
pub mod vocoder_config;
pub mod weights;

pub use asr::{AsrOptions, AsrResult, StopReason};
pub use engine::{Lfm2Audio, ModelOptions};
pub use error::EngineError;
pub use load_error::LoadError;
pub use reply::{ReplyEvent, ReplyResult, ReplyStream};
pub use s2s::S2sOptions;
pub use session::{S2sRequest, Session, SessionOptions, TurnResult, TurnStream};
pub use tts::{TtsOptions, Voice};
