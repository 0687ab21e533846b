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
mod graph;
mod inputs;
pub mod scheduler;

use crate::ggml::{Backend, GgmlError, Param};

use self::config::{Lfm2Backbone, Lfm2Config, Lfm2Weights};
use super::load_error::LoadError;
use super::weights::WeightFile;

#[cfg_attr(not(feature = "testkit"), allow(unused_imports))]
pub use batch::{BatchCompute, Step};
pub use cache::{CacheBlock, DecodeCache, BLOCK_POSITIONS};

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
    /// overcommit, of memory): see the [`cache`] module's "Out of memory".
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

/// One input position of a forward chunk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Position<'a> {
    /// A text token id.
    Text(u32),
    /// An audio-in embedding (one adapter output row, `hidden` values).
    Audio(&'a [f32]),
    /// An audio-out frame: one code per codebook, embedded as the sum of the codebooks' rows.
    Frame(&'a [u32]),
}

/// Which rows a forward call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Only the chunk's last position (decode steps, end of prefill).
    Last,
    /// Every position of the chunk (tests, scoring).
    All,
    /// Nothing (prefill blocks whose outputs nobody reads).
    None,
}

/// What a forward call returns, for the requested rows in position order.
#[derive(Debug, Clone, Default)]
pub struct ForwardOutput {
    /// Number of rows returned.
    pub rows: usize,
    /// Final-norm hidden states, `rows x hidden`, row-major.
    pub hidden: Vec<f32>,
    /// Text logits, `rows x vocab`, when asked for.
    pub logits: Option<Vec<f32>>,
}

/// The mmproj tensor holding the F32 embedding table of generated audio codes
/// ([`AudioCodeTable`]).
pub const AUDIO_CODE_TABLE: &str = "a.position_embd.weight";

/// The table audio-out codes are embedded with: `[hidden, codebooks * codebook_size]`.
#[derive(Debug)]
pub struct AudioCodeTable {
    table: Param,
    codebooks: usize,
    codebook_size: usize,
}

impl AudioCodeTable {
    /// The table `name` of `file`, split into `codebooks` codebooks (its rows must divide).
    pub fn new(
        file: WeightFile,
        name: &str,
        codebooks: usize,
        hidden: usize,
    ) -> Result<AudioCodeTable, LoadError> {
        let table = file
            .vb()
            .get_any_shape(name, super::weights::Role::Matrix)?;
        let ne = table.ne();
        if ne[0] as usize != hidden || codebooks == 0 || ne[1] as usize % codebooks != 0 {
            return Err(LoadError::BadShape {
                file: file.path().to_path_buf(),
                tensor: name.to_owned(),
                expected: vec![
                    hidden as u64,
                    codebooks as u64 * (ne[1] as u64 / codebooks.max(1) as u64),
                ],
                found: vec![ne[0] as u64, ne[1] as u64],
            });
        }
        let codebook_size = ne[1] as usize / codebooks;
        Ok(AudioCodeTable {
            table,
            codebooks,
            codebook_size,
        })
    }
}

/// A loaded LFM2 backbone: weights bound into typed layers, immutable and shareable. Every run's
/// state (K/V rows, conv tails, graph memory, the backend instance it computes on) lives in the
/// caller's [`DecodeCache`].
pub struct Backbone {
    config: Lfm2Config,
    model: Lfm2Weights,
    weights: WeightFile,
    audio_codes: Option<AudioCodeTable>,
    sliding_window: Option<usize>,
    /// The backend the weights were loaded on ([`Backbone::new_cache`] computes on it).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    backend: Backend,
    /// What its graphs' device placements are recorded under ([`crate::ggml::fallbacks`]).
    label: &'static str,
}

impl std::fmt::Debug for Backbone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backbone")
            .field("config", &self.config)
            .field("weights", &self.weights)
            .finish()
    }
}

impl Backbone {
    /// Loads a validated backbone file onto `backend`.
    pub fn load(file: Lfm2Backbone, backend: &Backend) -> Result<Backbone, LoadError> {
        let Lfm2Backbone { gguf, config } = file;
        // The detokenizer's LFM2 attends within a causal sliding window.
        let sliding_window = gguf
            .get_integer_opt::<u64>(super::gguf_keys::LFM2_SLIDING_WINDOW)?
            .filter(|&w| w > 0)
            .map(|w| w as usize);
        // why: the tokenizer arrays are metadata, not tensors; every tensor of the file is used.
        let weights = WeightFile::load(gguf, backend)?;
        let model = Lfm2Weights::load(&weights.vb(), &config)?;
        Ok(Backbone {
            config,
            model,
            weights,
            audio_codes: None,
            sliding_window,
            backend: backend.clone(),
            label: "backbone",
        })
    }

    /// Sets the table audio-out frames are embedded with.
    pub fn set_audio_codes(&mut self, table: AudioCodeTable) {
        self.audio_codes = Some(table);
    }

    /// The audio-code table, if set.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn audio_codes(&self) -> Option<&AudioCodeTable> {
        self.audio_codes.as_ref()
    }

    /// The causal sliding window of the attention layers, if the file sets one
    /// (`lfm2.attention.sliding_window`): a position attends to itself and the `w - 1` before it.
    pub fn sliding_window(&self) -> Option<usize> {
        self.sliding_window
    }

    /// Whether any layer is an attention layer (else no run needs positions or a mask).
    pub fn has_attention(&self) -> bool {
        (0..self.config.num_hidden_layers as usize)
            .any(|il| self.config.layer_kind(il) == config::LayerKind::Attention)
    }

    /// Hyperparameters.
    pub fn config(&self) -> &Lfm2Config {
        &self.config
    }

    /// The loaded weights (metadata included).
    pub fn weights(&self) -> &WeightFile {
        &self.weights
    }

    /// The backend the graphs run on.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The typed layers.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn layers(&self) -> &Lfm2Weights {
        &self.model
    }

    /// A decode cache for `capacity` positions, computing on the backend the weights were loaded
    /// on.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn new_cache(&self, capacity: usize) -> Result<DecodeCache, BackboneError> {
        DecodeCache::new(&self.config, &self.backend, capacity, self.label)
    }

    /// This backbone with its graphs' device placements recorded under `label` (the
    /// detokenizer's LFM2 apart from the main backbone; see [`crate::ggml::fallbacks`]).
    pub(crate) fn with_label(mut self, label: &'static str) -> Backbone {
        self.label = label;
        self
    }

    /// A decode cache for `capacity` positions whose runs compute on `backend` (an instance of
    /// the weights' device, e.g. [`Backend::new_instance`]), so several caches run at once.
    pub fn new_cache_on(
        &self,
        backend: &Backend,
        capacity: usize,
    ) -> Result<DecodeCache, BackboneError> {
        DecodeCache::new(&self.config, backend, capacity, self.label)
    }

    /// Runs `positions` at the cache's next positions, writes them into the cache and returns
    /// the requested rows. On error the cache's length is unchanged (its rows past the length
    /// may have been overwritten, which no later run reads).
    pub fn forward(
        &self,
        cache: &mut DecodeCache,
        positions: &[Position<'_>],
        rows: Rows,
        logits: bool,
    ) -> Result<ForwardOutput, BackboneError> {
        let compute = graph::Compute {
            alloc: cache.allocator(),
            backend: cache.backend(),
            column_stable: false,
        };
        let chunk = graph::Chunk {
            cache,
            positions,
            rows,
            logits,
        };
        let out = graph::run(self, &compute, &[chunk])?.pop();
        cache.advance(positions.len());
        Ok(out.unwrap_or_default())
    }
}
