//! Every raw-pointer operation of the C layer, in small helpers with their contracts. The
//! entry points call these and nothing else that is `unsafe`.
//!
//! The contract a C caller agrees to (see `include/audiocpp.h`): a non-NULL handle pointer was
//! returned by this library and not yet freed, and is not used by another thread at the same
//! time (except through the calls documented as thread-safe); a non-NULL string is
//! NUL-terminated; a non-NULL buffer holds the number of elements passed with it; a non-NULL
//! out-parameter points to writable storage of its type.

use std::ffi::{c_char, c_void, CStr};

use crate::status::{AbiError, AbiResult};

/// Moves `value` to the heap and hands out the pointer (freed by [`free`]).
pub fn into_raw<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Frees a pointer made by [`into_raw`]; NULL is a no-op.
///
/// # Safety
/// `p` is NULL or came from [`into_raw`] for the same `T` and was not freed yet.
pub unsafe fn free<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: the caller guarantees `p` came from `Box::into_raw` and is freed once.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// The handle behind `p`, or an INVALID_ARGUMENT naming `what` for NULL.
///
/// # Safety
/// `p` is NULL or points to a live `T` that outlives `'a`.
pub unsafe fn handle<'a, T>(p: *const T, what: &str) -> AbiResult<&'a T> {
    // SAFETY: the caller guarantees a non-NULL `p` points to a live `T`.
    unsafe { p.as_ref() }.ok_or_else(|| AbiError::null(what))
}

/// The handle behind `p`, or `None` for NULL.
///
/// # Safety
/// As [`handle`].
pub unsafe fn opt_handle<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: the caller guarantees a non-NULL `p` points to a live `T`.
    unsafe { p.as_ref() }
}

/// The handle behind `p` for changing it, or an INVALID_ARGUMENT naming `what` for NULL.
///
/// # Safety
/// `p` is NULL or points to a live `T` that nothing else uses during `'a`.
pub unsafe fn handle_mut<'a, T>(p: *mut T, what: &str) -> AbiResult<&'a mut T> {
    // SAFETY: the caller guarantees a non-NULL `p` points to a live `T` used by it alone.
    unsafe { p.as_mut() }.ok_or_else(|| AbiError::null(what))
}

/// A required UTF-8 C string.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> AbiResult<&'a str> {
    // SAFETY: forwarded contract.
    unsafe { opt_str_arg(p, what) }?.ok_or_else(|| AbiError::null(what))
}

/// An optional UTF-8 C string (NULL gives `None`).
///
/// # Safety
/// As [`str_arg`].
pub unsafe fn opt_str_arg<'a>(p: *const c_char, what: &str) -> AbiResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller guarantees `p` is a NUL-terminated string living for `'a`.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(Some)
        .map_err(|_| AbiError::invalid(format!("{what} is not valid UTF-8")))
}

/// Writes `value` through an optional out-parameter (NULL: nothing is written).
///
/// # Safety
/// `out` is NULL or points to writable storage for a `T`.
pub unsafe fn write<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the caller guarantees `out` is writable; `write` does not read or drop the
        // old contents, which may be uninitialised.
        unsafe { out.write(value) };
    }
}

/// Checks that a required out-parameter is not NULL.
pub fn required<T>(out: *mut T, what: &str) -> AbiResult<()> {
    if out.is_null() {
        Err(AbiError::null(what))
    } else {
        Ok(())
    }
}

/// Copies `n` elements from `p` into a new vector; the allocation is tried first, so a length
/// that cannot be allocated is OUT_OF_MEMORY before the buffer is read. NULL is allowed only
/// for `n == 0`.
///
/// # Safety
/// `p` is NULL or points to at least `n` readable, initialised `T`s.
pub unsafe fn copy_slice<T: Copy>(p: *const T, n: usize, what: &str) -> AbiResult<Vec<T>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(AbiError::invalid(format!(
            "{what} is NULL but its length is {n}"
        )));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| AbiError::out_of_memory(&format!("{n} elements of {what}")))?;
    // SAFETY: the caller guarantees `p` holds `n` readable `T`s; the allocation above proved
    // that `n` elements fit in `isize::MAX` bytes, as `from_raw_parts` requires.
    let src = unsafe { std::slice::from_raw_parts(p, n) };
    v.extend_from_slice(src);
    Ok(v)
}

/// Copies `n` bytes from an untyped buffer (see [`copy_slice`]).
///
/// # Safety
/// As [`copy_slice`] for `n` bytes.
pub unsafe fn copy_bytes(p: *const c_void, n: usize, what: &str) -> AbiResult<Vec<u8>> {
    // SAFETY: forwarded contract.
    unsafe { copy_slice(p.cast::<u8>(), n, what) }
}

/// Reads `n` C-string pointers from `p` (the array itself must be non-NULL when `n > 0`) and
/// copies every string; a NULL element is an INVALID_ARGUMENT before anything is returned.
///
/// # Safety
/// `p` is NULL or points to `n` readable pointers, each NULL or a NUL-terminated string.
pub unsafe fn str_array(p: *const *const c_char, n: usize, what: &str) -> AbiResult<Vec<String>> {
    // SAFETY: forwarded contract for the array of pointers.
    let ptrs = unsafe { copy_slice(p, n, what) }?;
    ptrs.iter()
        .enumerate()
        .map(|(i, &s)| {
            // SAFETY: the caller guarantees each element is NULL or a C string.
            unsafe { str_arg(s, &format!("{what}[{i}]")) }.map(str::to_owned)
        })
        .collect()
}
