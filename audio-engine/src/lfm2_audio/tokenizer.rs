//! Byte-level BPE tokenizer read from the backbone GGUF (work in progress).
