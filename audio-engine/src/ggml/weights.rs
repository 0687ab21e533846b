//! Weights that outlive any borrow: a shared, immutable store of tensors and the [`Param`]
//! handles graphs bind them with.
//!
//! A [`Tensor`] borrows the [`Context`] its metadata lives in, so a model struct cannot keep
//! tensors of its own weights. A [`WeightStore`] owns a metadata-only context with the weight
//! tensors and the backend buffer with their data behind an `Arc`, and hands out [`Param`]s:
//! cheap (`Clone`: one reference count), `'static`, `Send + Sync` handles. A graph context binds
//! one with [`Context::param`], which retains the store in that context, exactly as a context
//! retains the backend buffers its tensors live in. So typed layer structs hold `Param`s built
//! once at load, and any number of graph contexts, on any number of threads, build graphs from
//! them at once.
//!
//! # Soundness
//!
//! *Lifetime.* A weight tensor's struct lives in the store's pool and its data in the store's
//! buffer. [`Context::param`] retains the store in the binding context, so both outlive every
//! `Tensor<'ctx>` handle to the weight and every tensor of that context that references it.
//! A `Param` itself holds the store's `Arc`.
//!
//! *Sharing.* After [`WeightStore::new`] returns, nothing writes a weight tensor's struct or
//! its data, so reads from several threads at once are data-race free:
//! * this layer refuses writes through handles into a store's tensors
//!   ([`Tensor::set_bytes`] and everything built on it, [`Tensor::set_name`] fail;
//!   [`Tensor::set_input`] / [`Tensor::set_output`] leave them unchanged), including writes
//!   into views of them (see [`is_read_only`]);
//! * [`Backend::compute`](super::Backend::compute) refuses a graph with a node whose operation
//!   writes into a store's memory (a `cpy` or `set_rows` into a weight or a view of one, an
//!   in-place op on one);
//! * ggml itself only reads allocated, named leaf tensors: building a graph writes the name of
//!   unnamed tensors and the compute flag of tensors with an operation
//!   (`ggml_visit_parents_graph`), the graph allocator only touches tensors without data
//!   (`ggml_gallocr_init_tensor`), and the CPU kernels read their sources. Every store tensor
//!   is named (checked when it is created), allocated and has no operation.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use ggml_sys as sys;

use super::backend::Backend;
use super::buffer::BackendBuffer;
use super::context::{Context, Retained};
use super::dtype::GgmlType;
use super::error::{GgmlError, Result};
use super::tensor::Tensor;

/// Name lookups in all stores so far (see [`name_lookups`]).
static LOOKUPS: AtomicU64 = AtomicU64::new(0);

/// How many times any [`WeightStore`] has looked a tensor up by name ([`WeightStore::get`],
/// [`WeightStore::contains`]) since the program started. Layers bind their weights once at
/// load; tests check that running a model adds no lookups.
pub fn name_lookups() -> u64 {
    LOOKUPS.load(Ordering::Relaxed)
}

/// Address ranges of the pools holding store tensors' structs (one per live store).
static READ_ONLY: RwLock<Vec<(usize, usize)>> = RwLock::new(Vec::new());

/// Whether `p` points at a tensor of a live [`WeightStore`].
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

/// One tensor to create in a [`WeightStore`].
#[derive(Debug, Clone, Copy)]
pub struct TensorSpec<'a> {
    /// Name (non-empty, at most 63 bytes); the store looks tensors up by it.
    pub name: &'a str,
    /// Element type.
    pub ty: GgmlType,
    /// Shape in ggml order (1 to 4 dimensions).
    pub ne: &'a [i64],
    /// The tensor's bytes (`nbytes` of them); `None` for a store without data.
    pub data: Option<&'a [u8]>,
}

