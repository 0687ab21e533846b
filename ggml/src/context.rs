//! ggml contexts: arenas that hold tensor metadata (and, optionally, tensor data) and graphs.
//!
//! A [`Context`] owns a `ggml_context` and the memory pool behind it. Tensors are created by
//! methods on the context (see the `ops` module) and handed out as [`Tensor`] handles that borrow
//! the context, so no handle can outlive the memory it points into.
//!
//! Every object ggml places in a context needs room in the pool; ggml aborts when the pool is full.
//! This layer measures each new object first and returns [`GgmlError::ContextFull`] instead.

use std::alloc::Layout;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Arc;

use ggml_sys as sys;

use super::dtype::GgmlType;
use super::error::{GgmlError, Result};
use super::log;
// why: a context and its tensors import each other on purpose (see `tensor.rs`).
use super::tensor::Tensor;

/// Alignment of the pools we hand to ggml (ggml needs 16; 64 keeps SIMD loads on cache lines).
const POOL_ALIGN: usize = 64;
/// ggml pads every object in a pool to this many bytes (`GGML_MEM_ALIGN`).
const MEM_ALIGN: usize = sys::GGML_MEM_ALIGN as usize;
/// Tensors one operation may create at most (composite ops such as `conv_2d` create several).
const SCRATCH_TENSORS: usize = 32;

/// An owned, aligned block of memory used as a ggml context's pool.
struct Pool {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Pool {
    fn new(size: usize) -> Result<Pool> {
        let layout = Layout::from_size_align(size.max(1), POOL_ALIGN)
            .map_err(|_| GgmlError::alloc(format!("context pool of {size} bytes")))?;
        // SAFETY: `layout` has a non-zero size (`max(1)`) and a valid power-of-two alignment.
        let ptr = unsafe { std::alloc::alloc(layout) };
        let ptr = NonNull::new(ptr)
            .ok_or_else(|| GgmlError::alloc(format!("context pool of {size} bytes")))?;
        Ok(Pool { ptr, layout })
    }

