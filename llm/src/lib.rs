//! Text models through llama.cpp: multi-sequence batched decoding of hybrid (gated-delta-net)
//! models such as qwen35, with sequences joining, leaving and forking, and speculative rollback.
//! The LFM2-Audio engine (`lfm2-audio-engine`) never uses it: the workspace's benches time
//! llama.cpp's own models with it, and its tests compare the engine's tokenizer and backbone with
//! libllama's ([`llama_vocab`], [`llama`]).
//!
//! [`llama`] holds the safe handles over `llama-sys` (models, contexts, batches, memory),
//! [`llama_vocab`] libllama's tokenizer loaded alone, [`RandomModel`] random models of the
//! supported architectures written as GGUF; both sys crates share one ggml, whose log routing
//! (through the safe ggml layer, lfm2-ggml) libllama's log joins.
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
mod error;
pub mod llama;
pub mod llama_vocab;
mod random;
mod sampler;

pub use crate::llama::{ContextOptions, EvalObserver, LlamaModel as LlmModel};
// libllama's log lines (e.g. its recurrent-state buffer mapping) and how much of a mapping is
// resident: what benchmarks of the lazily zeroed state buffer look at.
pub use decoder::{Decoder, DecoderConfig, SeqId, StepOutput};
pub use error::{LlmError, Result};
pub use lfm2_ggml::{lazy_memory::resident_bytes, log::add_log_hook};
pub use random::{Arch, RandomModel};
pub use sampler::Sampler;
