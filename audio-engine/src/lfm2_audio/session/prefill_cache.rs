//! Prefill-block reuse across the turns of multi-turn conversations.
//!
//! Every prefill runs its prompt in the blocks of the prompt's partition
//! ([`Prompt::blocks`](crate::lfm2_audio::text::prompt::Prompt::blocks)): chunks that follow the
//! conversation's turns, each split into blocks of at most
//! [`BLOCK_POSITIONS`](crate::lfm2_audio::model::backbone::BLOCK_POSITIONS) positions from its
//! start. What a block writes into the decode cache depends only on the prompt up to its end and
//! on where the blocks lie, and the partition of a conversation's earlier turns is the same in
//! every later prompt. [`PrefillCache`] keeps a host copy of each block of its recent prefills
//! (the block's K/V rows and the conv tails after it) together with the block's range and span
//! (token ids, audio rows by bytes, frame codes). The next prefill compares its blocks from the
//! start with the best-matching kept conversation, restores the matching ones into the cleared
//! cache exactly as running them would have left it, and runs the rest; a prompt's last block
//! always runs (its outputs are needed). Several conversations are kept; the least recently used
//! is dropped.
//!
//! [`PrefillCache::extend`] runs a prompt ahead of the request that will need it (a finished
//! reply and its closing markup, while the user listens): the same blocks a later prefill would
//! run, kept the same way, stoppable between blocks.

use std::collections::VecDeque;
use std::ops::Range;

use crate::lfm2_audio::engine::prefill_blocks_with;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::KeptPrefill;
use crate::lfm2_audio::model::backbone::{
    Backbone, CacheBlock, DecodeCache, ForwardOutput, Position,
};

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
    range: Range<usize>,
    span: Vec<SpanItem>,
    block: CacheBlock,
    /// The last position's outputs when this block ended a prefill that asked for them: a
    /// prompt that ends with this block then restores it too instead of running it.
    outputs: Option<ForwardOutput>,
}