    fn contains(&self, p: *const u8) -> bool {
        let start = self.ptr.as_ptr() as usize;
        let p = p as usize;
        p >= start && p < start + self.layout.size()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `alloc` with exactly this layout and is freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// A `ggml_context` over a [`Pool`], freed on drop (before the pool).
struct RawContext {
    ptr: NonNull<sys::ggml_context>,
    pool: Pool,
}

impl RawContext {
    fn new(mem_size: usize, no_alloc: bool) -> Result<RawContext> {
        log::ensure_installed();
        if mem_size == 0 {
            return Err(GgmlError::arg("context", "memory size must be positive"));
        }
        let pool = Pool::new(mem_size)?;
        let params = sys::ggml_init_params {
            mem_size,
            mem_buffer: pool.ptr.as_ptr().cast(),
            no_alloc,
        };
        // SAFETY: `mem_buffer` points to `mem_size` writable bytes aligned to 64 (ggml needs
        // 16) that stay valid until after `ggml_free` (the pool is dropped after the context).
        // With a caller-provided buffer ggml only allocates the small context struct itself.
        let ptr = unsafe { sys::ggml_init(params) };
        let ptr = NonNull::new(ptr).ok_or_else(|| GgmlError::alloc("ggml_init"))?;
        Ok(RawContext { ptr, pool })
    }

    fn as_ptr(&self) -> *mut sys::ggml_context {
        self.ptr.as_ptr()
    }

    fn used_mem(&self) -> usize {
        // SAFETY: `ptr` is a live context owned by `self`.
        unsafe { sys::ggml_used_mem(self.ptr.as_ptr()) }
    }

    fn mem_size(&self) -> usize {
        // SAFETY: `ptr` is a live context owned by `self`.
        unsafe { sys::ggml_get_mem_size(self.ptr.as_ptr()) }
    }

    fn reset(&self) {
        // SAFETY: `ptr` is a live context; resetting only forgets its objects. Only the scratch
        // context is ever reset, and no handle to its tensors escapes `Context::measure`.
        unsafe { sys::ggml_reset(self.ptr.as_ptr()) }
    }

    fn first_tensor(&self) -> Option<NonNull<sys::ggml_tensor>> {
        // SAFETY: `ptr` is a live context.
        NonNull::new(unsafe { sys::ggml_get_first_tensor(self.ptr.as_ptr()) })
    }

    fn next_tensor(&self, t: NonNull<sys::ggml_tensor>) -> Option<NonNull<sys::ggml_tensor>> {
        // SAFETY: `ptr` is a live context and `t` is one of its tensors (callers only pass
        // pointers obtained from `first_tensor`/`next_tensor` or created in this context).
        NonNull::new(unsafe { sys::ggml_get_next_tensor(self.ptr.as_ptr(), t.as_ptr()) })
    }
}

impl Drop for RawContext {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `ggml_init` and is freed exactly once; the pool it uses is a
        // field dropped after this.
        unsafe { sys::ggml_free(self.ptr.as_ptr()) }
    }
}

/// Something a context keeps alive because its tensors point into it.
///
/// why erased: the context sits below the buffers, schedulers and weight stores whose memory its
/// tensors use; naming their types here tied all of them into one import circle. The context
/// only keeps them and drops them (in the order retained) when it drops.
pub(crate) enum Retained {
    /// Memory shared by `Arc` (a backend buffer's, a weight store's): retained once per
    /// context, however often it is handed in.
    Shared(Arc<dyn Any + Send + Sync>),
    /// A lease on compute memory (a graph allocator's, a scheduler's), released when dropped.
    Lease {
        /// Dropped with the context, which releases the lease.
        _lease: Box<dyn Any + Send>,
    },
}

impl Retained {
    /// Whether this is `item` itself (the same allocation).
    pub(crate) fn is_shared<T: ?Sized>(&self, item: &Arc<T>) -> bool {
        match self {
            Retained::Shared(s) => std::ptr::addr_eq(Arc::as_ptr(s), Arc::as_ptr(item)),
            Retained::Lease { .. } => false,
        }
    }
}

/// A ggml context: the arena that owns tensor metadata, graphs and (optionally) tensor data.
///
/// * [`Context::metadata`] creates a `no_alloc` context: tensors get shapes but no memory; place
///   them with [`Context::alloc_tensors`], a [`BackendBuffer`](super::BackendBuffer) or a
///   [`GraphAllocator`](super::GraphAllocator).
/// * [`Context::with_memory`] creates a context whose tensors get their data in the pool itself
///   (host memory, usable with the CPU backend only).
///
/// A context is `Send` but not `Sync`: build graphs on one thread at a time.
pub struct Context {
    raw: RawContext,
    no_alloc: bool,
    scratch: RefCell<RawContext>,
    /// The most recently created tensor, where the scan for new tensors resumes.
    last: Cell<Option<NonNull<sys::ggml_tensor>>>,
    /// Whether some tensor here is a view of a tensor in another context.
    foreign_views: Cell<bool>,
    /// Tensors that reference (directly or through other tensors) tensors of other contexts.
    /// They are only reachable through handles whose lifetime covers those contexts, never
    /// through [`Context::tensors`] or [`Context::tensor_by_name`].
    tainted: RefCell<HashSet<usize>>,
    retained: RefCell<Vec<Retained>>,
}

// SAFETY: a ggml context has no thread affinity; `Context` exclusively owns its `ggml_context`s
// and pools, and everything it retains is `Send`. The interior mutability (`Cell`, `RefCell`)
// keeps it `!Sync`, so it is never used from two threads at once, and tensor handles borrow it,
// so it cannot move to another thread while handles to it exist.
unsafe impl Send for Context {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("no_alloc", &self.no_alloc)
            .field("mem_size", &self.mem_size())
            .field("used_mem", &self.used_mem())
            .finish()
    }
}

impl Context {
    /// Bytes of pool one tensor's metadata takes (`ggml_tensor_overhead`).
    pub fn tensor_overhead() -> usize {
        // SAFETY: a pure function of compile-time constants.
        unsafe { sys::ggml_tensor_overhead() }
    }

    /// Bytes of pool a graph with room for `graph_size` nodes takes (`ggml_graph_overhead_custom`).
    pub fn graph_overhead(graph_size: usize) -> usize {
        // SAFETY: a pure size computation; `graph_size` is clamped so the C arithmetic cannot
        // overflow (`Context::new_graph` rejects larger sizes anyway).
        unsafe { sys::ggml_graph_overhead_custom(graph_size.min(MAX_GRAPH_SIZE), false) }
    }

    /// A metadata-only (`no_alloc`) context with room for `n_tensors` tensors and one graph of
    /// ggml's default size (2048 nodes).
    pub fn metadata(n_tensors: usize) -> Result<Context> {
        Context::metadata_with_graph(n_tensors, sys::GGML_DEFAULT_GRAPH_SIZE as usize)
    }

    /// A metadata-only (`no_alloc`) context with room for `n_tensors` tensors and one graph of
    /// `graph_size` nodes (pass 0 for no graph).
    pub fn metadata_with_graph(n_tensors: usize, graph_size: usize) -> Result<Context> {
        let graph = if graph_size == 0 {
            0
        } else {
            Context::graph_overhead(graph_size)
        };
        let size = Context::tensor_overhead()
            .checked_mul(n_tensors)
            .and_then(|n| n.checked_add(graph))
            .ok_or_else(|| GgmlError::arg("context", "size overflows"))?;
        Context::new(size, true)
    }

