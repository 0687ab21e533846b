//! The backbone's decode cache: attention K/V rows and conv tails of one conversation.
//!
//! The cache is owned by the engine, not by libllama, so the session can copy and restore it
//! block by block (multi-turn prefill reuse). On the CPU its memory is a lazily zeroed anonymous
//! mapping wrapped as a ggml CPU buffer: capacity that was never written never becomes resident,
//! so a large context costs only what a conversation has used (for the transposed values, at
//! least one page per value dimension and layer: 2 MiB per attention layer at full size).
//!
//! Layout (ggml order), per attention layer: `K` `[head_dim * kv_heads, capacity]`, one row per
//! position, so a block's keys are one contiguous byte range; `V` transposed,
//! `[capacity, head_dim * kv_heads]`, one row per value dimension (the attention reads `V^T` as
//! a view; see [`KvRows`](crate::lfm2_audio::model::nn::KvRows)), so a block's values are one
//! range per dimension. Per conv layer: `[L - 1, hidden]`, the last `L - 1` inputs of its
//! depthwise convolution (its whole recurrent state).
//!
//! # Out of memory
//!
//! The cache is sized by its capacity and made whole in [`DecodeCache::new`], before the
//! allocator of its runs' graphs and before any run: on the CPU its mapping is the first and
//! largest allocation of a request and the only one that grows with the request's budget. A
//! mapping that cannot be made is [`BackboneError::CacheMemory`] (bytes, positions and the OS
//! error), never a panic; what pages touched later under memory pressure do is the policy in
//! [`limits`](crate::lfm2_audio::limits) ("Out of memory").

use crate::ggml::lazy_memory::{resident_bytes, LazyZeroed};
use crate::ggml::{Backend, BackendBuffer, Context, GgmlType, GraphAllocator, Tensor};

use super::config::{LayerKind, Lfm2Config};
use super::error::BackboneError;

/// Bytes of one F32 value.
const F32: usize = std::mem::size_of::<f32>();

/// Most positions one prefill block runs: a prompt's chunks (see
/// [`Prompt::blocks`](crate::lfm2_audio::text::prompt::Prompt::blocks)) are split into blocks of
/// this many positions from their start, and the multi-turn session reuses whole blocks.
pub const BLOCK_POSITIONS: usize = 256;

/// Which cache tensors a layer has.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LayerSlot {
    /// Indices of K and V in the cache context's tensor list.
    Attention { k: usize, v: usize },
    /// Index of the conv tail.
    Conv { state: usize },
}

/// Attention K/V rows and conv tails for up to `capacity` positions of one sequence, with the
/// compute state its runs use: the backend they compute on and the graph allocator whose buffer
/// holds their intermediate tensors.
pub struct DecodeCache {
    backend: Backend,
    alloc: GraphAllocator,
    ctx: Context,
    buffer: BackendBuffer,
    slots: Vec<LayerSlot>,
    capacity: usize,
    len: usize,
    /// Address and length of the lazily zeroed mapping (CPU only), for residency queries.
    mapping: Option<(usize, usize)>,
    kv_row_bytes: Vec<usize>,
}

impl std::fmt::Debug for DecodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeCache")
            .field("capacity", &self.capacity)
            .field("len", &self.len)
            .field("bytes", &self.buffer.size())
            .finish()
    }
}

