//! Tooling behind cargo features, kept out of the default library: the checkpoint converter and
//! safetensors reader (`convert`), the synthetic checkpoint writer, the built-in demo package
//! and the bench's batched-step anchor (`testkit`).

#[cfg(feature = "convert")]
pub mod convert;
#[cfg(feature = "testkit")]
pub mod demo;
#[cfg(feature = "convert")]
pub mod safetensors;
#[cfg(feature = "testkit")]
pub mod step_anchor;
#[cfg(feature = "testkit")]
pub mod synthetic;
