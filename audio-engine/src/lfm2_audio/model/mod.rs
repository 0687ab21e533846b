//! The model: the loaded engine ([`engine::Lfm2Audio`]) and its four components, each built once
//! at load from its GGUF file's tensor-name tree into typed layers ([`nn`], [`weights`]):
//! log-mel [`features`] -> audio [`encoder`] + adapter -> LFM2 [`backbone`] with its decode cache
//! -> [`depthformer`] (one audio frame per step) -> [`detokenizer`] (frames to 24 kHz audio). The
//! four GGUF files are found and opened by [`package`], and fetched from the Hugging Face Hub
//! by `hub` (feature `hub`).

pub mod backbone;
pub mod depthformer;
pub mod detokenizer;
pub mod encoder;
pub mod engine;
pub mod features;
pub mod gguf_keys;
#[cfg(feature = "hub")]
pub mod hub;
pub mod load_error;
pub mod nn;
pub mod package;
pub mod ticks;
pub mod weights;