    /// A context whose tensors get their data inside its own pool of `mem_size` bytes.
    ///
    /// Each tensor needs [`Context::tensor_overhead`] bytes plus its data (padded to 16 bytes).
    pub fn with_memory(mem_size: usize) -> Result<Context> {
        Context::new(mem_size, false)
    }

    fn new(mem_size: usize, no_alloc: bool) -> Result<Context> {
        let raw = RawContext::new(mem_size, no_alloc)?;
        let scratch = RawContext::new(Context::tensor_overhead() * SCRATCH_TENSORS, true)?;
        Ok(Context {
            raw,
            no_alloc,
            scratch: RefCell::new(scratch),
            last: Cell::new(None),
            foreign_views: Cell::new(false),
            tainted: RefCell::new(HashSet::new()),
            retained: RefCell::new(Vec::new()),
        })
    }

    /// Whether tensors in this context get no memory of their own (`no_alloc`).
    pub fn is_metadata_only(&self) -> bool {
        self.no_alloc
    }

    /// Size of the context's pool in bytes.
    pub fn mem_size(&self) -> usize {
        self.raw.mem_size()
    }

    /// Bytes of the pool in use.
    pub fn used_mem(&self) -> usize {
        self.raw.used_mem()
    }

    /// Bytes of the pool still free.
    pub fn available_mem(&self) -> usize {
        self.mem_size().saturating_sub(self.used_mem())
    }

    /// Whether `tensor`'s metadata lives in this context.
    pub fn owns(&self, tensor: Tensor<'_>) -> bool {
        self.owns_ptr(tensor.as_ptr())
    }

    pub(crate) fn owns_ptr(&self, p: *const sys::ggml_tensor) -> bool {
        self.raw.pool.contains(p.cast())
    }

    /// The tensor named `name`, if this context has one that depends on no other context.
    pub fn tensor_by_name(&self, name: &str) -> Option<Tensor<'_>> {
        let name = CString::new(name).ok()?;
        // SAFETY: the context is live and `name` is NUL-terminated; ggml only compares names.
        let p = NonNull::new(unsafe { sys::ggml_get_tensor(self.raw.as_ptr(), name.as_ptr()) })?;
        if self.is_tainted(p) {
            return None;
        }
        // SAFETY: the tensor lives in this context and references nothing outside it, so it is
        // valid for the borrow of `self`.
        Some(unsafe { Tensor::from_raw(p) })
    }

