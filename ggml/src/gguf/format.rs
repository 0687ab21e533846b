//! The format's fixed numbers and names, shared by the reader, the metadata and the writer.
//!
//! why: in their own file (re-exported by the module) so that the files using them import
//! downwards, never from the module that declares them.

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: &[u8; 4] = b"GGUF";
/// The version [`GgufWriter`](super::GgufWriter) writes.
pub const GGUF_VERSION: u32 = 3;
/// Data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The metadata key that overrides the data alignment (a `u32`).
pub const KEY_ALIGNMENT: &str = "general.alignment";
/// Deepest array nesting the reader accepts and the writer produces; bounds the reader's
/// recursion on hostile input.
pub const MAX_ARRAY_NESTING: usize = 16;
