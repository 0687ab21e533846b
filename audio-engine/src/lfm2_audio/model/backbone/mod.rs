//! The LFM2 backbone as ggml graphs built in Rust, with an engine-owned decode cache.
//!
//! One [`Backbone::forward`] call runs a chunk of positions of one sequence: text ids, audio-in
//! embeddings (adapter output rows) and audio-out frames (summed code embeddings), in any mix.
//! It writes the chunk's K/V rows and conv tails into a [`DecodeCache`], attends only to the
//! cache rows up to the chunk's own end (so its bits never depend on the cache's capacity), and
//! returns the final-norm hidden states and, when asked, the text logits of the chosen rows.

mod batch;
pub mod cache;
pub mod config;
mod error;
mod forward;
mod graph;
mod inputs;
mod model;
pub mod scheduler;
mod types;

pub use super::tensor_names::AUDIO_CODE_TABLE;
#[cfg_attr(not(feature = "testkit"), allow(unused_imports))]
pub use batch::{BatchCompute, Step};
pub use cache::{CacheBlock, DecodeCache, BLOCK_POSITIONS};
pub use error::BackboneError;
pub use model::{AudioCodeTable, Backbone};
pub use types::{ForwardOutput, Position, Rows};
