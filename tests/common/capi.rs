//! The C ABI's entry points as the Rust test binaries call them (declared as
//! `include/audiocpp.h` does; the `c_abi_surface` test checks those signatures), and the status
//! and message helpers they share. Linking the `lfm2_engine` rlib provides the symbols.

use std::ffi::{c_char, c_int, c_void, CStr};

// why: the library's `#[no_mangle]` entry points come from the rlib; nothing else names it.
use lfm2_engine as _;

/// An opaque handle of the C ABI.
#[repr(C)]
pub struct Opaque {
    _p: [u8; 0],
}

extern "C" {
    pub fn audiocpp_last_error() -> *const c_char;
    pub fn audiocpp_registry_create(config_path: *const c_char, out: *mut *mut Opaque) -> c_int;
    pub fn audiocpp_registry_free(registry: *mut Opaque);
    pub fn audiocpp_model_load(
        registry: *mut Opaque,
        model_path: *const c_char,
        config: *const Opaque,
        load_options: *const Opaque,
        out: *mut *mut Opaque,
    ) -> c_int;
    pub fn audiocpp_model_free(model: *mut Opaque);
    pub fn audiocpp_session_create(
        model: *const Opaque,
        task: *const c_char,
        mode: *const c_char,
        backend: *const Opaque,
        session_options: *const Opaque,
        out: *mut *mut Opaque,
    ) -> c_int;
    pub fn audiocpp_session_free(session: *mut Opaque);
    pub fn audiocpp_session_run(
        session: *mut Opaque,
        request: *const Opaque,
        out: *mut *mut Opaque,
    ) -> c_int;
    pub fn audiocpp_request_create() -> *mut Opaque;
    pub fn audiocpp_request_free(request: *mut Opaque);
    pub fn audiocpp_request_set_text(
        r: *mut Opaque,
        text: *const c_char,
        language: *const c_char,
    ) -> c_int;
    pub fn audiocpp_request_set_audio(
        r: *mut Opaque,
        samples: *const f32,
        frames: usize,
        rate: c_int,
        channels: c_int,
    ) -> c_int;
    pub fn audiocpp_request_set_option(
        r: *mut Opaque,
        key: *const c_char,
        value: *const c_char,
    ) -> c_int;
    pub fn audiocpp_request_add_artifact(
        r: *mut Opaque,
        kind: c_int,
        id: *const c_char,
        payload: *const c_void,
        payload_bytes: usize,
        out_index: *mut usize,
    ) -> c_int;
    pub fn audiocpp_result_free(result: *mut Opaque);
    pub fn audiocpp_result_text(
        result: *const Opaque,
        out_text: *mut *const c_char,
        out_language: *mut *const c_char,
    ) -> c_int;
    pub fn lfm2e_session_cancel(session: *const Opaque) -> c_int;
    pub fn lfm2e_session_was_cancelled(session: *const Opaque) -> c_int;
}

pub const INVALID_ARGUMENT: c_int = 1;
/// `AUDIOCPP_ERR_RUNTIME`.
pub const RUNTIME: c_int = 4;
/// `AUDIOCPP_ERR_OUT_OF_MEMORY`.
pub const OUT_OF_MEMORY: c_int = 5;
/// `AUDIOCPP_ARTIFACT_CUSTOM`.
pub const ARTIFACT_CUSTOM: c_int = 8;

/// The calling thread's `audiocpp_last_error()` text.
pub fn last_error() -> String {
    // SAFETY: never NULL, valid until this thread's next call.
    unsafe { CStr::from_ptr(audiocpp_last_error()) }
        .to_string_lossy()
        .into_owned()
}
