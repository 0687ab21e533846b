//! Tensor handles: shape and type accessors, and checked reads and writes of tensor data.

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use ggml_sys as sys;

// why this file and `context.rs` import each other (the one import circle kept in `ggml`): a
// context makes its tensors and a `Tensor<'a>` borrows its context for `'a`, so the two are one
// unit, kept in two files for size.
use super::context::Context;
use super::dtype::GgmlType;
use super::error::{GgmlError, Result};

/// A handle to a tensor in a [`Context`].
///
/// Handles are `Copy` and borrow their context (`'ctx`), so they cannot outlive the memory their
/// metadata lives in. They are neither `Send` nor `Sync`: a context is used from one thread.
#[derive(Clone, Copy)]
pub struct Tensor<'ctx> {
    ptr: NonNull<sys::ggml_tensor>,
    _ctx: PhantomData<&'ctx Context>,
}

impl fmt::Debug for Tensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("name", &self.name())
            .field("type", &self.ty())
            .field("ne", &self.ne())
            .field("op", &self.op_name())
            .finish()
    }
}

/// Where a tensor's bytes live.
enum Storage {
    /// In a backend buffer: use `ggml_backend_tensor_{get,set}`.
    Backend,
    /// In the pool of a context created with [`Context::with_memory`] (host memory).
    Host(*mut u8),
}

