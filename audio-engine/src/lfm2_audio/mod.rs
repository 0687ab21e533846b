//! LFM2-Audio: LiquidAI's speech-in/speech-out model on top of the LFM2 backbone.

pub mod audio;
pub mod backbone;
pub mod backbone_config;
pub mod convert;
pub mod encoder;
pub mod features;
pub mod load_error;
pub mod package;
pub mod safetensors;
pub mod synthetic;
pub mod tokenizer;
pub mod vocoder_config;
pub mod weights;

pub use load_error::LoadError;
