//! Copies of the C strings ggml hands out (names, descriptions).

use std::ffi::CStr;

/// The string at `p` copied (invalid UTF-8 replaced), or `None` for a null pointer.
pub(crate) fn c_string(p: *const std::ffi::c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: ggml returns NUL-terminated strings owned by the device, valid while it is
    // registered (for the program's lifetime for built-in backends); we copy immediately.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}
