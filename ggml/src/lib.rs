//! Safe layer over `ggml-sys`: types, GGUF files, contexts, tensors, graphs and backends.
//!
//! The LFM2-Audio engine (`lfm2-audio-engine`, which re-exports this crate as
//! `audio_engine::ggml`) and libllama's text models (`lfm2-llm`) are built on it. All `unsafe`
//! code of the engine's ggml usage lives in this crate. ggml reports most caller mistakes by
//! aborting the process; the wrappers check those preconditions first and return [`GgmlError`]
//! instead.
#![warn(missing_docs)]

pub mod backend;
pub mod buffer;
mod buffer_type;
mod c_str;
pub mod context;
pub mod cpu;
pub mod device;
mod device_open;
pub mod dtype;
pub mod error;
pub mod gguf;
pub mod graph;
pub mod lazy_memory;
pub mod log;
mod mapped_buffers;
pub mod mapped_file;
pub mod ops;
pub mod quant;
mod read_only;
pub mod sched;
pub mod tensor;
pub mod thread_budget;
pub mod weights;

pub use backend::{
    devices, vnni_q4_0_amx_calls, vnni_q4_0_amx_min_columns, vnni_q4_0_built, vnni_q4_0_calls,
    vnni_q4_0_min_columns, Backend, DeviceInfo, DeviceKind,
};
pub use buffer::{AlignedBytes, BackendBuffer, GraphAllocator, HostMemory};
pub use context::Context;
pub use cpu::{cpu_features, cpu_variant};
pub use device::{Device, DeviceError, ParseDeviceError};
pub use dtype::GgmlType;
pub use error::{ComputeStatus, GgmlError, Result};
pub use graph::Graph;
pub use log::{set_log_callback, set_log_level, LogLevel};
pub use mapped_file::MappedFile;
pub use ops::{GluOp, Precision, RopeMode, RopeParams, UnaryOp};
pub use sched::{
    fallbacks, reset_fallbacks, ComponentFallback, FallbackReport, NodePlacement, Scheduler,
};
pub use tensor::Tensor;
pub use thread_budget::{StreamGuard, ThreadBudget, ThreadBudgetStats};
pub use weights::{LoadOptions, Param, Placement, TensorSpec, WeightStore};
