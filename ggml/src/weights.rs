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
//!   into views of them (see `is_read_only`);
//! * [`Backend::compute`](super::Backend::compute) refuses a graph with a node whose operation
//!   writes into a store's memory (a `cpy` or `set_rows` into a weight or a view of one, an
//!   in-place op on one);
//! * ggml itself only reads allocated, named leaf tensors: building a graph writes the name of
//!   unnamed tensors and the compute flag of tensors with an operation
//!   (`ggml_visit_parents_graph`), the graph allocator only touches tensors without data
//!   (`ggml_gallocr_init_tensor`), and the CPU kernels read their sources. Every store tensor
//!   is named (checked when it is created), allocated and has no operation.
//!
//! *Where the data lives* ([`WeightStore::load`], [`Placement`]). Three kinds of memory, all
//! owned by buffers the store's context retains:
//! * a plain buffer of the backend, which the data was copied into before the store was shared;
//! * in place, a CPU buffer over a read-only file mapping (`ggml_backend_cpu_buffer_from_ptr`
//!   over [`MappedFile`], held by the buffer's `Arc`): nothing is copied. The pages are mapped
//!   read-only, so the "never written" rule above is also enforced by the MMU (a violation would
//!   fault, not corrupt). The file must not shrink while mapped (`SIGBUS`; see
//!   [`mapped_file`](super::mapped_file) for the policy and the checks);
//! * repacked, a buffer of one of the CPU's extra buffer types (`CPU_REPACK`), whose bytes are
//!   the weight rearranged for that type's SIMD kernel: written once, by ggml's `set_tensor`
//!   conversion, during [`WeightStore::load`]. Such bytes are not plain ggml rows, so any kernel
//!   but that type's own would read them wrongly (and the type has no `get_tensor`).
//!   Therefore [`Tensor`] reads and writes refuse them, and
//!   [`Backend::compute`](super::Backend::compute) refuses every graph in which a repacked
//!   weight is anything but the first operand, itself, of a node its buffer type supports
//!   ([`GgmlError::RepackedWeight`]); ggml's own check only looks at the first four sources and
//!   passes views. Which tensors are repacked is ggml's decision (its `supports_op` on a matrix
//!   product with the weight, as llama.cpp's `weight_buft_supported`), among those the loader
//!   says are only used as matrix-product weights ([`LoadOptions::may_repack`]).

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ggml_sys as sys;

use super::backend::{self, Backend};
use super::buffer::{BackendBuffer, HOST_ALIGNMENT};
use super::buffer_type::{self, BufferType};
use super::context::{pad, Context, Retained};
use super::dtype::GgmlType;
use super::error::{GgmlError, Result};
use super::mapped_file::MappedFile;
use super::read_only;
use super::tensor::Tensor;

/// Name lookups in all stores so far (see [`name_lookups`]).
static LOOKUPS: AtomicU64 = AtomicU64::new(0);

/// How many times any [`WeightStore`] has looked a tensor up by name ([`WeightStore::get`],
/// [`WeightStore::contains`]) since the program started. Layers bind their weights once at
/// load; tests check that running a model adds no lookups.
pub fn name_lookups() -> u64 {
    LOOKUPS.load(Ordering::Relaxed)
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

/// Where [`WeightStore::load`] put a store's tensors: how many, and their bytes, per kind of
/// memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placement {
    /// Tensors used in place in the file mapping (no copy).
    pub in_place: usize,
    /// Their bytes.
    pub in_place_bytes: usize,
    /// Tensors repacked into a CPU extra buffer type (`CPU_REPACK`, ...).
    pub repacked: usize,
    /// Their bytes (as stored in the extra buffer).
    pub repacked_bytes: usize,
    /// Tensors copied into a plain buffer of the backend.
    pub copied: usize,
    /// Their bytes.
    pub copied_bytes: usize,
}

