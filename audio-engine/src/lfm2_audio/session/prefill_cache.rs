//! Prefill-block reuse across the turns of multi-turn conversations.
//!
//! A chunked prefill runs a prompt in blocks of [`BLOCK_POSITIONS`] positions at multiples of
//! [`BLOCK_POSITIONS`]; what a block writes into the decode cache depends only on the prompt up
//! to its end. [`PrefillCache`] keeps a host copy of each full block of its recent prefills
//! (the block's K/V rows and the conv tails after it) together with the block's span (token
//! ids, audio rows by bytes, frame codes: positions are implied by the block index). The next
//! prefill compares its blocks from the start with the best-matching kept conversation,
//! restores the matching ones into the cleared cache exactly as running them would have left
//! it, and runs the rest. Its last block always runs (its outputs are needed). Several
//! conversations are kept; the least recently used is dropped.

use std::collections::VecDeque;

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::model::backbone::BLOCK_POSITIONS;
use crate::lfm2_audio::model::backbone::{
    Backbone, CacheBlock, DecodeCache, ForwardOutput, Position,
};
use crate::lfm2_audio::model::engine::prefill_blocks_with;

/// One position as a block's span records it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SpanItem {
    Text(u32),
    /// An audio-in row, by the bits of its values (so -0.0 and NaN payloads compare exactly).
    Audio(Vec<u32>),
    Frame(Vec<u32>),
}

fn span(positions: &[Position<'_>]) -> Vec<SpanItem> {
    positions
        .iter()
        .map(|p| match *p {
            Position::Text(t) => SpanItem::Text(t),
            Position::Audio(row) => SpanItem::Audio(row.iter().map(|v| v.to_bits()).collect()),
            Position::Frame(codes) => SpanItem::Frame(codes.to_vec()),
        })
        .collect()
}

#[derive(Debug, Clone)]
struct SavedBlock {
    span: Vec<SpanItem>,
    block: CacheBlock,
}

/// Kept prefill blocks of up to `slots` conversations.
#[derive(Debug, Default)]
pub struct PrefillCache {
    slots: usize,
    /// Most recently used first.
    conversations: VecDeque<Vec<SavedBlock>>,
    resumed: usize,
}

impl PrefillCache {
    /// A cache keeping up to `slots` conversations (0 disables reuse).
    pub fn new(slots: usize) -> PrefillCache {
        PrefillCache {
            slots,
            conversations: VecDeque::new(),
            resumed: 0,
        }
    }

    /// Positions the last [`PrefillCache::prefill`] restored instead of running.
    pub fn resumed_prefill_steps(&self) -> usize {
        self.resumed
    }

    /// Conversations kept.
    pub fn len(&self) -> usize {
        self.conversations.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.conversations.is_empty()
    }

    /// Host bytes the kept blocks take.
    pub fn size_bytes(&self) -> usize {
        self.conversations
            .iter()
            .flatten()
            .map(|b| b.block.size_bytes())
            .sum()
    }

    /// Forgets every kept block.
    pub fn clear(&mut self) {
        self.conversations.clear();
    }

    /// Clears `cache` and prefills `positions` from position 0, restoring the leading blocks a
    /// kept conversation shares and running the rest in blocks; returns the last position's
    /// outputs. On error nothing kept changes.
    pub fn prefill(
        &mut self,
        backbone: &Backbone,
        cache: &mut DecodeCache,
        positions: &[Position<'_>],
    ) -> Result<ForwardOutput, EngineError> {
        if positions.is_empty() {
            return Err(EngineError::InvalidRequest("empty prompt".into()));
        }
        if positions.len() > cache.capacity() {
            return Err(EngineError::Capacity(format!(
                "the prompt needs {} positions, the context holds {}",
                positions.len(),
                cache.capacity()
            )));
        }
        cache.clear()?;
        // The last block always runs: only blocks that end before the prompt's last position
        // may be restored.
        let restorable = (positions.len() - 1) / BLOCK_POSITIONS;
        let spans: Vec<Vec<SpanItem>> = (0..positions.len() / BLOCK_POSITIONS)
            .map(|b| span(&positions[b * BLOCK_POSITIONS..(b + 1) * BLOCK_POSITIONS]))
            .collect();
        let matching = |conv: &Vec<SavedBlock>| {
            conv.iter()
                .zip(&spans)
                .take(restorable)
                .take_while(|(saved, s)| &saved.span == *s)
                .count()
        };
        let best = if self.slots == 0 {
            None
        } else {
            self.conversations
                .iter()
                .enumerate()
                .map(|(i, c)| (i, matching(c)))
                .filter(|&(_, n)| n > 0)
                .max_by_key(|&(i, n)| (n, std::cmp::Reverse(i)))
        };
        let mut kept: Vec<SavedBlock> = Vec::new();
        if let Some((i, n)) = best {
            for saved in &self.conversations[i][..n] {
                cache.restore_block(&saved.block)?;
                kept.push(saved.clone());
            }
        }
        let restored = kept.len() * BLOCK_POSITIONS;
        let mut fresh: Vec<SavedBlock> = Vec::new();
        let keep_blocks = self.slots > 0;
        let out = prefill_blocks_with(
            backbone,
            cache,
            &positions[restored..],
            &mut |c: &DecodeCache, first| {
                if keep_blocks {
                    let b = (restored + first) / BLOCK_POSITIONS;
                    fresh.push(SavedBlock {
                        span: spans[b].clone(),
                        block: c.save_last_block()?,
                    });
                }
                Ok(())
            },
        );
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                // A failed run leaves the cache in an unknown state; the kept blocks are intact.
                let _ = cache.clear();
                return Err(e);
            }
        };
        self.resumed = restored;
        if keep_blocks {
            kept.extend(fresh);
            if let Some((i, _)) = best {
                // why: the new prompt extends (or diverges from) that conversation; its blocks
                // now describe the conversation's latest state.
                self.conversations.remove(i);
            }
            if !kept.is_empty() {
                self.conversations.push_front(kept);
            }
            self.conversations.truncate(self.slots);
        }
        Ok(out)
    }
}
