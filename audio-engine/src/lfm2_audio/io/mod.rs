//! Input and output: WAV audio at any rate and channel count ([`audio`]), and the four-file
//! model package ([`package`]), also from the Hugging Face Hub (`hub`, feature `hub`).

pub mod audio;
#[cfg(feature = "hub")]
pub mod hub;
pub mod package;
