//! One tensor's entry in a GGUF file: name, type, shape and where its bytes lie.
//!
//! why its own file: the reader makes these entries and the file hands them out, so the type
//! sits below both (in `file.rs` it tied the reader and the file into a circle).

use crate::dtype::GgmlType;

/// Where a tensor's data lives and how to interpret it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    name: String,
    n_dims: usize,
    ne: [u64; 4],
    ggml_type: GgmlType,
    offset: u64,
    file_offset: u64,
    n_bytes: usize,
}

impl TensorInfo {
    pub(crate) fn new(
        name: String,
        n_dims: usize,
        ne: [u64; 4],
        ggml_type: GgmlType,
        offset: u64,
        n_bytes: usize,
    ) -> Self {
        TensorInfo {
            name,
            n_dims,
            ne,
            ggml_type,
            offset,
            file_offset: 0,
            n_bytes,
        }
    }

    pub(crate) fn set_file_offset(&mut self, file_offset: u64) {
        self.file_offset = file_offset;
    }

    /// The tensor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The element type.
    pub fn ggml_type(&self) -> GgmlType {
        self.ggml_type
    }

    /// The shape as stored, in ggml order (`shape()[0]` varies fastest); its
    /// length is the stored dimension count (0 to 4).
    pub fn shape(&self) -> &[u64] {
        &self.ne[..self.n_dims]
    }

    /// The stored dimension count.
    pub fn n_dims(&self) -> usize {
        self.n_dims
    }

    /// The shape padded with 1s to ggml's four dimensions, as `ggml_new_tensor`
    /// takes it. Every entry fits `i64` (the reader checks).
    pub fn ne(&self) -> [i64; 4] {
        self.ne.map(|n| n as i64)
    }

    /// Number of elements.
    pub fn n_elements(&self) -> u64 {
        self.ne.iter().product()
    }

    /// Size of the data in bytes.
    pub fn n_bytes(&self) -> usize {
        self.n_bytes
    }

    /// Offset of the data relative to the start of the data section, as stored.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Absolute offset of the data in the file.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }
}
