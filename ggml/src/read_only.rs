//! Which tensors belong to a live weight store, and so must never be written: the address
//! ranges of the stores' pools, registered while each store lives.
//!
//! why its own file: tensors, backends and schedulers ask (before a write, a compute), and the
//! stores register; in `weights.rs` the asking files imported the store above them.

use std::ptr::NonNull;
use std::sync::RwLock;

use ggml_sys as sys;

/// Address ranges of the pools holding store tensors' structs (one per live store).
static READ_ONLY: RwLock<Vec<(usize, usize)>> = RwLock::new(Vec::new());

/// Whether `p` points at a tensor of a live [`WeightStore`](super::WeightStore).
fn in_store(p: *const sys::ggml_tensor) -> bool {
    let a = p as usize;
    let ranges = READ_ONLY.read().unwrap_or_else(|e| e.into_inner());
    ranges.iter().any(|&(start, end)| a >= start && a < end)
}

/// Whether the data of tensor `t` (its own, or its view source's) belongs to a weight store:
/// nothing may write it.
pub(crate) fn is_read_only(t: *mut sys::ggml_tensor) -> bool {
    let Some(t) = NonNull::new(t) else {
        return false;
    };
    // SAFETY: callers pass tensors that are live (a handle's tensor or a graph member); reading
    // the `view_src` field races with nothing, as a tensor's own struct is only written by the
    // thread that owns its context.
    let src = unsafe { (*t.as_ptr()).view_src };
    in_store(t.as_ptr()) || (!src.is_null() && in_store(src))
}

/// Whether the struct of tensor `t` itself belongs to a weight store.
pub(crate) fn is_store_tensor(t: *const sys::ggml_tensor) -> bool {
    in_store(t)
}

/// Registers the address range `range` of a new store's pool.
pub(crate) fn register(range: (usize, usize)) {
    READ_ONLY
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(range);
}

/// Unregisters `range` (one registration of it), before the pool is freed.
pub(crate) fn unregister(range: (usize, usize)) {
    let mut ranges = READ_ONLY.write().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = ranges.iter().position(|&r| r == range) {
        ranges.swap_remove(i);
    }
}