/// What [`PrefillCache::extend`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extension {
    /// Positions restored from kept blocks.
    pub restored: usize,
    /// Positions run (and kept).
    pub ran: usize,
    /// Whether `stop` ended the run before every block was done.
    pub stopped: bool,
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

    /// Conversations it keeps at most.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Positions the last [`PrefillCache::prefill`] restored instead of running.
    pub fn resumed_prefill_steps(&self) -> usize {
        self.resumed
    }

    /// Conversations kept.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn len(&self) -> usize {
        self.conversations.len()
    }

    /// Whether nothing is kept.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.conversations.is_empty()
    }

    /// Host bytes the kept blocks take.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn size_bytes(&self) -> usize {
        self.conversations
            .iter()
            .flatten()
            .map(|b| {
                let outputs = b.outputs.as_ref().map_or(0, |o| {
                    (o.hidden.len() + o.logits.as_ref().map_or(0, Vec::len)) * 4
                });
                b.block.size_bytes() + outputs
            })
            .sum()
    }

    /// Forgets every kept block.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn clear(&mut self) {
        self.conversations.clear();
    }

    /// Clears `cache` and prefills `positions` (a whole prompt, partitioned into `blocks`) from
    /// position 0, restoring the leading blocks a kept conversation shares and running the rest;
    /// returns the last position's outputs. On error nothing kept changes.
    pub fn prefill(
        &mut self,
        backbone: &Backbone,
        cache: &mut DecodeCache,
        positions: &[Position<'_>],
        blocks: &[Range<usize>],
    ) -> Result<ForwardOutput, EngineError> {
        let (out, ext) = self.run(backbone, cache, positions, blocks, true, &|| false)?;
        self.resumed = ext.restored;
        Ok(out)
    }

    /// Makes sure the blocks of `positions` (partitioned into `blocks`) are kept, running those
    /// no kept conversation shares into `cache` (cleared first); `stop` is asked before each
    /// block that would run, and a true answer ends the run there (the blocks done so far are
    /// kept). With `with_outputs` the last block is kept with the last position's outputs, as
    /// a [`PrefillCache::prefill`] of the same prompt would keep it, so that prefill then runs
    /// nothing. Does nothing when reuse is disabled. On error nothing kept changes.
    pub fn extend(
        &mut self,
        backbone: &Backbone,
        cache: &mut DecodeCache,
        positions: &[Position<'_>],
        blocks: &[Range<usize>],
        with_outputs: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<Extension, EngineError> {
        if self.slots == 0 {
            return Ok(Extension::default());
        }
        let (_, ext) = self.run(backbone, cache, positions, blocks, with_outputs, stop)?;
        Ok(ext)
    }

    fn run(
        &mut self,
        backbone: &Backbone,
        cache: &mut DecodeCache,
        positions: &[Position<'_>],
        blocks: &[Range<usize>],
        want_last: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<(ForwardOutput, Extension), EngineError> {
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
        if blocks.last().map(|b| b.end) != Some(positions.len()) {
            return Err(EngineError::Invariant(format!(
                "the prefill partition ends at {:?}, the prompt has {} positions",
                blocks.last().map(|b| b.end),
                positions.len()
            )));
        }
        cache.clear()?;
        let keep_blocks = self.slots > 0;
        // When the outputs are needed, the last block is restored only with the outputs it
        // was kept with; otherwise it runs.
        let spans: Vec<Vec<SpanItem>> = if keep_blocks {
            blocks.iter().map(|b| span(&positions[b.clone()])).collect()
        } else {
            Vec::new()
        };
        let last = blocks.len() - 1;
        let matching = |conv: &Vec<SavedBlock>| {
            conv.iter()
                .zip(blocks.iter().zip(&spans))
                .enumerate()
                .take_while(|(k, (saved, (range, s)))| {
                    saved.range == **range
                        && &saved.span == *s
                        && (!want_last || *k < last || saved.outputs.is_some())
                })
                .count()
        };
        let best = if keep_blocks {
            self.conversations
                .iter()
                .enumerate()
                .map(|(i, c)| (i, matching(c)))
                .filter(|&(_, n)| n > 0)
                .max_by_key(|&(i, n)| (n, std::cmp::Reverse(i)))
        } else {
            None
        };
        let mut kept: Vec<SavedBlock> = Vec::new();
        if let Some((i, n)) = best {
            for saved in &self.conversations[i][..n] {
                if let Err(e) = cache.restore_block(&saved.block) {
                    let _ = cache.clear();
                    return Err(e.into());
                }
                kept.push(saved.clone());
            }
        }
        let restored = cache.len();
        let mut ext = Extension {
            restored,
            ..Default::default()
        };
        let mut out = match kept.last() {
            Some(saved) if want_last && restored == positions.len() => {
                saved.outputs.clone().ok_or_else(|| {
                    EngineError::Invariant(
                        "a prompt's last block was restored without its outputs".into(),
                    )
                })?
            }
            _ => ForwardOutput::default(),
        };
        if restored < positions.len() {
            if stop() {
                ext.stopped = true;
            } else {
                let first = kept.len();
                let mut fresh: Vec<SavedBlock> = Vec::new();
                let mut done = 0;
                let run = prefill_blocks_with(
                    backbone,
                    cache,
                    positions,
                    blocks,
                    want_last,
                    &mut |c: &DecodeCache, range| {
                        done = range.end;
                        if keep_blocks {
                            fresh.push(SavedBlock {
                                range: range.clone(),
                                span: spans[first + fresh.len()].clone(),
                                block: c.save_block(range.start)?,
                                outputs: None,
                            });
                        }
                        Ok(!stop())
                    },
                );
                out = match run {
                    Ok(o) => o,
                    Err(e) => {
                        // A failed run leaves the cache in an unknown state; the kept blocks are
                        // intact.
                        let _ = cache.clear();
                        return Err(e);
                    }
                };
                ext.ran = done - restored;
                ext.stopped = done < positions.len();
                if want_last && !ext.stopped {
                    if let Some(b) = fresh.last_mut() {
                        b.outputs = Some(out.clone());
                    }
                }
                kept.extend(fresh);
            }
        }
        if keep_blocks {
            if let Some((i, _)) = best {
                // why: when that conversation's blocks are a beginning of this prompt's, this
                // prompt extends (or repeats) it and its blocks now describe the conversation's
                // latest state; one that shares only a beginning (the head every conversation
                // starts with) is another conversation, and both stay.
                let old = &self.conversations[i];
                let extends = old.len() <= kept.len()
                    && old
                        .iter()
                        .zip(&kept)
                        .all(|(a, b)| a.range == b.range && a.span == b.span);
                if extends {
                    self.conversations.remove(i);
                }
            }
            if !kept.is_empty() {
                self.conversations.push_front(kept);
            }
            self.conversations.truncate(self.slots);
        }
        Ok((out, ext))
    }
}

impl KeptPrefill for PrefillCache {
    fn prefill_kept(
        &mut self,
        backbone: &Backbone,
        cache: &mut DecodeCache,
        positions: &[Position<'_>],
        blocks: &[Range<usize>],
    ) -> Result<(ForwardOutput, usize), EngineError> {
        let out = self.prefill(backbone, cache, positions, blocks)?;
        Ok((out, self.resumed_prefill_steps()))
    }
}
