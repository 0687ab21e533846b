//! One sequence's chunk of positions through the backbone: a batch of one chunk of the
//! [`graph`](super::graph) module.

use super::cache::DecodeCache;
use super::error::BackboneError;
use super::graph;
use super::model::Backbone;
use super::types::{ForwardOutput, Position, Rows};

// why an `impl` apart from the type's file (as `batch.rs` holds the batched steps'): the type
// (`model.rs`) sits below the graph code (`graph.rs`, `inputs.rs`) that reads it, and this
// entry point above that code.
impl Backbone {
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
