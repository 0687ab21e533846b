//! Deterministic tiny LFM2-Audio checkpoints in the Hugging Face layout (work in progress).
