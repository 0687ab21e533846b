//! A loaded backbone: its typed layers, its weights and the audio-code table, and the decode
//! caches it makes. Its runs are in [`forward`](super::forward) (one sequence's chunk) and
//! [`batch`](super::batch) (one step of several sequences).

use crate::ggml::{Backend, Param};

use super::super::load_error::LoadError;
use super::super::weights::{Role, WeightFile};
use super::cache::DecodeCache;
use super::config::{LayerKind, Lfm2Backbone, Lfm2Config, Lfm2Weights};
use super::error::BackboneError;

/// The table audio-out codes are embedded with: `[hidden, codebooks * codebook_size]`.
#[derive(Debug)]
pub struct AudioCodeTable {
    pub(super) table: Param,
    pub(super) codebooks: usize,
    pub(super) codebook_size: usize,
}

impl AudioCodeTable {
    /// The table `name` of `file`, split into `codebooks` codebooks (its rows must divide).
    pub fn new(
        file: WeightFile,
        name: &str,
        codebooks: usize,
        hidden: usize,
    ) -> Result<AudioCodeTable, LoadError> {
        let table = file.vb().get_any_shape(name, Role::Matrix)?;
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
    pub(super) config: Lfm2Config,
    pub(super) model: Lfm2Weights,
    pub(super) weights: WeightFile,
    pub(super) audio_codes: Option<AudioCodeTable>,
    pub(super) sliding_window: Option<usize>,
    /// The backend the weights were loaded on ([`Backbone::new_cache`] computes on it).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(super) backend: Backend,
    /// What its graphs' device placements are recorded under ([`crate::ggml::fallbacks`]).
    pub(super) label: &'static str,
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
            .get_integer_opt::<u64>(super::super::gguf_keys::LFM2_SLIDING_WINDOW)?
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
            .any(|il| self.config.layer_kind(il) == LayerKind::Attention)
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
}
