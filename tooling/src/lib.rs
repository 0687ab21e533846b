//! The LFM2-Audio engine's tooling, kept out of the product crate (`lfm2-audio-engine`): the
//! checkpoint converter (Hugging Face LFM2-Audio checkpoint -> the four GGUF files) and its
//! safetensors reader, deterministic synthetic checkpoints in the published layout, the built-in
//! demo package the examples and tests run on, and the bench's backbone anchors.
//!
//! The examples, tests, benches and fuzz targets of the workspace depend on it; the server (its
//! `demo` feature only) and the C library do not.
//!
//! ```
//! use audio_tooling::{default_demo_dir, load_demo};
//! use audio_engine::lfm2_audio::ModelOptions;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = load_demo(&default_demo_dir(), ModelOptions::default())?;
//! println!("{} on {}", model.description(), model.device_name());
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod convert;
pub mod demo;
pub mod safetensors;
pub mod step_anchor;
pub mod synthetic;

/// The checkpoint converter's entry point ([`convert::convert`]), named for the crate root.
pub use convert::convert as convert_checkpoint;
pub use convert::{ConvertError, NoProgress, Progress};
pub use demo::{default_demo_dir, ensure_demo_package, load_demo, DEMO_MODEL};
