//! Raw FFI bindings to the pinned ggml (the copy inside llama.cpp), built with our patches.
//!
//! The bindings are generated with bindgen and committed (`src/bindings.rs`, and one file per GPU
//! backend); regenerate them with `cargo run -p xtask -- bindings`. A test in `xtask` fails when
//! they are stale. Building needs no libclang.
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    clippy::all
)]
#![allow(missing_docs, rustdoc::all)]

include!("bindings.rs");

/// Which build of ggml's CPU code is in use: the instruction-set levels.
pub mod cpu_level;

/// CUDA backend entry points (feature `cuda`).
#[cfg(feature = "cuda")]
pub mod cuda {
    use super::*;
    include!("cuda.rs");
}

/// Metal backend entry points (feature `metal`).
#[cfg(feature = "metal")]
pub mod metal {
    use super::*;
    include!("metal.rs");
}

/// The patched upstream tree this crate was compiled from (inside the build's OUT_DIR); empty in
/// a docs.rs build, which compiles no C.
///
/// `cargo run -p xtask -- export-tree DIR` copies it for CMake builds on machines without Rust.
pub const PATCHED_TREE: &str = env!("GGML_SYS_PATCHED_TREE");
