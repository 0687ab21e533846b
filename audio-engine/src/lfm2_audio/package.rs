//! The four GGUF files of a model directory (work in progress).
