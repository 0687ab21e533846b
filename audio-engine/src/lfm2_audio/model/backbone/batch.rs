//! Single-position steps of several sequences as one graph (the [`graph`] module's batch of
//! one-position chunks), computed with [`Backend::compute_column_stable`] so that each step
//! gets the bits it gets alone; and the memory and threads those graphs compute with.

use crate::ggml::{Backend, GraphAllocator};

use super::cache::DecodeCache;
use super::error::BackboneError;
use super::graph::{self, Chunk, Compute};
use super::inputs::{check_cache, gather};
use super::model::Backbone;
use super::types::{ForwardOutput, Position, Rows};

type R<T> = Result<T, BackboneError>;

/// One sequence's next step: the position to run at the end of its cache.
#[derive(Debug)]
pub struct Step<'c, 'p> {
    /// The sequence's cache (advanced by one position when the batch succeeds).
    pub cache: &'c mut DecodeCache,
    /// The position to run.
    pub position: Position<'p>,
    /// Whether the text logits of the position are wanted.
    pub logits: bool,
}

/// The memory and threads batched steps compute with: a backend instance of the weights'
/// device and the allocator of the batch graphs' intermediate tensors.
#[derive(Debug)]
pub struct BatchCompute {
    backend: Backend,
    alloc: GraphAllocator,
}

impl BatchCompute {
    /// Batched steps computed on `backend` (an instance of the device the weights live on),
    /// their device placements recorded under `label` (see [`crate::ggml::fallbacks`]).
    pub fn new(backend: Backend, label: &'static str) -> R<BatchCompute> {
        let alloc = GraphAllocator::labelled(&backend, label)?;
        Ok(BatchCompute { backend, alloc })
    }

    /// The backend the batches compute on.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Computes `g` (allocated last by [`BatchCompute::alloc_graph`]) with every column's bits
    /// independent of the batch's width (see [`crate::ggml::Backend::compute_column_stable`]).
    pub(crate) fn compute_column_stable(&self, g: &crate::ggml::Graph<'_>) -> R<()> {
        Ok(self.alloc.compute_column_stable(&self.backend, g)?)
    }

    /// Allocates `g`'s intermediate tensors in the batches' graph memory.
    pub(crate) fn alloc_graph(&self, g: &crate::ggml::Graph<'_>) -> R<()> {
        Ok(self.alloc.alloc_graph(g)?)
    }
}

impl Backbone {
    /// Checks that `step` could run: its cache fits this backbone and has room for one more
    /// position, and its position is valid (token id, embedding width, codes).
    pub fn check_step(&self, cache: &DecodeCache, position: &Position<'_>) -> R<()> {
        check_cache(self, cache, 1)?;
        gather(self, std::slice::from_ref(position)).map(drop)
    }

    /// Runs one position of each step's sequence as one graph, writes each into its cache and
    /// returns each step's final-norm hidden state (and its logits when asked for), in order.
    ///
    /// Each step gets the bits [`Backbone::forward`] gives it alone with one position and
    /// [`Rows::Last`](super::Rows::Last). On error no cache advances (each keeps its length;
    /// rows past it may have been written, which no later run reads).
    pub fn forward_steps(
        &self,
        compute: &BatchCompute,
        steps: &mut [Step<'_, '_>],
    ) -> R<Vec<ForwardOutput>> {
        if steps.is_empty() {
            return Err(BackboneError::Input("no steps to run".into()));
        }
        let chunks: Vec<Chunk<'_, '_>> = steps
            .iter()
            .map(|s| Chunk {
                cache: s.cache,
                positions: std::slice::from_ref(&s.position),
                rows: Rows::Last,
                logits: s.logits,
            })
            .collect();
        let compute = Compute {
            alloc: &compute.alloc,
            backend: &compute.backend,
            column_stable: true,
        };
        let outputs = graph::run(self, &compute, &chunks)?;
        for s in steps.iter_mut() {
            s.cache.advance(1);
        }
        Ok(outputs)
    }
}