    /// All tensors of this context that depend on no other context, in creation order.
    ///
    /// Tensors computed from other contexts' tensors are left out: a handle obtained here could
    /// outlive those contexts. Keep the handles the operations returned instead.
    pub fn tensors(&self) -> Vec<Tensor<'_>> {
        self.raw_tensors()
            .into_iter()
            .filter(|&t| !self.is_tainted(t))
            // SAFETY: the tensor lives in this context and references nothing outside it, so it
            // is valid for the borrow of `self`.
            .map(|t| unsafe { Tensor::from_raw(t) })
            .collect()
    }

    /// Every tensor of the context, including ones that reference other contexts. Callers must
    /// not follow the sources or view sources of the returned tensors.
    pub(crate) fn tensors_unchecked(&self) -> Vec<Tensor<'_>> {
        self.raw_tensors()
            .into_iter()
            // SAFETY: the tensor structs live in this context's pool for the borrow of `self`;
            // the caller only reads the tensors' own fields.
            .map(|t| unsafe { Tensor::from_raw(t) })
            .collect()
    }

    fn raw_tensors(&self) -> Vec<NonNull<sys::ggml_tensor>> {
        let mut out = Vec::new();
        let mut cur = self.raw.first_tensor();
        while let Some(t) = cur {
            out.push(t);
            cur = self.raw.next_tensor(t);
        }
        out
    }

    fn is_tainted(&self, t: NonNull<sys::ggml_tensor>) -> bool {
        self.tainted.borrow().contains(&(t.as_ptr() as usize))
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ggml_context {
        self.raw.as_ptr()
    }

    pub(crate) fn has_foreign_views(&self) -> bool {
        self.foreign_views.get()
    }

    pub(crate) fn retain(&self, item: Retained) {
        let mut retained = self.retained.borrow_mut();
        if let Retained::Shared(new) = &item {
            if retained.iter().any(|r| r.is_shared(new)) {
                return;
            }
        }
        retained.push(item);
    }

    /// Retains the item `make` returns unless an item `known` accepts is retained already.
    pub(crate) fn retain_with(
        &self,
        known: impl Fn(&Retained) -> bool,
        make: impl FnOnce() -> Retained,
    ) {
        let mut retained = self.retained.borrow_mut();
        if !retained.iter().any(known) {
            retained.push(make());
        }
    }

    /// Address range `[start, end)` of the pool holding this context's tensor structs.
    pub(crate) fn pool_range(&self) -> (usize, usize) {
        let start = self.raw.pool.ptr.as_ptr() as usize;
        (start, start + self.raw.pool.layout.size())
    }

    /// Fails unless `needed` more bytes fit in the pool.
    pub(crate) fn ensure_room(&self, needed: usize) -> Result<()> {
        let available = self.available_mem();
        if needed > available {
            return Err(GgmlError::ContextFull { needed, available });
        }
        Ok(())
    }

    /// Pool bytes `f` would use in this context, measured by running it on the scratch context.
    ///
    /// `f` must create its tensors with ggml calls whose preconditions the caller has checked;
    /// its results are discarded.
    fn measure(
        &self,
        f: &dyn Fn(*mut sys::ggml_context) -> *mut sys::ggml_tensor,
    ) -> Result<usize> {
        let scratch = self.scratch.borrow_mut();
        scratch.reset();
        let out = f(scratch.as_ptr());
        let mut total = 0usize;
        let mut result = Ok(());
        if out.is_null() {
            result = Err(GgmlError::alloc("ggml returned no tensor"));
        }
        let object = Context::tensor_overhead() - sys::GGML_TENSOR_SIZE;
        let mut cur = scratch.first_tensor();
        while let Some(t) = cur {
            // SAFETY: `t` is a live tensor of the scratch context (not reset yet).
            let hdr = unsafe { Tensor::from_raw(t) }.header();
            let data = if self.no_alloc || !hdr.view_src.is_null() {
                0
            } else {
                data_size(&hdr)?
            };
            let obj = pad(sys::GGML_TENSOR_SIZE + data, MEM_ALIGN) + object;
            total = total.saturating_add(obj);
            cur = scratch.next_tensor(t);
        }
        scratch.reset();
        result.map(|()| total)
    }

    /// Runs the tensor-creating ggml call `f` in this context after checking the pool has room.
    ///
    /// `f` is called twice: once on a scratch context to measure, once for real. It must be a
    /// plain ggml op constructor whose `GGML_ASSERT`s the caller has already ruled out.
    pub(crate) fn build<'a, F>(&'a self, f: F) -> Result<Tensor<'a>>
    where
        F: Fn(*mut sys::ggml_context) -> *mut sys::ggml_tensor,
    {
        let needed = self.measure(&f)?;
        self.ensure_room(needed)?;
        let out = NonNull::new(f(self.raw.as_ptr()))
            .ok_or_else(|| GgmlError::alloc("ggml returned no tensor"))?;
        self.scan_new_tensors();
        // SAFETY: `out` was just created in this context, so it is valid for the borrow of
        // `self`.
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// Walks the tensors created since the last scan, noting views of foreign tensors and
    /// tensors that depend on other contexts.
    fn scan_new_tensors(&self) {
        let mut cur = match self.last.get() {
            Some(t) => self.raw.next_tensor(t),
            None => self.raw.first_tensor(),
        };
        while let Some(t) = cur {
            // SAFETY: `t` is a live tensor of this context.
            let hdr = unsafe { Tensor::from_raw(t) }.header();
            if !hdr.view_src.is_null() && !self.owns_ptr(hdr.view_src) {
                self.foreign_views.set(true);
            }
            let foreign = |p: *mut sys::ggml_tensor| {
                !p.is_null()
                    && p != t.as_ptr()
                    && (!self.owns_ptr(p) || self.tainted.borrow().contains(&(p as usize)))
            };
            if foreign(hdr.view_src) || hdr.src.iter().any(|&s| foreign(s)) {
                self.tainted.borrow_mut().insert(t.as_ptr() as usize);
            }
            self.last.set(Some(t));
            cur = self.raw.next_tensor(t);
        }
    }
}

/// Largest graph size accepted (keeps ggml's `int` node counts and size arithmetic in range).
pub(crate) const MAX_GRAPH_SIZE: usize = 1 << 24;

pub(crate) fn pad(x: usize, n: usize) -> usize {
    x.div_ceil(n) * n
}

/// Bytes ggml reserves for a fresh tensor of this shape (`ggml_new_tensor_impl`'s `data_size`).
fn data_size(hdr: &sys::ggml_tensor) -> Result<usize> {
    let ty =
        GgmlType::from_u32(hdr.type_).ok_or(super::dtype::DtypeError::UnknownType(hdr.type_))?;
    let ne0 = u64::try_from(hdr.ne[0]).unwrap_or(0);
    let mut size = ty.row_size(ne0)?;
    for &n in &hdr.ne[1..] {
        size = size.saturating_mul(usize::try_from(n).unwrap_or(0));
    }
    Ok(size)
}