impl DecodeCache {
    /// A cache for `capacity` positions (rounded up to whole blocks) of a model with `cfg`.
    ///
    /// On a CPU backend the memory is a lazily zeroed mapping; elsewhere a backend buffer whose
    /// conv tails are zeroed.
    pub fn new(
        cfg: &Lfm2Config,
        backend: &Backend,
        capacity: usize,
        label: &'static str,
    ) -> Result<DecodeCache, BackboneError> {
        if capacity == 0 {
            return Err(BackboneError::Capacity {
                needed: 1,
                capacity: 0,
            });
        }
        let capacity = capacity.div_ceil(BLOCK_POSITIONS) * BLOCK_POSITIONS;
        let n_layers = cfg.num_hidden_layers as usize;
        let ctx = Context::metadata_with_graph(2 * n_layers, 0)?;
        let h = i64::from(cfg.hidden_size);
        let tail = i64::from(cfg.conv_L_cache.saturating_sub(1)).max(1);
        let mut slots = Vec::with_capacity(n_layers);
        let mut kv_row_bytes = Vec::with_capacity(n_layers);
        let mut n = 0usize;
        let mut bytes = 0usize;
        for il in 0..n_layers {
            match cfg.layer_kind(il) {
                LayerKind::Attention => {
                    let row = i64::from(cfg.head_dim) * i64::from(cfg.num_key_value_heads[il]);
                    let k = ctx.new_tensor_2d(GgmlType::F32, row, capacity as i64)?;
                    k.set_name(&format!("cache_k_l{il}"))?;
                    let v = ctx.new_tensor_2d(GgmlType::F32, capacity as i64, row)?;
                    v.set_name(&format!("cache_v_l{il}"))?;
                    bytes += k.nbytes() + v.nbytes();
                    slots.push(LayerSlot::Attention { k: n, v: n + 1 });
                    kv_row_bytes.push(row as usize * 4);
                    n += 2;
                }
                LayerKind::Conv => {
                    let s = ctx.new_tensor_2d(GgmlType::F32, tail, h)?;
                    s.set_name(&format!("cache_conv_l{il}"))?;
                    bytes += s.nbytes();
                    slots.push(LayerSlot::Conv { state: n });
                    kv_row_bytes.push(0);
                    n += 1;
                }
            }
        }
        // why: each tensor is padded to the buffer's alignment; 256 bytes per tensor is ample.
        let size = bytes + 256 * (n + 1);
        let (buffer, mapping) = if backend.is_cpu() {
            let mem = LazyZeroed::new(size).map_err(|source| BackboneError::CacheMemory {
                bytes: size,
                positions: capacity,
                source,
            })?;
            let mapping = (mem.addr(), mem.len());
            let buffer = BackendBuffer::from_host_memory(mem)?;
            for t in ctx.tensors() {
                buffer.alloc_tensor(&ctx, t)?;
            }
            (buffer, Some(mapping))
        } else {
            (ctx.alloc_tensors(backend)?, None)
        };
        let mut cache = DecodeCache {
            backend: backend.clone(),
            alloc: GraphAllocator::labelled(backend, label)?,
            ctx,
            buffer,
            slots,
            capacity,
            len: 0,
            mapping,
            kv_row_bytes,
        };
        if cache.mapping.is_none() {
            cache.zero_conv_tails()?;
        }
        Ok(cache)
    }

    /// Positions the cache can hold (a multiple of [`BLOCK_POSITIONS`]).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Positions written so far: the next position to run.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing has been written since creation or the last [`DecodeCache::clear`].
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of memory the cache spans (resident or not).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn size_bytes(&self) -> usize {
        self.buffer.size()
    }

