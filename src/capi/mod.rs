//! The exported entry points of `include/audiocpp.h` and `include/lfm2e.h`. Each one checks
//! its arguments through the helpers of [`crate::ptr`], runs under a guard (no panic crosses
//! the boundary; the status and `audiocpp_last_error` say what happened) and calls the safe
//! layer. The C type names are aliases of the Rust handle types, so the signatures here read
//! like the header's (a test compares the two).
#![allow(non_camel_case_types)]

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};

mod base;
mod ext;
mod model;
mod request;
mod result;
mod session;
mod stream;

pub use base::ABI_VERSION;

pub use crate::status::audiocpp_status;

/// `audiocpp_options`: a string map.
pub struct OptionsHandle(pub BTreeMap<String, String>);

/// `audiocpp_registry`.
pub type audiocpp_registry = crate::model::RegistryHandle;
/// `audiocpp_model`.
pub type audiocpp_model = crate::model::ModelHandle;
/// `audiocpp_session`.
pub type audiocpp_session = crate::session::SessionHandle;
/// `audiocpp_options`.
pub type audiocpp_options = OptionsHandle;
/// `audiocpp_request`.
pub type audiocpp_request = crate::request::Request;
/// `audiocpp_result`.
pub type audiocpp_result = crate::result::ResultData;
/// `audiocpp_event`.
pub type audiocpp_event = crate::result::EventData;

/// `audiocpp_option_scope` (an `int`-sized C enum).
pub type audiocpp_option_scope = c_int;
/// `audiocpp_artifact_kind`.
pub type audiocpp_artifact_kind = c_int;
/// `audiocpp_stream_input_kind`.
pub type audiocpp_stream_input_kind = c_int;
/// `audiocpp_stream_output_kind`.
pub type audiocpp_stream_output_kind = c_int;
/// `audiocpp_voice_activity_kind`.
pub type audiocpp_voice_activity_kind = c_int;

/// `audiocpp_model_config`, laid out as in the header.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct audiocpp_model_config {
    /// `--family`; NULL = detect.
    pub family_hint: *const c_char,
    /// `--config`.
    pub config_id: *const c_char,
    /// `--weight`.
    pub weight_id: *const c_char,
    /// `--model-spec-override`.
    pub model_spec_override: *const c_char,
}

/// `audiocpp_backend_config`, laid out as in the header.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct audiocpp_backend_config {
    /// Backend name; NULL = cpu.
    pub backend: *const c_char,
    /// Device index.
    pub device: c_int,
    /// Compute threads, > 0.
    pub threads: c_int,
}

/// A static NUL-terminated string as a C pointer.
fn static_str(s: &'static [u8]) -> *const c_char {
    debug_assert_eq!(s.last(), Some(&0));
    s.as_ptr().cast()
}