pub(crate) struct StoreInner {
    /// Holds the tensors' structs; never used again after construction, except to be dropped.
    _ctx: Context,
    /// The tensors' data (retained by `ctx` too); `None` for a metadata-only store.
    buffer: Option<BackendBuffer>,
    /// Address range of `ctx`'s pool, registered in [`READ_ONLY`] while the store lives.
    range: (usize, usize),
    index: HashMap<String, NonNull<sys::ggml_tensor>>,
}

// SAFETY: the store is immutable after construction: no method reads or writes `ctx` (its
// `Cell`/`RefCell` bookkeeping is touched only during `WeightStore::new`, before the value is
// shared, and on drop), and the tensor structs and data it owns are never written again (see
// the module docs), so shared access from any thread only reads. The raw pointers in `index`
// point into `ctx`'s pool, which moves with it.
unsafe impl Send for StoreInner {}
// SAFETY: see `Send`.
unsafe impl Sync for StoreInner {}

impl Drop for StoreInner {
    fn drop(&mut self) {
        // why: unregister before the pool is freed, so a later allocation at the same address is
        // not mistaken for a weight.
        let mut ranges = READ_ONLY.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = ranges.iter().position(|&r| r == self.range) {
            ranges.swap_remove(i);
        }
    }
}

/// An immutable set of named weight tensors, with or without data, shared by `Arc`.
#[derive(Clone)]
pub struct WeightStore {
    inner: Arc<StoreInner>,
}

impl std::fmt::Debug for WeightStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightStore")
            .field("tensors", &self.len())
            .field("bytes", &self.size_bytes())
            .finish()
    }
}

impl WeightStore {
    /// Creates `specs`' tensors, allocates them in one buffer of `backend` and writes their data.
    pub fn new(backend: &Backend, specs: &[TensorSpec<'_>]) -> Result<WeightStore> {
        WeightStore::build(Some(backend), specs)
    }

    /// Creates `specs`' tensors without memory: their names, types and shapes only (for
    /// checking a file's tensors before loading them; graphs using them fail to allocate).
    pub fn describe(specs: &[TensorSpec<'_>]) -> Result<WeightStore> {
        WeightStore::build(None, specs)
    }

    fn build(backend: Option<&Backend>, specs: &[TensorSpec<'_>]) -> Result<WeightStore> {
        let ctx = Context::metadata_with_graph(specs.len().max(1), 0)?;
        let mut index = HashMap::with_capacity(specs.len());
        let mut tensors = Vec::with_capacity(specs.len());
        for s in specs {
            if s.name.is_empty() {
                // why: ggml names unnamed leafs when it builds a graph, which would write a
                // shared tensor.
                return Err(GgmlError::arg("WeightStore", "every weight needs a name"));
            }
            if s.ne.is_empty() || s.ne.len() > 4 {
                return Err(GgmlError::arg(
                    "WeightStore",
                    format!("{}: {} dimensions", s.name, s.ne.len()),
                ));
            }
            let t = ctx.new_tensor(s.ty, s.ne)?;
            t.set_name(s.name)?;
            if index.insert(s.name.to_owned(), t.as_non_null()).is_some() {
                return Err(GgmlError::arg(
                    "WeightStore",
                    format!("two tensors named {:?}", s.name),
                ));
            }
            tensors.push(t);
        }
        let buffer = match backend {
            Some(backend) if !specs.is_empty() => {
                let buffer = ctx.alloc_tensors(backend)?;
                for (t, s) in tensors.iter().zip(specs) {
                    let data = s.data.ok_or_else(|| {
                        GgmlError::arg("WeightStore", format!("{}: no data", s.name))
                    })?;
                    if data.len() != t.nbytes() {
                        return Err(GgmlError::shape(
                            "WeightStore",
                            format!(
                                "{}: {} bytes for a {}-byte tensor",
                                s.name,
                                data.len(),
                                t.nbytes()
                            ),
                        ));
                    }
                    t.set_bytes(0, data)?;
                }
                Some(buffer)
            }
            _ => None,
        };
        drop(tensors);
        let range = ctx.pool_range();
        READ_ONLY
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(range);
        Ok(WeightStore {
            inner: Arc::new(StoreInner {
                _ctx: ctx,
                buffer,
                range,
                index,
            }),
        })
    }

    /// The tensor `name`, if the store has it.
    pub fn get(&self, name: &str) -> Option<Param> {
        LOOKUPS.fetch_add(1, Ordering::Relaxed);
        self.inner.index.get(name).map(|&ptr| Param {
            store: self.inner.clone(),
            ptr,
        })
    }

    /// Whether the store has a tensor `name`.
    pub fn contains(&self, name: &str) -> bool {
        LOOKUPS.fetch_add(1, Ordering::Relaxed);
        self.inner.index.contains_key(name)
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.inner.index.len()
    }

    /// Whether the store has no tensors.
    pub fn is_empty(&self) -> bool {
        self.inner.index.is_empty()
    }

    /// The tensors' names, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.inner.index.keys().map(String::as_str)
    }

    /// Bytes of backend memory the data takes (0 without data).
    pub fn size_bytes(&self) -> usize {
        self.inner.buffer.as_ref().map_or(0, BackendBuffer::size)
    }

    /// Whether the tensors have data (false for [`WeightStore::describe`]).
    pub fn has_data(&self) -> bool {
        self.inner.buffer.is_some()
    }
}

/// A handle to one tensor of a [`WeightStore`]: bind it into a graph context with
/// [`Context::param`]. Cloning costs one reference count; the handle keeps its store alive.
#[derive(Clone)]
pub struct Param {
    store: Arc<StoreInner>,
    ptr: NonNull<sys::ggml_tensor>,
}

// SAFETY: the handle only reads the immutable tensor it points at (see the module docs), and
// the `Arc` keeps that tensor alive; both are fine from any thread.
unsafe impl Send for Param {}
// SAFETY: see `Send`.
unsafe impl Sync for Param {}

impl std::fmt::Debug for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Param")
            .field("name", &self.name())
            .field("type", &self.ty())
            .field("ne", &self.ne())
            .finish()
    }
}

