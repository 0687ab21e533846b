//! Backend buffers: memory for tensor data, and the allocators that place tensors in it.
//!
//! * [`Context::alloc_tensors`] allocates every tensor of a metadata-only context in one
//!   backend buffer (`ggml_backend_alloc_ctx_tensors`).
//! * [`BackendBuffer::from_host_memory`] wraps caller-provided host memory (a `Vec<u8>`, an
//!   [`AlignedBytes`], an anonymous `memmap2::MmapMut`, ...) without copying; tensors are placed
//!   in it sequentially ([`BackendBuffer::alloc_tensor`]) or at chosen offsets
//!   ([`BackendBuffer::alloc_tensor_at`]).
//! * [`GraphAllocator`] (`ggml_gallocr`) allocates the intermediate tensors of compute graphs in a
//!   reusable buffer.
//!
//! Soundness: a tensor's data pointer must not outlive the memory it points into. Every buffer
//! that receives tensors of a context is retained by that context, so the memory lives at least
//! as long as any tensor handle. A graph allocator reuses its buffer for the next graph, so it
//! refuses to allocate while a context holding its previous allocation is alive.

use std::alloc::Layout;
use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use ggml_sys as sys;

use super::backend::Backend;
use super::buffer_type::{self, BufferType};
use super::context::{pad, Context, Retained};
use super::error::{GgmlError, Result};
use super::graph::Graph;
use super::mapped_buffers;
use super::mapped_file::MappedFile;
use super::sched::Scheduler;
use super::tensor::Tensor;

/// Alignment ggml's CPU buffers need (`TENSOR_ALIGNMENT`).
pub const HOST_ALIGNMENT: usize = 32;

/// Host memory that a [`BackendBuffer`] can take ownership of.
///
/// # Safety
///
/// Implementors guarantee that `as_mut_ptr` returns a pointer valid for reads and writes of
/// `len()` bytes, that the pointer and length stay the same for the value's whole life (moving
/// the value must not move the bytes), and that nothing else accesses the bytes while the
/// buffer owns the value. The bytes may be uninitialised from Rust's point of view; they are
/// only ever accessed by ggml and through checked tensor reads and writes.
pub unsafe trait HostMemory: Send + 'static {
    /// Start of the memory.
    fn as_mut_ptr(&mut self) -> *mut u8;
    /// Length of the memory in bytes.
    fn len(&self) -> usize;
    /// Whether the memory is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// SAFETY: a `Vec`'s heap allocation does not move when the `Vec` moves, and the buffer never
// resizes it.
unsafe impl HostMemory for Vec<u8> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        Vec::as_mut_ptr(self)
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

// SAFETY: a boxed slice's allocation does not move when the box moves.
unsafe impl HostMemory for Box<[u8]> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        <[u8]>::as_mut_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}

// SAFETY: a writable mapping stays at the same address until it is unmapped on drop.
unsafe impl HostMemory for memmap2::MmapMut {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        <[u8]>::as_mut_ptr(&mut self[..])
    }
    fn len(&self) -> usize {
        <[u8]>::len(&self[..])
    }
}

/// Zero-initialised heap memory aligned to 64 bytes (no alignment padding is lost when it backs a
/// [`BackendBuffer`]).
pub struct AlignedBytes {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: `AlignedBytes` uniquely owns its allocation, like a `Box<[u8]>`.
unsafe impl Send for AlignedBytes {}
// SAFETY: shared access only reads through `as_slice`, like `&[u8]`.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    /// `len` zero bytes, aligned to 64.
    pub fn zeroed(len: usize) -> Result<AlignedBytes> {
        let layout = Self::layout(len)?;
        // SAFETY: the layout has a non-zero size and a power-of-two alignment.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| GgmlError::alloc(format!("{len} bytes")))?;
        Ok(AlignedBytes { ptr, len })
    }

