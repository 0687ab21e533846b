//! Safe inference engine over the vendored ggml/llama.cpp.
#![warn(missing_docs)]

pub mod ggml;
pub mod lfm2_audio;
#[cfg(feature = "llm")]
pub mod llm;
