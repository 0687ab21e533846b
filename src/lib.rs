//! lfm2-engine's C-ABI library: a drop-in for audio.cpp's C API (ABI 0.2.0, `include/audiocpp.h`)
//! serving the `lfm2_audio` family (ASR, TTS, multi-turn S2S, offline and streamed), plus our
//! extensions (`include/lfm2e.h`: cancel, cache figures).
//!
//! Layers, from the boundary in:
//! - `capi`: the exported functions; they check pointers through `ptr` (the only raw-pointer
//!   code), run under `status::guard` (no panic crosses the boundary) and call
//! - the handles (`model`, `session`, `request`, `result`) and their logic (`options`, `jobs`,
//!   `stream`), which are safe Rust, and
//! - `engine`, the one file that names audio-engine's API.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod capi;
mod engine;
#[cfg(feature = "hub")]
mod hub;
mod jobs;
pub mod layout;
mod model;
mod options;
mod ptr;
mod request;
mod result;
mod session;
mod status;
mod stream;
mod vocab;

/// How a text reaches C through this library: a C string cannot hold NUL, so interior NULs
/// become U+FFFD (the rest of the text is unchanged).
pub fn c_text(text: &str) -> String {
    status::c_string(text).into_string().expect("valid UTF-8")
}

/// Checks the request behind a handle from `audiocpp_request_create` for `task` (`asr`, `tts`,
/// `s2s`) as an offline session with default session options on a model of `language` does
/// before it runs (the same translation into the engine's request and the same checks),
/// returning the engine's checked request, or the status code and message the session call
/// would return. For the option table's tests (C ABI against HTTP); not an API.
///
/// # Safety
/// `request` is a live request handle used by this thread alone.
#[doc(hidden)]
pub unsafe fn resolve_request_handle(
    request: *const std::ffi::c_void,
    task: &str,
    language: &str,
) -> Result<audio_engine::lfm2_audio::ResolvedRequest, (i32, String)> {
    // SAFETY: the caller's contract: a live handle, which is a `request::Request`.
    let req = unsafe { ptr::handle(request.cast::<request::Request>(), "request") }
        .map_err(|e| (e.status.code(), e.message))?;
    let task = vocab::task_from_token(task).ok_or_else(|| (-1, format!("no task `{task}`")))?;
    let settings = options::SessionSettings::default();
    jobs::plan(task, req, &settings, language, false)
        .map(|p| audio_engine::lfm2_audio::ResolvedRequest {
            job: p.job,
            frames_per_event: p.frames_per_event,
        })
        .map_err(|e| (e.status.code(), e.message))
}