    fn layout(len: usize) -> Result<Layout> {
        Layout::from_size_align(len.max(1), 64)
            .map_err(|_| GgmlError::alloc(format!("{len} bytes")))
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised (zeroed) bytes owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if let Ok(layout) = Self::layout(self.len) {
            // SAFETY: `ptr` was allocated with this layout and is freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

// SAFETY: the allocation is fixed for the value's life and uniquely owned.
unsafe impl HostMemory for AlignedBytes {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// Type-erased owner of host memory (kept only to be dropped after the ggml buffer).
trait Owned: Send {}
impl<T: Send> Owned for T {}

/// The tensor allocator state of a buffer.
struct Talloc(sys::ggml_tallocr);

// SAFETY: the allocator state is plain data pointing at its buffer; it is only used under the
// buffer's mutex.
unsafe impl Send for Talloc {}

pub(crate) struct BufferInner {
    raw: NonNull<sys::ggml_backend_buffer>,
    talloc: Mutex<Option<Talloc>>,
    base_offset: usize,
    /// Host memory the buffer wraps; dropped after the ggml buffer is freed.
    _memory: Option<Box<dyn Owned>>,
    /// Keeps the backend (and thus its device context) alive while the buffer exists.
    _backend: Option<Backend>,
    /// Whether the buffer lies over a file mapping registered in [`mapped_buffers`].
    mapped: bool,
}

// SAFETY: the buffer object is only mutated by ggml calls made under `talloc`'s mutex (tensor
// placement) or through tensor handles, which are confined to their context's thread; the
// remaining calls (`get_size`, `get_base`, `is_host`, name) only read immutable fields. The
// owned memory is `Send` and not otherwise accessed.
unsafe impl Send for BufferInner {}
// SAFETY: see `Send`.
unsafe impl Sync for BufferInner {}

impl Drop for BufferInner {
    fn drop(&mut self) {
        if self.mapped {
            // why: unregister before the buffer is freed, so a later buffer at the same address
            // is not checked against this file.
            let addr = self.raw.as_ptr() as usize;
            mapped_buffers::unregister(addr);
        }
        // SAFETY: the buffer is freed once, after every context holding tensors in it (they
        // retain this `Arc`) is gone; the host memory it wraps is dropped afterwards.
        unsafe { sys::ggml_backend_buffer_free(self.raw.as_ptr()) }
    }
}

/// A backend buffer holding tensor data, freed when the last handle and the last context with
/// tensors in it are gone.
#[derive(Clone)]
pub struct BackendBuffer {
    inner: Arc<BufferInner>,
}

impl std::fmt::Debug for BackendBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendBuffer")
            .field("name", &self.name())
            .field("size", &self.size())
            .finish()
    }
}

impl BackendBuffer {
    fn from_raw(
        raw: *mut sys::ggml_backend_buffer,
        base_offset: usize,
        memory: Option<Box<dyn Owned>>,
        backend: Option<Backend>,
        what: &str,
    ) -> Result<BackendBuffer> {
        BackendBuffer::from_raw_inner(raw, base_offset, memory, backend, what, None)
    }

    /// [`BackendBuffer::from_raw`], registering the buffer as lying over `mapped` (see
    /// [`mapped_buffers`]) when given.
    fn from_raw_inner(
        raw: *mut sys::ggml_backend_buffer,
        base_offset: usize,
        memory: Option<Box<dyn Owned>>,
        backend: Option<Backend>,
        what: &str,
        mapped: Option<Arc<MappedFile>>,
    ) -> Result<BackendBuffer> {
        let raw = NonNull::new(raw).ok_or_else(|| GgmlError::alloc(what.to_owned()))?;
        let is_mapped = mapped.is_some();
        if let Some(map) = mapped {
            mapped_buffers::register(raw.as_ptr() as usize, map);
        }
        Ok(BackendBuffer {
            inner: Arc::new(BufferInner {
                raw,
                talloc: Mutex::new(None),
                base_offset,
                _memory: memory,
                _backend: backend,
                mapped: is_mapped,
            }),
        })
    }

    /// A new buffer of `size` bytes in `backend`'s default memory.
    pub fn new(backend: &Backend, size: usize) -> Result<BackendBuffer> {
        if size == 0 {
            return Err(GgmlError::arg(
                "BackendBuffer::new",
                "size must be positive",
            ));
        }
        let raw = {
            let b = backend.lock();
            // SAFETY: the backend is live; ggml returns null when the allocation fails.
            unsafe { sys::ggml_backend_alloc_buffer(b.as_ptr(), size) }
        };
        BackendBuffer::from_raw(
            raw,
            0,
            None,
            Some(backend.clone()),
            &format!("{size}-byte {} buffer", backend.name()),
        )
    }

    /// A CPU buffer over caller-provided host memory, which the buffer takes ownership of.
    ///
    /// The buffer starts at the first 32-byte-aligned address of the memory
    /// ([`BackendBuffer::base_offset`] bytes in); memory from [`AlignedBytes`] or a mapping is
    /// always aligned, so its offset is 0.
    pub fn from_host_memory<M: HostMemory>(mut memory: M) -> Result<BackendBuffer> {
        let ptr = memory.as_mut_ptr();
        let len = memory.len();
        let offset = ptr.align_offset(HOST_ALIGNMENT);
        if ptr.is_null() || offset >= len {
            return Err(GgmlError::arg(
                "from_host_memory",
                format!("{len} bytes leave no aligned space"),
            ));
        }
        // SAFETY: `offset < len`, so the aligned start stays inside the memory.
        let base = unsafe { ptr.add(offset) };
        // SAFETY: `base` is 32-byte aligned (ggml's assert) and valid for `len - offset` bytes
        // of reads and writes for as long as `memory` lives; the buffer does not free it, and
        // `memory` is stored in the buffer and dropped only after the ggml buffer is freed.
        let raw = unsafe { sys::ggml_backend_cpu_buffer_from_ptr(base.cast(), len - offset) };
        BackendBuffer::from_raw(raw, offset, Some(Box::new(memory)), None, "host buffer")
    }

    /// A buffer of `size` bytes of buffer type `buft` (e.g. one of the CPU's extra buffer types)
    /// for tensors of `backend`.
    pub(crate) fn of_type(
        buft: BufferType,
        size: usize,
        backend: &Backend,
    ) -> Result<BackendBuffer> {
        if size == 0 {
            return Err(GgmlError::arg(
                "BackendBuffer::of_type",
                "size must be positive",
            ));
        }
        // SAFETY: the buffer type is live (buffer types live as long as their registry); ggml
        // returns null when the allocation fails.
        let raw = unsafe { sys::ggml_backend_buft_alloc_buffer(buft.0.as_ptr(), size) };
        BackendBuffer::from_raw(
            raw,
            0,
            None,
            Some(backend.clone()),
            &format!("{size}-byte {} buffer", buffer_type::buffer_type_name(buft)),
        )
    }

    /// A CPU buffer over the whole of a read-only file mapping, which it keeps alive: tensors
    /// placed in it ([`BackendBuffer::alloc_tensor_at`]) use the file's bytes in place.
    ///
    /// Only for weight stores: the pages are mapped read-only, so the buffer's memory must never
    /// be written. The weight store guarantees that (see [`weights`](super::weights)): its
    /// tensors refuse writes through handles and `Backend::compute` refuses graphs writing them;
    /// ggml itself writes into a pointer-backed CPU buffer only through `set_tensor`,
    /// `memset_tensor`, `cpy_tensor` or `clear`, which this crate never calls on such a buffer.
    /// A write would fault (`SIGSEGV`), never change the file or another reader's bytes.
    pub(crate) fn from_mapped_file(map: Arc<MappedFile>) -> Result<BackendBuffer> {
        let base = map.as_ptr();
        let len = map.len();
        if len == 0 || base.align_offset(HOST_ALIGNMENT) != 0 {
            return Err(GgmlError::arg(
                "from_mapped_file",
                format!("{len}-byte mapping is empty or not {HOST_ALIGNMENT}-byte aligned"),
            ));
        }
        // SAFETY: `base` (a mapping's start: page-aligned, so 32-byte aligned as ggml asserts) is
        // valid for reads of `len` bytes for as long as `map` lives, and `map` is stored in the
        // buffer and dropped only after the ggml buffer is freed (which does not free the
        // memory). The memory is never written (see above), so casting away `const` for ggml's
        // signature grants ggml nothing it uses.
        let raw = unsafe { sys::ggml_backend_cpu_buffer_from_ptr(base.cast_mut().cast(), len) };
        let registered = map.clone();
        BackendBuffer::from_raw_inner(
            raw,
            0,
            Some(Box::new(map)),
            None,
            "mapped file buffer",
            Some(registered),
        )
    }

    fn raw(&self) -> *mut sys::ggml_backend_buffer {
        self.inner.raw.as_ptr()
    }

    /// The buffer's name (its buffer type, e.g. `"CPU"`).
    pub fn name(&self) -> String {
        // SAFETY: the buffer is live; ggml returns a static string.
        let p = unsafe { sys::ggml_backend_buffer_name(self.raw()) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: `p` is a NUL-terminated string owned by the buffer type.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        // SAFETY: the buffer is live.
        unsafe { sys::ggml_backend_buffer_get_size(self.raw()) }
    }

    /// Whether the memory is host memory.
    pub fn is_host(&self) -> bool {
        // SAFETY: the buffer is live.
        unsafe { sys::ggml_backend_buffer_is_host(self.raw()) }
    }

    /// For buffers over host memory: bytes skipped at the start of the memory for alignment.
    pub fn base_offset(&self) -> usize {
        self.inner.base_offset
    }

    /// Checks that `t` may be placed in this buffer and returns the bytes it needs.
    fn check_placeable(&self, ctx: &Context, t: Tensor<'_>) -> Result<usize> {
        if !ctx.owns(t) {
            return Err(GgmlError::IncompatibleTensor {
                tensor: t.name(),
                detail: "tensor belongs to another context".into(),
            });
        }
        let hdr = t.header();
        if !hdr.view_src.is_null() {
            return Err(GgmlError::IncompatibleTensor {
                tensor: t.name(),
                detail: "views share their source's memory and cannot be placed".into(),
            });
        }
        if !hdr.data.is_null() || !hdr.buffer.is_null() {
            return Err(GgmlError::AlreadyAllocated { tensor: t.name() });
        }
        // SAFETY: the buffer is live; the query reads its base address.
        let base = unsafe { sys::ggml_backend_buffer_get_base(self.raw()) };
        if base.is_null() {
            return Err(GgmlError::IncompatibleTensor {
                tensor: t.name(),
                detail: "the buffer has no single base address to place tensors at".into(),
            });
        }
        // SAFETY: the buffer and the tensor are live; the query reads the tensor's shape.
        Ok(unsafe { sys::ggml_backend_buffer_get_alloc_size(self.raw(), t.as_ptr()) })
    }

    /// Places `t` (a tensor of `ctx` without memory) at the next free, aligned position.
    ///
    /// `ctx` keeps the buffer alive from then on.
    pub fn alloc_tensor(&self, ctx: &Context, t: Tensor<'_>) -> Result<()> {
        let need = self.check_placeable(ctx, t)?;
        let mut guard = self.inner.talloc.lock().unwrap_or_else(|e| e.into_inner());
        let talloc = match guard.as_mut() {
            Some(t) => t,
            // SAFETY: the buffer is live and non-empty, so it has a base address.
            None => guard.insert(Talloc(unsafe { sys::ggml_tallocr_new(self.raw()) })),
        };
        let size = pad(need, talloc.0.alignment.max(1));
        let fits = talloc
            .0
            .offset
            .checked_add(size)
            .is_some_and(|end| end <= self.size());
        if !fits {
            return Err(GgmlError::oob(format!(
                "buffer full: tensor {:?} needs {size} bytes at offset {} of {}",
                t.name(),
                talloc.0.offset,
                self.size()
            )));
        }
        // SAFETY: the allocator belongs to this live buffer, the tensor is live, unallocated and
        // not a view, and it fits in the remaining space (checked above; ggml aborts otherwise).
        let status = unsafe { sys::ggml_tallocr_alloc(&mut talloc.0, t.as_ptr()) };
        drop(guard);
        self.finish_placement(ctx, t, status)
    }

    /// Places `t` (a tensor of `ctx` without memory) at byte `offset` from the buffer's base
    /// (e.g. where its data already is in a mapped file).
    ///
    /// `ctx` keeps the buffer alive from then on. Placements may overlap; the caller decides.
    pub fn alloc_tensor_at(&self, ctx: &Context, t: Tensor<'_>, offset: usize) -> Result<()> {
        let need = self.check_placeable(ctx, t)?;
        let fits = offset
            .checked_add(need)
            .is_some_and(|end| end <= self.size());
        if !fits {
            return Err(GgmlError::oob(format!(
                "tensor {:?} needs {need} bytes at offset {offset} of a {}-byte buffer",
                t.name(),
                self.size()
            )));
        }
        // SAFETY: the buffer is live; a non-empty buffer has a non-null base.
        let base = unsafe { sys::ggml_backend_buffer_get_base(self.raw()) }.cast::<u8>();
        // `offset + need <= size` (checked above), so this stays inside the buffer.
        let addr = base.wrapping_add(offset);
        // SAFETY: the tensor is live, unallocated and not a view, and `[addr, addr + need)` lies
        // inside the buffer: exactly `ggml_backend_tensor_alloc`'s asserts.
        let status = unsafe { sys::ggml_backend_tensor_alloc(self.raw(), t.as_ptr(), addr.cast()) };
        self.finish_placement(ctx, t, status)
    }

    fn finish_placement(
        &self,
        ctx: &Context,
        t: Tensor<'_>,
        status: sys::ggml_status,
    ) -> Result<()> {
        // The tensor points into the buffer whatever the status: retain it first.
        ctx.retain(Retained::Shared(self.inner.clone()));
        if status != sys::GGML_STATUS_SUCCESS {
            return Err(GgmlError::alloc(format!(
                "initialising tensor {:?}",
                t.name()
            )));
        }
        Ok(())
    }
}

impl Context {
    /// Allocates every tensor of this metadata-only context that has no memory yet in one
    /// buffer of `backend` (`ggml_backend_alloc_ctx_tensors`); the context keeps the buffer
    /// alive. Views of tensors in the context are initialised too.
    pub fn alloc_tensors(&self, backend: &Backend) -> Result<BackendBuffer> {
        if !self.is_metadata_only() {
            return Err(GgmlError::WrongContextKind {
                detail: "alloc_tensors needs a metadata-only context".into(),
            });
        }
        if self.has_foreign_views() {
            return Err(GgmlError::WrongContextKind {
                detail: "context holds views of other contexts' tensors".into(),
            });
        }
        let tensors = self.tensors_unchecked();
        let pending: Vec<Tensor<'_>> = tensors
            .iter()
            .copied()
            .filter(|t| {
                let h = t.header();
                h.data.is_null() && h.buffer.is_null()
            })
            .collect();
        if !pending.iter().any(|t| !t.is_view() && t.nbytes() > 0) {
            return Err(GgmlError::WrongContextKind {
                detail: "context has no unallocated tensors with data".into(),
            });
        }
        let buft = backend.buffer_type();
        // SAFETY: the context is a live no_alloc context (ggml's assert) whose views all have
        // sources in the context itself (so view initialisation finds them allocated), and the
        // buffer type is live.
        let raw = unsafe {
            sys::ggml_backend_alloc_ctx_tensors_from_buft(self.as_ptr(), buft.0.as_ptr())
        };
        if raw.is_null() {
            // A failed allocation may leave pointers into freed buffers behind: clear them.
            for t in pending {
                let p = t.as_ptr();
                // SAFETY: `p` is a live tensor of this context; clearing its buffer pointer (and
                // below its data pointer) restores the unallocated state it had before the call.
                unsafe { (*p).buffer = std::ptr::null_mut() };
                // SAFETY: as above.
                unsafe { (*p).data = std::ptr::null_mut() };
            }
            // SAFETY: the context and buffer type are live; this only sums sizes.
            let size = unsafe {
                sys::ggml_backend_alloc_ctx_tensors_from_buft_size(self.as_ptr(), buft.0.as_ptr())
            };
            return Err(GgmlError::alloc(format!(
                "{size}-byte {} buffer for the context's tensors",
                backend.name()
            )));
        }
        let buffer =
            BackendBuffer::from_raw(raw, 0, None, Some(backend.clone()), "context tensors")?;
        self.retain(Retained::Shared(buffer.inner.clone()));
        Ok(buffer)
    }
}

// ---------------------------------------------------------------------------------------------
// Graph allocator
// ---------------------------------------------------------------------------------------------

struct GallocState {
    raw: NonNull<sys::ggml_gallocr>,
    /// Contexts alive with tensors in the current allocation.
    leases: usize,
}

// SAFETY: the allocator is plain heap state with no thread affinity; it only lives inside a
// mutex, which serialises every use.
unsafe impl Send for GallocState {}

pub(crate) struct GallocInner {
    state: Mutex<GallocState>,
    _backend: Backend,
}

impl Drop for GallocInner {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the allocator is freed once, after every lease (context with tensors in its
        // buffers) is gone, since leases hold this `Arc`.
        unsafe { sys::ggml_gallocr_free(state.raw.as_ptr()) }
    }
}

/// Keeps a graph allocator's buffers alive (and unusable for new graphs) while a context with
/// tensors in them is alive.
pub(crate) struct AllocatorLease(Arc<GallocInner>);

impl Drop for AllocatorLease {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        state.leases = state.leases.saturating_sub(1);
    }
}

/// A graph allocator: places the unallocated tensors of a compute graph in memory of its
/// backend, reusing memory between tensors whose lifetimes do not overlap, and reusing it from one
/// graph to the next, and then computes the graph ([`GraphAllocator::compute`]).
///
/// On a CPU backend it is ggml's graph allocator (`ggml_gallocr`) over one buffer. On any other
/// device it is a backend scheduler ([`Scheduler`]) with the device first and the CPU as
/// fallback, so nodes the device has no kernel for run on the CPU, with ggml's copies between
/// the two; the scheduler is made at the first graph and made again, larger, for a graph that
/// does not fit it.
///
/// After [`GraphAllocator::alloc_graph`], the graph's context holds a lease on the memory; the
/// allocator refuses new allocations ([`GgmlError::AllocatorInUse`]) until that context is
/// dropped. Build each step's graph in a fresh context and drop it when done.
#[derive(Clone)]
pub struct GraphAllocator {
    kind: AllocatorKind,
}

#[derive(Clone)]
enum AllocatorKind {
    /// A CPU backend: one `ggml_gallocr` buffer.
    Buffer(Arc<GallocInner>),
    /// Another device: its scheduler.
    Scheduled(Arc<DeviceAllocator>),
}

/// The scheduler of a device's [`GraphAllocator`], made when the first graph arrives.
struct DeviceAllocator {
    device: Backend,
    /// What the scheduler's node placements are reported under ([`super::sched::fallbacks`]).
    label: &'static str,
    sched: Mutex<Option<Scheduler>>,
}

/// The smallest scheduler a device allocator makes (members: nodes plus leafs).
///
/// why not the graph's exact size: a session's graphs grow with the context (the decode
/// cache's views) a little at a time, and each growth past the capacity makes a new scheduler.
const MIN_SCHED_GRAPH: usize = 1024;

impl std::fmt::Debug for GraphAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphAllocator")
            .field("buffer_size", &self.buffer_size())
            .finish()
    }
}

