//! Names of tensors that more than one file of the model knows: the backbone binds them, the
//! weight loader keeps its row tables (read by `get_rows`) plain.
//!
//! why a file of their own: the loader ([`weights`](super::weights)) sits below the backbone,
//! so the names it asks about cannot live in the backbone's files.

/// Name of the token embedding (also the tied output head when `output.weight` is absent).
pub const TOKEN_EMBD: &str = "token_embd.weight";
/// Name of the final RMSNorm (llama.cpp's converter stores LFM2's final norm under this name).
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
pub const OUTPUT_NORM: &str = "token_embd_norm.weight";
/// Name of the optional untied output head.
pub const OUTPUT: &str = "output.weight";

/// The mmproj tensor holding the F32 embedding table of generated audio codes (the backbone's
/// `AudioCodeTable`).
pub const AUDIO_CODE_TABLE: &str = "a.position_embd.weight";
