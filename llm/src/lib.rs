//! Text models through llama.cpp: multi-sequence batched decoding of hybrid (gated-delta-net)
//! models such as qwen35, with sequences joining, leaving and forking, and speculative rollback.
//! The LFM2-Audio engine (`lfm2-audio-engine`) never uses it: the workspace's benches time
//! llama.cpp's own models with it, and its tests compare the engine's tokenizer and backbone with
//! libllama's ([`llama_vocab`], [`llama`]).
//!
//! [`llama`] holds the safe handles over `llama-sys` (models, contexts, batches, memory),
//! [`llama_vocab`] libllama's tokenizer loaded alone, [`RandomModel`] random models of the
//! supported architectures written as GGUF; both sys crates share one ggml, whose log routing
//! (through the engine's safe ggml layer) libllama's log joins.
//!
//! ```no_run
//! use lfm2_llm::{Decoder, DecoderConfig, LlmModel, RandomModel, Sampler};
//! let model = RandomModel::tiny_qwen35(7).build()?;
//! let mut dec = Decoder::new(&model, DecoderConfig { n_seq_max: 4, ..Default::default() })?;
//! let a = dec.join(&[1, 2, 3], Sampler::greedy())?;
//! let b = dec.join(&[4, 5], Sampler::top_k(0.8, 40, 42))?;
//! for _ in 0..8 {
//!     for out in dec.step()? {
//!         println!("seq {} -> token {}", out.seq, out.token);
//!     }
//! }
//! dec.leave(a)?;
//! let c = dec.fork(b, Sampler::greedy())?;
//! # let _ = c;
//! # Ok::<(), lfm2_llm::LlmError>(())
//! ```

#![warn(missing_docs)]

mod decoder;
pub mod llama;
pub mod llama_vocab;
mod random;
mod sampler;

// The safe ggml layer: GGUF metadata and writer, the log routing.
use audio_engine::ggml;

pub use crate::llama::{ContextOptions, EvalObserver, LlamaModel as LlmModel};
// libllama's log lines (e.g. its recurrent-state buffer mapping) and how much of a mapping is
// resident: what benchmarks of the lazily zeroed state buffer look at.
pub use crate::ggml::{lazy_memory::resident_bytes, log::add_log_hook};
pub use decoder::{Decoder, DecoderConfig, SeqId, StepOutput};
pub use random::{Arch, RandomModel};
pub use sampler::Sampler;

use crate::llama::LlamaError;

/// Errors of the text-model API.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// libllama failed (load, context, decode).
    #[error(transparent)]
    Llama(#[from] LlamaError),
    /// All sequence slots are in use.
    #[error("all {0} sequence slots are in use")]
    NoFreeSlot(u32),
    /// The sequence id is not active.
    #[error("sequence {0} is not active")]
    UnknownSequence(SeqId),
    /// A prompt or input was empty or out of range.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The sequence would exceed the context's positions.
    #[error(
        "sequence {seq} would need {needed} positions, the context holds {limit} per sequence"
    )]
    ContextFull {
        /// The sequence.
        seq: SeqId,
        /// Positions needed.
        needed: usize,
        /// Positions available.
        limit: usize,
    },
    /// Rollback past what the memory keeps.
    #[error("cannot roll back sequence {seq} by {n} tokens: {why}")]
    Rollback {
        /// The sequence.
        seq: SeqId,
        /// Tokens asked.
        n: usize,
        /// Why not.
        why: String,
    },
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, LlmError>;