impl<'ctx> Tensor<'ctx> {
    /// Wraps a raw tensor pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a tensor whose metadata (and whatever it references) stays valid for
    /// `'ctx`, i.e. a tensor of a context borrowed for `'ctx`.
    pub(crate) unsafe fn from_raw(ptr: NonNull<sys::ggml_tensor>) -> Tensor<'ctx> {
        Tensor {
            ptr,
            _ctx: PhantomData,
        }
    }

    /// The raw pointer, for FFI calls.
    pub(crate) fn as_ptr(self) -> *mut sys::ggml_tensor {
        self.ptr.as_ptr()
    }

    /// The raw pointer as `NonNull`.
    pub(crate) fn as_non_null(self) -> NonNull<sys::ggml_tensor> {
        self.ptr
    }

    /// Whether `self` and `other` are handles to the same tensor.
    pub fn same_as(self, other: Tensor<'_>) -> bool {
        self.ptr == other.ptr
    }

    /// A copy of the tensor's metadata.
    pub(crate) fn header(self) -> sys::ggml_tensor {
        // SAFETY: the handle's lifetime guarantees the tensor struct is live, and it is only
        // mutated through this layer on the context's thread, never concurrently with this read.
        unsafe { self.ptr.as_ptr().read() }
    }

    /// Number of elements per dimension (`ne`), innermost first.
    pub fn ne(self) -> [i64; 4] {
        self.header().ne
    }

    /// Strides in bytes per dimension (`nb`).
    pub fn nb(self) -> [usize; 4] {
        self.header().nb
    }

    /// Element type.
    pub fn ty(self) -> GgmlType {
        let id = self.header().type_;
        // Tensors are only ever created with a `GgmlType` or by ggml ops, which produce types
        // that exist, so every id a tensor carries has a variant.
        GgmlType::from_u32(id).unwrap_or_else(|| unreachable!("tensor with unknown type id {id}"))
    }

    /// The tensor's name (empty if none was set).
    pub fn name(self) -> String {
        let hdr = self.header();
        let bytes: Vec<u8> = hdr
            .name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Sets the tensor's name. Names are at most 63 bytes and contain no NUL. A shared
    /// weight's name cannot be changed ([`GgmlError::ReadOnly`]).
    pub fn set_name(self, name: &str) -> Result<()> {
        if super::read_only::is_store_tensor(self.as_ptr()) {
            return Err(GgmlError::ReadOnly {
                tensor: self.name(),
            });
        }
        if name.len() >= sys::GGML_MAX_NAME as usize {
            return Err(GgmlError::arg(
                "set_name",
                format!("name {name:?} is longer than 63 bytes"),
            ));
        }
        let c = CString::new(name)
            .map_err(|_| GgmlError::arg("set_name", "name contains a NUL byte"))?;
        // SAFETY: the tensor is live (handle lifetime) and `c` is NUL-terminated and shorter than
        // the name field; ggml copies it.
        unsafe { sys::ggml_set_name(self.as_ptr(), c.as_ptr()) };
        Ok(())
    }

    /// Total number of elements.
    pub fn nelements(self) -> i64 {
        self.ne().iter().product()
    }

    /// Number of rows (elements divided by `ne[0]`).
    pub fn nrows(self) -> i64 {
        let ne = self.ne();
        ne[1] * ne[2] * ne[3]
    }

    /// Bytes spanned by the tensor's data (`ggml_nbytes`).
    pub fn nbytes(self) -> usize {
        // SAFETY: the tensor is live; `ggml_nbytes` only reads its shape, strides and type.
        unsafe { sys::ggml_nbytes(self.as_ptr()) }
    }

    /// Number of dimensions, ignoring trailing dimensions of size 1 (at least 1).
    pub fn n_dims(self) -> usize {
        let ne = self.ne();
        (1..4).rev().find(|&i| ne[i] != 1).map_or(1, |i| i + 1)
    }

    /// Whether the elements are laid out densely in order (`ggml_is_contiguous`).
    pub fn is_contiguous(self) -> bool {
        // SAFETY: the tensor is live; the predicate only reads metadata.
        unsafe { sys::ggml_is_contiguous(self.as_ptr()) }
    }

    /// Whether this tensor is a view of another tensor's data.
    pub fn is_view(self) -> bool {
        !self.header().view_src.is_null()
    }

    /// Whether the tensor has memory (a backend buffer or a host context pool).
    pub fn is_allocated(self) -> bool {
        !self.header().data.is_null()
    }

    /// ggml's name of the operation that produces this tensor (`"NONE"` for leaves).
    pub fn op_name(self) -> String {
        // SAFETY: the tensor is live; ggml returns a static string.
        let p = unsafe { sys::ggml_op_desc(self.as_ptr()) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: `p` is a static NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Marks the tensor as a graph input: graph allocators place it where nothing else overlaps.
    /// Does nothing to a shared weight (it has its memory already, and is never written).
    pub fn set_input(self) {
        if super::read_only::is_store_tensor(self.as_ptr()) {
            return;
        }
        // SAFETY: the tensor is live and not shared with other threads (its context's thread
        // owns it); this sets a flag bit.
        unsafe { sys::ggml_set_input(self.as_ptr()) }
    }

    /// Marks the tensor as a graph output: graph allocators never reuse its memory. Does nothing
    /// to a shared weight (it has its memory already, and is never written).
    pub fn set_output(self) {
        if super::read_only::is_store_tensor(self.as_ptr()) {
            return;
        }
        // SAFETY: as in `set_input`.
        unsafe { sys::ggml_set_output(self.as_ptr()) }
    }

    /// The tensor's view source, if it is a view.
    fn view_src_header(self) -> Option<sys::ggml_tensor> {
        let hdr = self.header();
        // SAFETY: a view's source is the root tensor it was created from; the handle's lifetime
        // is bounded by the source's context (ops take both with the same lifetime), so it is live.
        NonNull::new(hdr.view_src).map(|p| unsafe { Tensor::from_raw(p) }.header())
    }

    /// Resolves where the tensor's data lives, initialising a backend view on first use.
    fn storage(self) -> Result<Storage> {
        let mut hdr = self.header();
        let src = self.view_src_header();
        if hdr.data.is_null() {
            if let Some(src) = src {
                if !src.data.is_null() && !src.buffer.is_null() && hdr.buffer.is_null() {
                    // SAFETY: the tensor is a view (view_src set) without a buffer whose source is
                    // allocated in a buffer: exactly the preconditions of `ggml_backend_view_init`.
                    let status = unsafe { sys::ggml_backend_view_init(self.as_ptr()) };
                    if status != sys::GGML_STATUS_SUCCESS {
                        return Err(GgmlError::alloc("view initialisation"));
                    }
                    hdr = self.header();
                }
            }
        }
        if hdr.data.is_null() {
            return Err(GgmlError::NotAllocated {
                tensor: self.name(),
            });
        }
        let root_buffer = match src {
            Some(src) => src.buffer,
            None => hdr.buffer,
        };
        if root_buffer.is_null() {
            return Ok(Storage::Host(hdr.data.cast()));
        }
        // SAFETY: `root_buffer` is the live buffer holding the tensor's data.
        let buft = unsafe { sys::ggml_backend_buffer_get_type(root_buffer) };
        if super::buffer_type::is_cpu_extra(buft) {
            // why: an extra buffer type's bytes are laid out for its kernels, and it has no
            // `get_tensor` (ggml would call a null function); weights in it are never written.
            return Err(GgmlError::IncompatibleTensor {
                tensor: self.name(),
                detail: "its data is repacked for the CPU's kernels and cannot be read or \
                         written as plain bytes"
                    .into(),
            });
        }
        Ok(Storage::Backend)
    }

    fn check_range(self, offset: usize, len: usize) -> Result<()> {
        let nbytes = self.nbytes();
        match offset.checked_add(len) {
            Some(end) if end <= nbytes => Ok(()),
            _ => Err(GgmlError::oob(format!(
                "bytes {offset}..{offset}+{len} of tensor {:?} ({nbytes} bytes)",
                self.name()
            ))),
        }
    }

    /// Writes raw bytes at byte `offset` of the tensor's data.
    ///
    /// Offsets address the tensor's byte span (`nbytes`); for a non-contiguous view that span
    /// includes the bytes between its elements.
    pub fn set_bytes(self, offset: usize, bytes: &[u8]) -> Result<()> {
        if super::read_only::is_read_only(self.as_ptr()) {
            return Err(GgmlError::ReadOnly {
                tensor: self.name(),
            });
        }
        self.check_range(offset, bytes.len())?;
        if bytes.is_empty() {
            return Ok(());
        }
        match self.storage()? {
            Storage::Backend => {
                // SAFETY: the tensor is live and allocated in a backend buffer (checked by
                // `storage`), and `offset + len <= nbytes` (checked above), which are all of
                // `ggml_backend_tensor_set`'s preconditions; `bytes` is valid for `len` reads.
                unsafe {
                    sys::ggml_backend_tensor_set(
                        self.as_ptr(),
                        bytes.as_ptr().cast(),
                        offset,
                        bytes.len(),
                    )
                }
            }
            Storage::Host(data) => {
                // SAFETY: `data` points to the tensor's `nbytes` bytes in a live host context
                // pool (the handle borrows the context owning it, or one its lifetime is bounded
                // by), the range was checked above, and a Rust slice cannot overlap ggml's pool.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        data.wrapping_add(offset),
                        bytes.len(),
                    )
                }
            }
        }
        Ok(())
    }

    /// Reads `out.len()` bytes starting at byte `offset` of the tensor's data.
    pub fn read_bytes(self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check_range(offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        match self.storage()? {
            Storage::Backend => {
                // SAFETY: as in `set_bytes`; `out` is valid for `len` writes.
                unsafe {
                    sys::ggml_backend_tensor_get(
                        self.as_ptr(),
                        out.as_mut_ptr().cast(),
                        offset,
                        out.len(),
                    )
                }
            }
            Storage::Host(data) => {
                // SAFETY: as in `set_bytes`, with the copy going the other way.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.wrapping_add(offset),
                        out.as_mut_ptr(),
                        out.len(),
                    )
                }
            }
        }
        Ok(())
    }

    /// All of the tensor's data bytes (`nbytes` of them).
    pub fn get_bytes(self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.nbytes()];
        self.read_bytes(0, &mut out)?;
        Ok(out)
    }

    /// Sets every element of a contiguous tensor to zero.
    pub fn set_zero(self) -> Result<()> {
        if !self.is_contiguous() {
            return Err(GgmlError::layout("set_zero", "tensor must be contiguous"));
        }
        let zeros = vec![0u8; self.nbytes()];
        self.set_bytes(0, &zeros)
    }

    fn check_typed(self, op: &'static str, ty: GgmlType, len: usize) -> Result<()> {
        if self.ty() != ty {
            return Err(GgmlError::ty(op, self.ty(), format!("tensor must be {ty}")));
        }
        if !self.is_contiguous() {
            return Err(GgmlError::layout(op, "tensor must be contiguous"));
        }
        let n = self.nelements();
        if usize::try_from(n).ok() != Some(len) {
            return Err(GgmlError::shape(
                op,
                format!("tensor has {n} elements, slice has {len}"),
            ));
        }
        Ok(())
    }

    /// Writes `data` into a contiguous F32 tensor with exactly `data.len()` elements.
    pub fn set_f32(self, data: &[f32]) -> Result<()> {
        self.check_typed("set_f32", GgmlType::F32, data.len())?;
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
        self.set_bytes(0, &bytes)
    }

    /// Reads a contiguous F32 tensor.
    pub fn get_f32(self) -> Result<Vec<f32>> {
        let n = usize::try_from(self.nelements()).unwrap_or(0);
        self.check_typed("get_f32", GgmlType::F32, n)?;
        let bytes = self.get_bytes()?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// Writes `data` into a contiguous I32 tensor with exactly `data.len()` elements.
    pub fn set_i32(self, data: &[i32]) -> Result<()> {
        self.check_typed("set_i32", GgmlType::I32, data.len())?;
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
        self.set_bytes(0, &bytes)
    }

    /// Reads a contiguous I32 tensor.
    pub fn get_i32(self) -> Result<Vec<i32>> {
        let n = usize::try_from(self.nelements()).unwrap_or(0);
        self.check_typed("get_i32", GgmlType::I32, n)?;
        let bytes = self.get_bytes()?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// Writes `data` into a contiguous I64 tensor with exactly `data.len()` elements.
    pub fn set_i64(self, data: &[i64]) -> Result<()> {
        self.check_typed("set_i64", GgmlType::I64, data.len())?;
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
        self.set_bytes(0, &bytes)
    }

    /// Writes `data`, converted to half precision, into a contiguous F16 tensor.
    pub fn set_f32_as_f16(self, data: &[f32]) -> Result<()> {
        self.check_typed("set_f32_as_f16", GgmlType::F16, data.len())?;
        let bytes: Vec<u8> = data
            .iter()
            .flat_map(|&v| super::dtype::f32_to_f16(v).to_ne_bytes())
            .collect();
        self.set_bytes(0, &bytes)
    }

    /// Reads a contiguous F16 tensor, converted to `f32`.
    pub fn get_f16_as_f32(self) -> Result<Vec<f32>> {
        let n = usize::try_from(self.nelements()).unwrap_or(0);
        self.check_typed("get_f16_as_f32", GgmlType::F16, n)?;
        let bytes = self.get_bytes()?;
        Ok(bytes
            .chunks_exact(2)
            .map(|c| super::dtype::f16_to_f32(u16::from_ne_bytes([c[0], c[1]])))
            .collect())
    }
}
