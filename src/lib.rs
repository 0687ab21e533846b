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
