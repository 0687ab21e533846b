//! The tokenizer's errors: a vocabulary that cannot be read, or an id it does not have.

use crate::ggml::gguf::GgufError;

/// Errors from reading a vocabulary or from using ids it does not have.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// The GGUF file could not be read.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// A required metadata key is absent.
    #[error("{file}: missing metadata key '{key}'")]
    MissingKey {
        /// The file.
        file: String,
        /// The key.
        key: String,
    },
    /// A metadata key has the wrong type or an unusable value.
    #[error("{file}: metadata key '{key}': {reason}")]
    BadValue {
        /// The file.
        file: String,
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `tokenizer.ggml.model` is not `gpt2` (byte-level BPE).
    #[error(
        "{file}: tokenizer.ggml.model is '{found}'; only 'gpt2' (byte-level BPE) is supported"
    )]
    UnsupportedModel {
        /// The file.
        file: String,
        /// The model it declares.
        found: String,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error("{file}: tokenizer.ggml.pre '{found}' is not a supported pre-tokenizer")]
    UnknownPreTokenizer {
        /// The file.
        file: String,
        /// The pre-tokenizer it declares.
        found: String,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is out of range (the vocabulary has {n_vocab} tokens)")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary size.
        n_vocab: usize,
    },
    /// Adding special tokens needs a token the vocabulary does not define.
    #[error("the vocabulary asks to add a {what} token but defines none")]
    MissingSpecialToken {
        /// `"BOS"` or `"EOS"`.
        what: &'static str,
    },
}

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, TokenizerError>;
