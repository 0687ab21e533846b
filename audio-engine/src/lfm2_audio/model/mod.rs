//! The model's four components, which the loaded model ([`Lfm2Audio`](crate::lfm2_audio::Lfm2Audio))
//! holds, each built once at load from its GGUF file's tensor-name tree into typed layers
//! ([`nn`], [`weights`]): log-mel [`features`] -> audio [`encoder`] + adapter -> LFM2
//! [`backbone`] with its decode cache -> [`depthformer`] (one audio frame per step, its codes
//! drawn by [`sampling`], which the reply loop also uses for text) -> [`detokenizer`] (frames to
//! 24 kHz audio). The four GGUF files are found and opened by [`package`], and fetched from the
//! Hugging Face Hub by `hub` (feature `hub`). Each component returns its own error type.

pub mod backbone;
pub mod depthformer;
pub mod detokenizer;
pub mod encoder;
pub mod features;
pub mod gguf_keys;
#[cfg(feature = "hub")]
pub mod hub;
pub mod load_error;
pub mod nn;
pub mod package;
pub mod sampling;
pub mod tensor_names;
pub mod ticks;
pub mod weights;
