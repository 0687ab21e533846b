//! Hugging Face checkpoint to the four published GGUF files (work in progress).
pub mod mmproj;