    /// Bytes of the cache's mapping that are resident in RAM (CPU caches only; `None` for
    /// device memory).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn resident_bytes(&self) -> Option<usize> {
        let (addr, len) = self.mapping?;
        resident_bytes(addr, len).ok()
    }

    /// Forgets every position: the next run starts a new sequence at position 0.
    ///
    /// K/V rows are not touched (a run only reads rows it or an earlier run of the same sequence
    /// wrote); the conv tails are zeroed because a sequence's convolution starts from zeros.
    pub fn clear(&mut self) -> Result<(), BackboneError> {
        self.zero_conv_tails()?;
        self.len = 0;
        Ok(())
    }

    fn zero_conv_tails(&mut self) -> Result<(), BackboneError> {
        let tensors = self.ctx.tensors();
        for slot in &self.slots {
            if let LayerSlot::Conv { state } = *slot {
                tensors[state].set_zero()?;
            }
        }
        Ok(())
    }

    /// The backend the cache's runs compute on.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The allocator of the runs' graphs (its buffer size is what the bench's prefill probe
    /// reports, in lfm2-audio-tooling).
    pub fn allocator(&self) -> &GraphAllocator {
        &self.alloc
    }

    /// Marks `n` more positions as written (after a successful run).
    pub(crate) fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// The tensor handles of the cache, in slot-index order.
    pub(crate) fn tensors(&self) -> Vec<Tensor<'_>> {
        self.ctx.tensors()
    }

    /// Per-layer slots.
    pub(crate) fn slots(&self) -> &[LayerSlot] {
        &self.slots
    }

    /// Bytes of one K (or V) row of layer `il` (0 for conv layers).
    pub(crate) fn kv_row_bytes(&self, il: usize) -> usize {
        self.kv_row_bytes[il]
    }

    /// A host copy of what the block from position `start` to the cache's current length
    /// wrote: the K/V rows of its positions and the conv tails after it (call it right after
    /// the block ran). The block must hold at least one position.
    pub fn save_block(&self, start: usize) -> Result<CacheBlock, BackboneError> {
        let len = self.len;
        if start >= len {
            return Err(BackboneError::Input(format!(
                "a block from position {start} is empty; the cache holds {len} positions"
            )));
        }
        let n = len - start;
        let tensors = self.ctx.tensors();
        let mut layers = Vec::with_capacity(self.slots.len());
        for (il, slot) in self.slots.iter().enumerate() {
            layers.push(match *slot {
                LayerSlot::Attention { k, v } => {
                    let row = self.kv_row_bytes[il];
                    let mut kb = vec![0u8; row * n];
                    tensors[k].read_bytes(start * row, &mut kb)?;
                    // V: positions start..len of each value dimension's row.
                    let mut vb = vec![0u8; row * n];
                    let v_row = self.capacity * F32;
                    for (d, part) in vb.chunks_exact_mut(n * F32).enumerate() {
                        tensors[v].read_bytes(d * v_row + start * F32, part)?;
                    }
                    SavedLayer::Attention { k: kb, v: vb }
                }
                LayerSlot::Conv { state } => SavedLayer::Conv {
                    tail: tensors[state].get_bytes()?,
                },
            });
        }
        Ok(CacheBlock {
            start,
            positions: n,
            layers,
        })
    }

    /// Writes a saved block back: the cache must hold exactly the positions before it. The
    /// cache then holds what running the block would have left, byte for byte.
    pub fn restore_block(&mut self, block: &CacheBlock) -> Result<(), BackboneError> {
        if block.start != self.len {
            return Err(BackboneError::Input(format!(
                "block starts at {}, the cache holds {} positions",
                block.start, self.len
            )));
        }
        let end = block.start + block.positions;
        if end > self.capacity {
            return Err(BackboneError::Capacity {
                needed: end,
                capacity: self.capacity,
            });
        }
        if block.layers.len() != self.slots.len() {
            return Err(BackboneError::CacheMismatch);
        }
        let tensors = self.ctx.tensors();
        for (il, (slot, saved)) in self.slots.iter().zip(&block.layers).enumerate() {
            match (*slot, saved) {
                (LayerSlot::Attention { k, v }, SavedLayer::Attention { k: kb, v: vb }) => {
                    let row = self.kv_row_bytes[il];
                    if kb.len() != row * block.positions || vb.len() != kb.len() {
                        return Err(BackboneError::CacheMismatch);
                    }
                    tensors[k].set_bytes(block.start * row, kb)?;
                    let v_row = self.capacity * F32;
                    let n = block.positions * F32;
                    for (d, part) in vb.chunks_exact(n).enumerate() {
                        tensors[v].set_bytes(d * v_row + block.start * F32, part)?;
                    }
                }
                (LayerSlot::Conv { state }, SavedLayer::Conv { tail }) => {
                    if tail.len() != tensors[state].nbytes() {
                        return Err(BackboneError::CacheMismatch);
                    }
                    tensors[state].set_bytes(0, tail)?;
                }
                _ => return Err(BackboneError::CacheMismatch),
            }
        }
        self.len = end;
        Ok(())
    }
}

/// One layer's part of a saved block.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SavedLayer {
    Attention { k: Vec<u8>, v: Vec<u8> },
    Conv { tail: Vec<u8> },
}

/// A host copy of one prefill block's cache writes (see [`DecodeCache::save_block`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheBlock {
    start: usize,
    positions: usize,
    layers: Vec<SavedLayer>,
}

impl CacheBlock {
    /// First position of the block.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn start(&self) -> usize {
        self.start
    }

    /// Positions the block holds.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// Host bytes the copy takes.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn size_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| match l {
                SavedLayer::Attention { k, v } => k.len() + v.len(),
                SavedLayer::Conv { tail } => tail.len(),
            })
            .sum()
    }
}
