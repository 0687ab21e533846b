//! Pure-Rust GGUF reader and writer.
//!
//! GGUF is ggml's model container: a header, typed key/value metadata, tensor
//! infos (name, shape in ggml order, [`GgmlType`], offset), then the tensor data,
//! each tensor aligned to `general.alignment` (default 32) from the start of the
//! data section. All integers are little-endian.
//!
//! [`GgufFile`] reads versions 2 and 3 (they share a layout) and validates the
//! whole structure before returning: magic and version; every count and string
//! length against the bytes left (so corrupt counts cannot cause huge
//! allocations); UTF-8 of keys, names and strings; unique non-empty keys and
//! unique tensor names; value and tensor type ids; `general.alignment` being a
//! `u32` power of two; at most 4 non-negative dimensions whose rows are whole
//! blocks; tensor offsets aligned, inside the file and non-overlapping. Each
//! failure is a [`GgufErrorKind`] naming the key, tensor or offset, and errors
//! from [`GgufFile::open`] carry the path.
//!
//! [`GgufWriter`] writes version 3 in the layout ggml itself produces (tensors
//! in order, each padded; the metadata bytes equal `gguf_get_meta_data`'s), so
//! ggml and gguf-py read its output. One caveat: the format allows arrays of
//! arrays and both sides here support them, but ggml's reader (and so
//! llama.cpp) rejects any file containing one, so keep them out of model files.
//!
//! Shapes are in ggml order everywhere: `shape[0]` is the fastest-varying
//! dimension (a row), exactly as GGUF stores them.
//!
//! [`GgmlType`]: crate::dtype::GgmlType

/// The typed shortcuts over `get_as`, shared by [`GgufMetadata`] and [`GgufFile`] (which attaches
/// its path to errors in its own `get_as`).
macro_rules! typed_getters {
    () => {
        typed_getters! {
            get_u32 -> u32: "A `u32` value.",
            get_i32 -> i32: "An `i32` value.",
            get_u64 -> u64: "A `u64` value.",
            get_i64 -> i64: "An `i64` value.",
            get_f32 -> f32: "An `f32` value.",
            get_f64 -> f64: "An `f64` value.",
            get_bool -> bool: "A `bool` value.",
            get_str -> &str: "A string value.",
            get_array -> &GgufArray: "An array value of any element type.",
            get_str_array -> &[String]: "An array of strings.",
            get_i32_array -> &[i32]: "An array of `i32`.",
            get_u32_array -> &[u32]: "An array of `u32`.",
            get_f32_array -> &[f32]: "An array of `f32`.",
        }
    };
    ($($name:ident -> $ty:ty: $doc:literal,)*) => {
        $(
            #[doc = $doc]
            pub fn $name(&self, key: &str) -> Result<$ty> {
                self.get_as(key)
            }
        )*
    };
}

mod error;
mod file;
mod format;
mod metadata;
mod reader;
mod tensor_info;
mod value;
mod writer;

pub use error::{GgufError, GgufErrorKind, Result};
pub use file::GgufFile;
pub use format::{DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, KEY_ALIGNMENT, MAX_ARRAY_NESTING};
pub use metadata::GgufMetadata;
pub use tensor_info::TensorInfo;
pub use value::{FromGgufValue, GgufArray, GgufValue, GgufValueType};
pub use writer::{GgufWriter, TensorData, TensorWriteFn, MAX_TENSOR_NAME_LEN};
