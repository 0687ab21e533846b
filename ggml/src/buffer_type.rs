//! Buffer types (`ggml_backend_buffer_type_t`): the handle, its name, and the CPU's extra
//! buffer types (weights laid out for repacked kernels).
//!
//! why its own file: tensors, buffers, schedulers and weight stores ask about buffer types; in
//! `backend.rs` tensors imported the backend above them.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::OnceLock;

use ggml_sys as sys;

use super::c_str::c_string;
use super::log;

/// A buffer type handle (`ggml_backend_buffer_type_t`).
#[derive(Clone, Copy)]
pub(crate) struct BufferType(pub(crate) NonNull<sys::ggml_backend_buffer_type>);

// SAFETY: buffer types are immutable objects owned by their backend registry for the whole
// program; ggml's buffer-type functions may be called from any thread.
unsafe impl Send for BufferType {}
// SAFETY: see `Send`; the handle is never used to mutate the buffer type.
unsafe impl Sync for BufferType {}

/// The CPU device of ggml's registry.
pub(crate) fn cpu_device() -> Option<NonNull<sys::ggml_backend_device>> {
    log::ensure_installed();
    // SAFETY: the registry is initialised on first use; the CPU device is always registered.
    NonNull::new(unsafe { sys::ggml_backend_dev_by_type(sys::GGML_BACKEND_DEVICE_TYPE_CPU) })
}

/// The CPU backend's extra buffer types (`CPU_REPACK`, and AMX or KleidiAI where built in), in
/// ggml's order of preference, as `ggml_backend_dev_get_extra_bufts` reports them (llama.cpp's
/// `make_cpu_buft_list`). Empty when the CPU device offers none.
pub(crate) fn cpu_extra_buffer_types() -> &'static [BufferType] {
    static BUFTS: OnceLock<Vec<BufferType>> = OnceLock::new();
    BUFTS.get_or_init(|| {
        let Some(dev) = cpu_device() else {
            return Vec::new();
        };
        // SAFETY: `dev` is a registered device.
        let Some(reg) = NonNull::new(unsafe { sys::ggml_backend_dev_backend_reg(dev.as_ptr()) })
        else {
            return Vec::new();
        };
        let name = c"ggml_backend_dev_get_extra_bufts";
        // SAFETY: `reg` is a live registry entry and `name` is NUL-terminated.
        let p = unsafe { sys::ggml_backend_reg_get_proc_address(reg.as_ptr(), name.as_ptr()) };
        if p.is_null() {
            return Vec::new();
        }
        type GetExtraBufts =
            unsafe extern "C" fn(sys::ggml_backend_dev_t) -> *mut sys::ggml_backend_buffer_type_t;
        // SAFETY: ggml documents this proc address as a `ggml_backend_dev_get_extra_bufts_t`,
        // i.e. `ggml_backend_buffer_type_t * (*)(ggml_backend_dev_t)`.
        let get = unsafe { std::mem::transmute::<*mut c_void, GetExtraBufts>(p) };
        // SAFETY: `dev` is the CPU device the function belongs to; it returns a static,
        // null-terminated array (or null).
        let mut list = unsafe { get(dev.as_ptr()) };
        let mut out = Vec::new();
        while !list.is_null() {
            // SAFETY: `list` points into the null-terminated array, not past its terminator.
            let Some(buft) = NonNull::new(unsafe { *list }) else {
                break;
            };
            out.push(BufferType(buft));
            // SAFETY: the current entry is not the terminator, so the next one exists.
            list = unsafe { list.add(1) };
        }
        out
    })
}

/// Whether `buft` is one of the CPU's extra buffer types (weights in it are laid out for that
/// type's kernels, not as plain ggml rows).
pub(crate) fn is_cpu_extra(buft: *mut sys::ggml_backend_buffer_type) -> bool {
    !buft.is_null()
        && cpu_extra_buffer_types()
            .iter()
            .any(|b| b.0.as_ptr() == buft)
}

/// The name of buffer type `buft`.
pub(crate) fn buffer_type_name(buft: BufferType) -> String {
    // SAFETY: buffer types are static objects of their registry; the name is a static string.
    c_string(unsafe { sys::ggml_backend_buft_name(buft.0.as_ptr()) }).unwrap_or_default()
}
