//! Raw FFI bindings to the pinned libllama, built against `ggml-sys`'s ggml (one copy of ggml in
//! any binary). ggml and gguf types come from `ggml_sys` and are re-exported here.
//!
//! Regenerate `src/bindings.rs` with `cargo run -p xtask -- bindings`.
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    clippy::all
)]
#![allow(missing_docs, rustdoc::all)]

pub use ggml_sys::*;

include!("bindings.rs");