impl Param {
    fn header(&self) -> sys::ggml_tensor {
        // SAFETY: the store (held by `self.store`) keeps the struct alive, and nothing writes it
        // after construction.
        unsafe { self.ptr.as_ptr().read() }
    }

    /// Number of elements per dimension, innermost first.
    pub fn ne(&self) -> [i64; 4] {
        self.header().ne
    }

    /// Element type.
    pub fn ty(&self) -> GgmlType {
        let id = self.header().type_;
        GgmlType::from_u32(id).unwrap_or_else(|| unreachable!("weight with unknown type id {id}"))
    }

    /// Number of dimensions, ignoring trailing dimensions of size 1 (at least 1).
    pub fn n_dims(&self) -> usize {
        let ne = self.ne();
        (1..4).rev().find(|&i| ne[i] != 1).map_or(1, |i| i + 1)
    }

    /// The tensor's name.
    pub fn name(&self) -> String {
        let hdr = self.header();
        let bytes: Vec<u8> = hdr
            .name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Whether `self` and `other` are the same tensor.
    pub fn same_as(&self, other: &Param) -> bool {
        self.ptr == other.ptr
    }
}

impl Context {
    /// The weight `p` as a tensor of this context's graphs. The context keeps `p`'s store alive
    /// from then on.
    pub fn param(&self, p: &Param) -> Tensor<'_> {
        self.retain_with(
            |r| matches!(r, Retained::Store { _store: s } if Arc::ptr_eq(s, &p.store)),
            || Retained::Store {
                _store: p.store.clone(),
            },
        );
        // SAFETY: the tensor lives in the store's pool and (with data) buffer, which this context
        // now retains, so it is valid for the borrow of `self`; it is never written (module docs).
        unsafe { Tensor::from_raw(p.ptr) }
    }
}
