//! Status codes, the error type of the C layer, the thread-local last error, and the guards
//! that keep panics on this side of the boundary.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `audiocpp_status` as it crosses the boundary (a C enum is an `int`-sized value).
#[allow(non_camel_case_types)]
pub type audiocpp_status = c_int;

/// The status codes of `audiocpp.h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Status {
    /// `AUDIOCPP_OK`.
    Ok = 0,
    /// `AUDIOCPP_ERR_INVALID_ARGUMENT`.
    InvalidArgument = 1,
    /// `AUDIOCPP_ERR_UNSUPPORTED_FAMILY`.
    UnsupportedFamily = 2,
    /// `AUDIOCPP_ERR_LOAD_FAILED`.
    LoadFailed = 3,
    /// `AUDIOCPP_ERR_RUNTIME`.
    Runtime = 4,
    /// `AUDIOCPP_ERR_OUT_OF_MEMORY`.
    OutOfMemory = 5,
    /// `AUDIOCPP_ERR_OUT_OF_RANGE`.
    OutOfRange = 6,
    /// `AUDIOCPP_ERR_NOT_AVAILABLE`.
    NotAvailable = 7,
}

impl Status {
    /// Every status, in value order.
    pub const ALL: [Status; 8] = [
        Status::Ok,
        Status::InvalidArgument,
        Status::UnsupportedFamily,
        Status::LoadFailed,
        Status::Runtime,
        Status::OutOfMemory,
        Status::OutOfRange,
        Status::NotAvailable,
    ];

    /// The value a C caller sees.
    pub fn code(self) -> audiocpp_status {
        self as c_int
    }

    /// The static text of `audiocpp_status_string`, NUL-terminated.
    pub fn text(code: c_int) -> &'static [u8] {
        match code {
            0 => b"ok\0",
            1 => b"invalid argument\0",
            2 => b"unsupported family\0",
            3 => b"load failed\0",
            4 => b"runtime error\0",
            5 => b"out of memory\0",
            6 => b"index out of range\0",
            7 => b"not available\0",
            _ => b"unknown status\0",
        }
    }
}

/// A failed call: the status to return and the text for `audiocpp_last_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbiError {
    /// What the caller gets back.
    pub status: Status,
    /// Why.
    pub message: String,
}

impl AbiError {
    /// An error with `status`.
    pub fn new(status: Status, message: impl Into<String>) -> AbiError {
        AbiError {
            status,
            message: message.into(),
        }
    }

    /// `AUDIOCPP_ERR_INVALID_ARGUMENT`.
    pub fn invalid(message: impl Into<String>) -> AbiError {
        AbiError::new(Status::InvalidArgument, message)
    }

    /// `AUDIOCPP_ERR_NOT_AVAILABLE`.
    pub fn not_available(message: impl Into<String>) -> AbiError {
        AbiError::new(Status::NotAvailable, message)
    }

    /// `AUDIOCPP_ERR_OUT_OF_RANGE` for `index` in a list of `count`.
    pub fn out_of_range(what: &str, index: usize, count: usize) -> AbiError {
        AbiError::new(
            Status::OutOfRange,
            format!("{what} index {index} is out of range (count {count})"),
        )
    }

    /// `AUDIOCPP_ERR_RUNTIME`.
    pub fn runtime(message: impl Into<String>) -> AbiError {
        AbiError::new(Status::Runtime, message)
    }

    /// `AUDIOCPP_ERR_OUT_OF_MEMORY` for an allocation of `what`.
    pub fn out_of_memory(what: &str) -> AbiError {
        AbiError::new(
            Status::OutOfMemory,
            format!("out of memory: cannot allocate {what}"),
        )
    }

    /// A NULL where a value is required.
    pub fn null(what: &str) -> AbiError {
        AbiError::invalid(format!("{what} is NULL"))
    }
}

/// What a call returns to the guard.
pub type AbiResult<T> = Result<T, AbiError>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Replaces this thread's last error (interior NULs become spaces: the text is a C string).
pub fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// This thread's last error; the pointer stays valid until this thread's next call that sets
/// or clears it (the `CString`'s buffer does not move while it is stored).
pub fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}

/// Runs a fallible entry point: clears the last error, runs `f` with panics caught, and turns
/// the outcome into a status (a panic becomes `fallback`, its message the last error).
pub fn guard(fallback: Status, f: impl FnOnce() -> AbiResult<()>) -> audiocpp_status {
    set_last_error("");
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => Status::Ok.code(),
        Ok(Err(e)) => {
            set_last_error(&e.message);
            e.status.code()
        }
        Err(payload) => {
            set_last_error(&format!("internal error: {}", panic_text(payload.as_ref())));
            fallback.code()
        }
    }
}

/// Runs an infallible entry point (a count, a name, a free): panics are caught and give
/// `fallback`; the last error is left alone unless a panic happened.
pub fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            set_last_error(&format!("internal error: {}", panic_text(payload.as_ref())));
            fallback
        }
    }
}

/// A string handed to C: the text with interior NULs (which a C string cannot hold) replaced
/// by U+FFFD, so the rest of the text survives.
pub fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', "\u{FFFD}")).expect("NULs were replaced")
}
