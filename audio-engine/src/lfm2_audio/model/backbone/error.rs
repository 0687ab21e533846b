//! Why a backbone run failed.

use crate::ggml::GgmlError;

/// Why a backbone run failed.
#[derive(Debug, thiserror::Error)]
pub enum BackboneError {
    /// The chunk does not fit in the cache.
    #[error("the decode cache holds {capacity} positions; this run needs {needed}")]
    Capacity {
        /// Positions the run would reach.
        needed: usize,
        /// The cache's capacity.
        capacity: usize,
    },
    /// The input is malformed (empty chunk, wrong embedding width, code out of range, ...).
    #[error("invalid backbone input: {0}")]
    Input(String),
    /// The cache's memory could not be mapped (out of address space or, with strict
    /// overcommit, of memory): see the [`cache`](super::cache) module's "Out of memory".
    #[error(
        "out of memory: cannot map {bytes} bytes for the decode cache of {positions} positions"
    )]
    CacheMemory {
        /// The size asked for.
        bytes: usize,
        /// The positions the cache was for (rounded up to whole blocks).
        positions: usize,
        /// The OS error (`ENOMEM` for an address-space or commit limit).
        #[source]
        source: std::io::Error,
    },
    /// The cache was made for another model.
    #[error("the decode cache does not match this backbone's layers")]
    CacheMismatch,
    /// The model has no audio-code embedding table but a frame was given.
    #[error("no audio-code embedding table is loaded, so frames cannot be embedded")]
    NoAudioCodes,
    /// ggml rejected an operation or failed to compute.
    #[error(transparent)]
    Ggml(#[from] GgmlError),
    /// The batched tick this step ran in failed (every step of the tick gets the same cause).
    #[error("the batched step failed: {0}")]
    Batch(#[source] std::sync::Arc<BackboneError>),
}

impl BackboneError {
    /// Whether memory for the run could not be had: the decode cache's mapping, or a ggml
    /// allocation (a graph buffer, a context pool) that reported its failure.
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            BackboneError::CacheMemory { .. } => true,
            BackboneError::Ggml(g) => g.is_out_of_memory(),
            BackboneError::Batch(e) => e.is_out_of_memory(),
            _ => false,
        }
    }
}
