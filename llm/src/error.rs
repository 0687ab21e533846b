//! The text-model API's error type.

use crate::llama::LlamaError;

// why not `crate::SeqId`: the decoder imports this file; an id is an `i32` either way.
type SeqId = i32;

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