impl GraphAllocator {
    /// An allocator for `backend`: its default buffer type on the CPU, its scheduler (device
    /// first, CPU fallback) on any other device.
    pub fn new(backend: &Backend) -> Result<GraphAllocator> {
        GraphAllocator::labelled(backend, "graph")
    }

    /// [`GraphAllocator::new`] whose fallback placements (on a device) are recorded under
    /// `label` (a component's name: `"encoder"`, `"backbone"`, ...; see
    /// [`super::sched::fallbacks`]).
    pub fn labelled(backend: &Backend, label: &'static str) -> Result<GraphAllocator> {
        if !backend.is_cpu() {
            return Ok(GraphAllocator {
                kind: AllocatorKind::Scheduled(Arc::new(DeviceAllocator {
                    device: backend.clone(),
                    label,
                    sched: Mutex::new(None),
                })),
            });
        }
        let buft = backend.buffer_type();
        // SAFETY: the buffer type is live; ggml allocates the allocator state.
        let raw = unsafe { sys::ggml_gallocr_new(buft.0.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| GgmlError::alloc("graph allocator"))?;
        Ok(GraphAllocator {
            kind: AllocatorKind::Buffer(Arc::new(GallocInner {
                state: Mutex::new(GallocState { raw, leases: 0 }),
                _backend: backend.clone(),
            })),
        })
    }

    /// The scheduler of a device allocator, made (again) when it cannot hold `graph`.
    fn scheduler_for(d: &DeviceAllocator, graph: &Graph<'_>) -> Result<Scheduler> {
        let members = graph.n_nodes() + graph.n_leafs();
        let mut slot = d.sched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slot.as_ref() {
            if s.graph_size() >= members {
                return Ok(s.clone());
            }
            if s.in_use() {
                return Err(GgmlError::AllocatorInUse);
            }
        }
        let size = members.next_power_of_two().max(MIN_SCHED_GRAPH);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let s = Scheduler::new(&d.device, size, threads)?;
        *slot = Some(s.clone());
        Ok(s)
    }

    /// The scheduler of a device allocator, if it has made one.
    fn current_scheduler(&self) -> Option<Scheduler> {
        match &self.kind {
            AllocatorKind::Scheduled(d) => {
                d.sched.lock().unwrap_or_else(|e| e.into_inner()).clone()
            }
            AllocatorKind::Buffer(_) => None,
        }
    }

    /// Checks that every tensor the allocator would place belongs to the graph's context.
    fn check_graph(graph: &Graph<'_>) -> Result<()> {
        let ctx = graph.context();
        for t in graph.tensors() {
            let h = t.header();
            if h.data.is_null() && !ctx.owns(t) {
                return Err(GgmlError::NotAllocated { tensor: t.name() });
            }
        }
        Ok(())
    }

    /// Sizes the buffer for `graph` (a worst case) without allocating its tensors.
    ///
    /// On a device it makes the scheduler large enough for `graph`; the scheduler sizes its
    /// buffers at the first allocation.
    pub fn reserve(&self, graph: &Graph<'_>) -> Result<()> {
        GraphAllocator::check_graph(graph)?;
        let inner = match &self.kind {
            AllocatorKind::Buffer(inner) => inner,
            AllocatorKind::Scheduled(d) => {
                return GraphAllocator::scheduler_for(d, graph).map(drop)
            }
        };
        let state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.leases > 0 {
            return Err(GgmlError::AllocatorInUse);
        }
        // SAFETY: the allocator and graph are live; no live context has tensors in the buffer
        // that a reallocation would free.
        let ok = unsafe { sys::ggml_gallocr_reserve(state.raw.as_ptr(), graph.as_ptr()) };
        if ok {
            Ok(())
        } else {
            Err(GgmlError::alloc("graph allocator buffer"))
        }
    }

    /// Allocates every unallocated tensor of `graph` in the allocator's buffer.
    ///
    /// Tensors of other contexts (weights, caches) must already be allocated. The graph's context
    /// holds a lease on the buffer until it is dropped.
    pub fn alloc_graph(&self, graph: &Graph<'_>) -> Result<()> {
        GraphAllocator::check_graph(graph)?;
        let inner = match &self.kind {
            AllocatorKind::Buffer(inner) => inner,
            AllocatorKind::Scheduled(d) => {
                let sched = GraphAllocator::scheduler_for(d, graph)?;
                sched.alloc_graph(graph)?;
                super::sched::record_fallback(d.label, &sched, graph);
                return Ok(());
            }
        };
        let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.leases > 0 {
            return Err(GgmlError::AllocatorInUse);
        }
        // SAFETY: the allocator and graph are live; every tensor it will place belongs to the
        // graph's context (checked above), which receives a lease below, and no live context
        // holds tensors in the buffers a reallocation would free (no leases).
        let ok = unsafe { sys::ggml_gallocr_alloc_graph(state.raw.as_ptr(), graph.as_ptr()) };
        if !ok {
            return Err(GgmlError::alloc("graph allocator buffer"));
        }
        state.leases += 1;
        drop(state);
        graph.context().retain(Retained::Lease {
            _lease: Box::new(AllocatorLease(inner.clone())),
        });
        Ok(())
    }

    /// Size of the allocator's buffer in bytes (0 before the first allocation).
    ///
    /// On a device, the scheduler's buffers on the device and the CPU together.
    pub fn buffer_size(&self) -> usize {
        let inner = match &self.kind {
            AllocatorKind::Buffer(inner) => inner,
            AllocatorKind::Scheduled(_) => {
                return self
                    .current_scheduler()
                    .map_or(0, |s| s.buffer_sizes().iter().map(|(_, n)| n).sum());
            }
        };
        let state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the allocator is live and buffer 0 exists (one buffer type).
        unsafe { sys::ggml_gallocr_get_buffer_size(state.raw.as_ptr(), 0) }
    }

    /// Computes `graph`, allocated last by this allocator with its inputs set, on `backend`
    /// (the backend the allocator was made for, or an instance of its device): on the CPU,
    /// [`Backend::compute`]; on a device, through the allocator's scheduler.
    pub fn compute(&self, backend: &Backend, graph: &Graph<'_>) -> Result<()> {
        self.compute_with(backend, graph, false)
    }

    /// [`GraphAllocator::compute`] with [`Backend::compute_column_stable`] on the CPU (a device
    /// computes as [`GraphAllocator::compute`]).
    pub fn compute_column_stable(&self, backend: &Backend, graph: &Graph<'_>) -> Result<()> {
        self.compute_with(backend, graph, true)
    }

    fn compute_with(
        &self,
        backend: &Backend,
        graph: &Graph<'_>,
        column_stable: bool,
    ) -> Result<()> {
        match &self.kind {
            AllocatorKind::Buffer(_) if column_stable => backend.compute_column_stable(graph),
            AllocatorKind::Buffer(_) => backend.compute(graph),
            AllocatorKind::Scheduled(_) => self
                .current_scheduler()
                .ok_or_else(|| GgmlError::WrongContextKind {
                    detail: "the graph was not allocated by this allocator".into(),
                })?
                .compute(graph),
        }
    }
}
