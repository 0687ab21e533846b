//! The error type of the safe ggml layer.
//!
//! ggml reports most caller mistakes by aborting the process (`GGML_ASSERT`). This layer checks
//! those preconditions in Rust before calling into ggml and reports them as [`GgmlError`]s.

use std::fmt;

use super::dtype::{DtypeError, GgmlType};

/// Result alias for the ggml layer.
pub type Result<T, E = GgmlError> = std::result::Result<T, E>;

/// Outcome of a graph computation that did not succeed (`enum ggml_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComputeStatus {
    /// `GGML_STATUS_ALLOC_FAILED`: the backend could not allocate what it needed.
    AllocFailed,
    /// `GGML_STATUS_FAILED`: the backend reported a failure.
    Failed,
    /// `GGML_STATUS_ABORTED`: an abort callback stopped the computation.
    Aborted,
    /// A status value this crate does not know.
    Other(i32),
}

impl fmt::Display for ComputeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComputeStatus::AllocFailed => f.write_str("allocation failed"),
            ComputeStatus::Failed => f.write_str("failed"),
            ComputeStatus::Aborted => f.write_str("aborted"),
            ComputeStatus::Other(s) => write!(f, "unknown status {s}"),
        }
    }
}

/// Errors of the safe ggml layer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GgmlError {
    /// ggml (or the allocator behind it) could not allocate memory.
    #[error("allocation failed: {what}")]
    AllocationFailed {
        /// What was being allocated.
        what: String,
    },
    /// A context's memory pool cannot hold the tensor or graph object being created.
    #[error("ggml context is full: {needed} more bytes needed, {available} available")]
    ContextFull {
        /// Bytes the new objects need.
        needed: usize,
        /// Bytes left in the context's pool.
        available: usize,
    },
    /// Tensor shapes do not fit the operation.
    #[error("{op}: shape mismatch: {detail}")]
    ShapeMismatch {
        /// The operation.
        op: &'static str,
        /// What does not fit.
        detail: String,
    },
    /// A tensor has an element type the operation does not accept.
    #[error("{op}: unsupported type {ty}: {detail}")]
    TypeMismatch {
        /// The operation.
        op: &'static str,
        /// The offending type.
        ty: GgmlType,
        /// What was expected.
        detail: String,
    },
    /// A scalar argument is out of range (stride 0, negative padding, bad axis, ...).
    #[error("{op}: invalid argument: {detail}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A tensor's memory layout (strides) is not one the operation supports.
    #[error("{op}: unsupported layout: {detail}")]
    Layout {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The backend cannot run an operation in the graph.
    #[error("backend {backend} does not support {op} (tensor {tensor:?})")]
    UnsupportedOp {
        /// The backend's name.
        backend: String,
        /// ggml's name of the operation.
        op: String,
        /// The tensor's name.
        tensor: String,
    },
    /// A node uses a weight repacked for the CPU's SIMD kernels (in an extra buffer type such as
    /// `CPU_REPACK`) in a way that buffer type does not support: its kernel would read the
    /// repacked bytes as plain ones. Refused before computing (see
    /// [`WeightStore::load`](super::WeightStore::load)).
    #[error("node {node:?} cannot use the repacked weight {weight:?}: {detail}")]
    RepackedWeight {
        /// The node's name.
        node: String,
        /// The weight's name.
        weight: String,
        /// The node's operation, the weight's buffer type and why the use is refused.
        detail: String,
    },
    /// Graph computation returned a failure status.
    #[error("graph compute on {backend} {status}")]
    ComputeFailed {
        /// The backend's name.
        backend: String,
        /// The status ggml returned.
        status: ComputeStatus,
    },
    /// A read or write reaches past the end of a tensor or buffer.
    #[error("out of bounds: {detail}")]
    OutOfBounds {
        /// What was accessed.
        detail: String,
    },
    /// A write into a shared weight (a [`WeightStore`](super::WeightStore) tensor or a view of
    /// one): weights are immutable once loaded.
    #[error("tensor {tensor:?} is a shared weight and cannot be written")]
    ReadOnly {
        /// The tensor's name.
        tensor: String,
    },
    /// A tensor has no memory yet (allocate its context or graph first).
    #[error("tensor {tensor:?} is not allocated")]
    NotAllocated {
        /// The tensor's name.
        tensor: String,
    },
    /// A tensor already has memory and cannot be placed again.
    #[error("tensor {tensor:?} is already allocated")]
    AlreadyAllocated {
        /// The tensor's name.
        tensor: String,
    },
    /// A tensor lives in memory the backend cannot use, or belongs to another context.
    #[error("tensor {tensor:?}: {detail}")]
    IncompatibleTensor {
        /// The tensor's name.
        tensor: String,
        /// What is wrong.
        detail: String,
    },
    /// A graph has no room for more nodes or leafs.
    #[error("graph of size {capacity} is full ({needed} entries needed)")]
    GraphFull {
        /// The graph's node (and leaf) capacity.
        capacity: usize,
        /// Entries the expansion would need.
        needed: usize,
    },
    /// A graph allocator still has tensors alive from its previous allocation.
    #[error(
        "graph allocator is in use by a live context; drop it before allocating another graph"
    )]
    AllocatorInUse,
    /// A context operation that needs a metadata-only (`no_alloc`) context, or the reverse.
    #[error("{detail}")]
    WrongContextKind {
        /// What was expected.
        detail: String,
    },
    /// No backend or device of the requested kind is available.
    #[error("backend unavailable: {what}")]
    BackendUnavailable {
        /// What was requested.
        what: String,
    },
    /// A file whose mapping holds weights a graph uses has shrunk since it was mapped: computing
    /// would read lost pages and die of `SIGBUS` (see [`mapped_file`](super::mapped_file)).
    /// Refused before computing; the model must be loaded again from intact files.
    #[error("{file}: the model file changed after it was loaded: {detail}")]
    FileChanged {
        /// The file (`<unnamed mapping>` when the mapping was not given its path).
        file: String,
        /// Its size now and when mapped.
        detail: String,
    },
    /// A device spec names a device this build or machine cannot open
    /// ([`Backend::for_device`](super::Backend::for_device)).
    #[error(transparent)]
    Device(#[from] super::device::DeviceError),
    /// An error from the element-type helpers.
    #[error(transparent)]
    Dtype(#[from] DtypeError),
}

impl GgmlError {
    /// Whether ggml (or this layer for it) could not allocate memory: an allocation that
    /// failed, or a computation whose backend could not allocate its work memory.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(
            self,
            GgmlError::AllocationFailed { .. }
                | GgmlError::ComputeFailed {
                    status: ComputeStatus::AllocFailed,
                    ..
                }
        )
    }

    pub(crate) fn shape(op: &'static str, detail: impl Into<String>) -> Self {
        GgmlError::ShapeMismatch {
            op,
            detail: detail.into(),
        }
    }

    pub(crate) fn ty(op: &'static str, ty: GgmlType, detail: impl Into<String>) -> Self {
        GgmlError::TypeMismatch {
            op,
            ty,
            detail: detail.into(),
        }
    }

    /// A [`GgmlError::InvalidArgument`] of `op` (also for the layers built on this one).
    pub fn arg(op: &'static str, detail: impl Into<String>) -> Self {
        GgmlError::InvalidArgument {
            op,
            detail: detail.into(),
        }
    }

    pub(crate) fn layout(op: &'static str, detail: impl Into<String>) -> Self {
        GgmlError::Layout {
            op,
            detail: detail.into(),
        }
    }

    pub(crate) fn oob(detail: impl Into<String>) -> Self {
        GgmlError::OutOfBounds {
            detail: detail.into(),
        }
    }

    pub(crate) fn alloc(what: impl Into<String>) -> Self {
        GgmlError::AllocationFailed { what: what.into() }
    }
}