/// How [`WeightStore::load`] may place tensors.
#[derive(Clone, Copy)]
pub struct LoadOptions<'a> {
    /// A read-only mapping the specs' data lies in (a GGUF file's,
    /// [`GgufFile::mapping`](super::gguf::GgufFile::mapping)). On a CPU backend, a tensor that is
    /// not repacked and whose data lies in it, 32-byte aligned, is used in place: the store keeps
    /// the mapping alive and copies nothing. Other tensors are copied.
    pub mapping: Option<&'a Arc<MappedFile>>,
    /// Which tensors may be repacked (by name): those a graph only ever uses as the first
    /// operand of a matrix product, never in a row lookup (`get_rows`), a view or any other
    /// op, since a repacked tensor's bytes are not plain rows. Whether one is repacked is then
    /// ggml's decision ([`Backend::with_weight_repack`]); [`Backend::compute`] refuses any other
    /// use of a repacked tensor with [`GgmlError::RepackedWeight`].
    pub may_repack: &'a dyn Fn(&str) -> bool,
}

impl std::fmt::Debug for LoadOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadOptions")
            .field("mapping", &self.mapping)
            .finish_non_exhaustive()
    }
}

impl Default for LoadOptions<'_> {
    /// No mapping and no repacking: every tensor is copied (what [`WeightStore::new`] does).
    fn default() -> Self {
        LoadOptions {
            mapping: None,
            may_repack: &|_| false,
        }
    }
}

/// Where one tensor goes.
#[derive(Clone, Copy)]
enum Place {
    Repack(BufferType),
    Mapped(usize),
    Copy,
}

pub(crate) struct StoreInner {
    /// Holds the tensors' structs; never used again after construction, except to be dropped.
    _ctx: Context,
    /// The buffers holding the tensors' data (retained by `ctx` too); empty for a metadata-only
    /// store.
    _buffers: Vec<BackendBuffer>,
    has_data: bool,
    size_bytes: usize,
    placement: Placement,
    /// Address range of `ctx`'s pool, registered in [`read_only`] while the store lives.
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
        read_only::unregister(self.range);
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
            .field("placement", &self.placement())
            .finish()
    }
}

