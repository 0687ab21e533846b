//! Safe layer over `ggml-sys`: types, GGUF files, contexts, tensors, graphs and backends.

pub mod dtype;
pub mod gguf;