impl WeightStore {
    /// Creates `specs`' tensors, allocates them in one buffer of `backend` and copies their data
    /// there (no repacking, nothing in place: [`LoadOptions::default`]).
    pub fn new(backend: &Backend, specs: &[TensorSpec<'_>]) -> Result<WeightStore> {
        WeightStore::build(Some(backend), specs, LoadOptions::default())
    }

    /// Creates `specs`' tensors with data on `backend`, placed as `options` allow: repacked into
    /// the CPU's extra buffer types where `options.may_repack` allows it, the backend repacks
    /// ([`Backend::weight_repack`]) and ggml has a kernel for the tensor's type and shape on this
    /// CPU; else in place in `options.mapping`; else copied into one buffer of `backend`.
    /// [`WeightStore::placement`] says what went where.
    pub fn load(
        backend: &Backend,
        specs: &[TensorSpec<'_>],
        options: LoadOptions<'_>,
    ) -> Result<WeightStore> {
        WeightStore::build(Some(backend), specs, options)
    }

    /// Creates `specs`' tensors without memory: their names, types and shapes only (for
    /// checking a file's tensors before loading them; graphs using them fail to allocate).
    pub fn describe(specs: &[TensorSpec<'_>]) -> Result<WeightStore> {
        WeightStore::build(None, specs, LoadOptions::default())
    }

    fn build(
        backend: Option<&Backend>,
        specs: &[TensorSpec<'_>],
        options: LoadOptions<'_>,
    ) -> Result<WeightStore> {
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
        let mut buffers = Vec::new();
        let mut placement = Placement::default();
        let mut size_bytes = 0;
        let has_data = backend.is_some() && !specs.is_empty();
        if let (Some(backend), true) = (backend, has_data) {
            let mut data = Vec::with_capacity(specs.len());
            for (t, s) in tensors.iter().zip(specs) {
                let d = s
                    .data
                    .ok_or_else(|| GgmlError::arg("WeightStore", format!("{}: no data", s.name)))?;
                if d.len() != t.nbytes() {
                    return Err(GgmlError::shape(
                        "WeightStore",
                        format!(
                            "{}: {} bytes for a {}-byte tensor",
                            s.name,
                            d.len(),
                            t.nbytes()
                        ),
                    ));
                }
                data.push(d);
            }
            let places = plan(backend, &tensors, specs, &data, options)?;

            // Repacked: one buffer per extra buffer type, filled through ggml's `set_tensor`,
            // which converts the plain rows into the kernel's layout.
            let mut repack_types: Vec<BufferType> = Vec::new();
            for p in &places {
                if let Place::Repack(b) = *p {
                    if !repack_types.iter().any(|r| r.0 == b.0) {
                        repack_types.push(b);
                    }
                }
            }
            for buft in repack_types {
                // SAFETY: the buffer type is live.
                let align = unsafe { sys::ggml_backend_buft_get_alignment(buft.0.as_ptr()) };
                let members: Vec<usize> = (0..tensors.len())
                    .filter(|&i| matches!(places[i], Place::Repack(b) if b.0 == buft.0))
                    .collect();
                let size = members
                    .iter()
                    .map(|&i| pad(alloc_size(buft, tensors[i]), align.max(1)))
                    .sum::<usize>();
                let buffer = BackendBuffer::of_type(buft, size, backend)?;
                for &i in &members {
                    let t = tensors[i];
                    buffer.alloc_tensor(&ctx, t)?;
                    // SAFETY: `t` is allocated in a live buffer (just above) and `data[i]` holds
                    // exactly its `nbytes` bytes (checked above): the preconditions of
                    // `ggml_backend_tensor_set`, and of the repack buffer's `set_tensor` (whole
                    // tensor at offset 0). ggml chose a kernel layout for this type and shape
                    // when the tensor was placed (`extra_buffer_for_matmul` checked there is
                    // one), so the conversion succeeds.
                    unsafe {
                        sys::ggml_backend_tensor_set(
                            t.as_ptr(),
                            data[i].as_ptr().cast(),
                            0,
                            data[i].len(),
                        )
                    };
                    placement.repacked += 1;
                    placement.repacked_bytes += t.nbytes();
                }
                size_bytes += buffer.size();
                buffers.push(buffer);
            }

            // In place: one buffer over the whole mapping.
            if let Some(map) = options.mapping {
                let members: Vec<(usize, usize)> = places
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| match *p {
                        Place::Mapped(off) => Some((i, off)),
                        _ => None,
                    })
                    .collect();
                if !members.is_empty() {
                    let buffer = BackendBuffer::from_mapped_file(map.clone())?;
                    for &(i, off) in &members {
                        buffer.alloc_tensor_at(&ctx, tensors[i], off)?;
                        placement.in_place += 1;
                        placement.in_place_bytes += tensors[i].nbytes();
                    }
                    size_bytes += placement.in_place_bytes;
                    buffers.push(buffer);
                }
            }

            // Copied: every tensor still without memory, in one buffer of the backend.
            if places.iter().any(|p| matches!(p, Place::Copy)) {
                let buffer = ctx.alloc_tensors(backend)?;
                for (i, t) in tensors.iter().enumerate() {
                    if matches!(places[i], Place::Copy) {
                        t.set_bytes(0, data[i])?;
                        placement.copied += 1;
                        placement.copied_bytes += t.nbytes();
                    }
                }
                size_bytes += buffer.size();
                buffers.push(buffer);
            }

            // why: a repacked or copied tensor's bytes in the mapping are not read again; drop
            // their pages from the resident set (they stay readable, from the page cache).
            if let Some(map) = options.mapping {
                for (i, p) in places.iter().enumerate() {
                    if matches!(p, Place::Repack(_) | Place::Copy) {
                        if let Some(off) = map.offset_of(data[i]) {
                            map.release(off, data[i].len());
                        }
                    }
                }
            }
            tracing::debug!(
                tensors = specs.len(),
                repacked = placement.repacked,
                in_place = placement.in_place,
                copied = placement.copied,
                "weights placed"
            );
        }
        drop(tensors);
        let range = ctx.pool_range();
        read_only::register(range);
        Ok(WeightStore {
            inner: Arc::new(StoreInner {
                _ctx: ctx,
                _buffers: buffers,
                has_data,
                size_bytes,
                placement,
                range,
                index,
            }),
        })
    }

    /// Where the tensors' data went (all zero without data).
    pub fn placement(&self) -> Placement {
        self.inner.placement
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

    /// Bytes of memory the data takes (0 without data): the buffers it was copied or repacked
    /// into, plus the bytes used in place in a file mapping.
    pub fn size_bytes(&self) -> usize {
        self.inner.size_bytes
    }

    /// Whether the tensors have data (false for [`WeightStore::describe`]).
    pub fn has_data(&self) -> bool {
        self.inner.has_data
    }
}

/// The bytes a buffer of type `buft` needs for `t` (ggml's `get_alloc_size`): its plain size
/// for most types, more for layouts that store extra data per block (AMX keeps a compensation
/// term per tile column, so a Q8_0 matrix needs more than its rows).
///
/// why here, not a method in `buffer_type.rs`: the weight planner alone asks, and a buffer type
/// that named [`Tensor`] would tie its file and the tensor's (which asks about buffer types)
/// into a circle.
fn alloc_size(buft: BufferType, t: Tensor<'_>) -> usize {
    // SAFETY: the buffer type is live and `t` is a live tensor; the query reads its type and
    // shape.
    unsafe { sys::ggml_backend_buft_get_alloc_size(buft.0.as_ptr(), t.as_ptr()) }
}

/// Decides where each tensor goes (see [`WeightStore::load`]).
fn plan(
    backend: &Backend,
    tensors: &[Tensor<'_>],
    specs: &[TensorSpec<'_>],
    data: &[&[u8]],
    options: LoadOptions<'_>,
) -> Result<Vec<Place>> {
    let mut places = Vec::with_capacity(specs.len());
    let column_kernel = backend.vnni_q4_0();
    for ((t, s), d) in tensors.iter().zip(specs).zip(data) {
        // why CPU only: repacked rows are the CPU kernels' layout, which no device reads.
        if backend.is_cpu() && backend.weight_repack() && (options.may_repack)(s.name) {
            if let Some(buft) = backend::extra_buffer_for_matmul(s.ty, t.ne(), column_kernel)? {
                places.push(Place::Repack(buft));
                continue;
            }
        }
        let in_map = options
            .mapping
            .filter(|_| backend.is_cpu())
            .and_then(|m| m.offset_of(d));
        match in_map {
            Some(off) if d.as_ptr().align_offset(HOST_ALIGNMENT) == 0 => {
                places.push(Place::Mapped(off));
            }
            Some(_) => {
                tracing::debug!(
                    tensor = s.name,
                    "tensor data in the mapping is not {HOST_ALIGNMENT}-byte aligned: copied"
                );
                places.push(Place::Copy);
            }
            None => places.push(Place::Copy),
        }
    }
    Ok(places)
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

    /// Whether the tensor's data is repacked for the CPU's kernels (in an extra buffer type such
    /// as `CPU_REPACK`; see [`WeightStore::load`]).
    pub fn is_repacked(&self) -> bool {
        let buffer = self.header().buffer;
        if buffer.is_null() {
            return false;
        }
        // SAFETY: the store keeps the tensor's buffer alive.
        let buft = unsafe { sys::ggml_backend_buffer_get_type(buffer) };
        buffer_type::is_cpu_extra(buft)
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
            |r| r.is_shared(&p.store),
            || Retained::Shared(p.store.clone()),
        );
        // SAFETY: the tensor lives in the store's pool and (with data) buffer, which this context
        // now retains, so it is valid for the borrow of `self`; it is never written (module docs).
        unsafe { Tensor::from_raw(p.ptr) }
    }
}
