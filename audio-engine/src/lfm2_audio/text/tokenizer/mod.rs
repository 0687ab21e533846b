//! The backbone's text tokenizer: byte-level BPE read from the GGUF's `tokenizer.ggml.*` keys.
//!
//! It reproduces llama.cpp's `llama_tokenize` / `llama_token_to_piece` for `gpt2`-model
//! vocabularies (the published LFM2 backbone uses pre-tokenizer `lfm2`), without loading
//! libllama: special tokens are split out of the text first (longest text first), each remaining
//! fragment is cut into words by the pre-tokenizer, each word is byte-encoded (GPT-2's map) and
//! merged by rank. The load-time fix-ups llama.cpp applies to token attributes (end-of-generation
//! tokens by name, ...) are applied too, because they decide which tokens split out of text.
//!
//! Not reproduced: the `lstrip`/`rstrip` attributes llama.cpp sets only for a few model names
//! (phi-3, jina, modern-bert); and where llama.cpp picks one of several fill-in-the-middle tokens
//! of the same role by hash-map order, this picks the lowest id.
//!
//! This file holds the [`Tokenizer`] and its look-ups (ids, types, special tokens); `load` reads
//! it from GGUF metadata, `encode` turns text into ids, `decode` ids into bytes and text.

mod bpe;
mod decode;
mod encode;
mod error;
mod load;
mod names;
mod piece;
mod pretokenize;
mod token_type;
mod unicode;

use std::collections::{HashMap, HashSet};

use bpe::Merges;
use pretokenize::PreKind;
use token_type::ATTR_CONTROL;

pub use error::{Result, TokenizerError};
pub use token_type::TokenType;

/// Which special ids a vocabulary names (llama.cpp's `special_*_id`).
#[derive(Clone, Copy, Debug, Default)]
struct SpecialIds {
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    eom: Option<u32>,
    unk: Option<u32>,
    sep: Option<u32>,
    pad: Option<u32>,
    mask: Option<u32>,
    fim_pre: Option<u32>,
    fim_suf: Option<u32>,
    fim_mid: Option<u32>,
    fim_pad: Option<u32>,
    fim_rep: Option<u32>,
    fim_sep: Option<u32>,
}

/// A byte-level BPE vocabulary with llama.cpp's tokenization rules.
pub struct Tokenizer {
    tokens: Vec<String>,
    types: Vec<TokenType>,
    attrs: Vec<u32>,
    token_to_id: HashMap<String, u32>,
    merges: Merges,
    pre: PreKind,
    pre_name: String,
    ignore_merges: bool,
    add_bos: bool,
    add_eos: bool,
    ids: SpecialIds,
    eog: HashSet<u32>,
    /// Special-token candidates for splitting, longest text first.
    special_order: Vec<u32>,
    /// Each token's decoded bytes (llama.cpp's `token_to_piece` with `special = true`).
    pieces: Vec<Box<[u8]>>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("n_vocab", &self.tokens.len())
            .field("n_merges", &self.merges.len())
            .field("pre", &self.pre_name)
            .field("bos", &self.ids.bos)
            .field("eos", &self.ids.eos)
            .finish()
    }
}
impl Tokenizer {
    /// Number of tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.tokens.len()
    }

    /// The `tokenizer.ggml.pre` value (empty when the file has none).
    pub fn pre_tokenizer(&self) -> &str {
        &self.pre_name
    }

    fn check(&self, id: u32) -> Result<usize> {
        let i = id as usize;
        if i < self.tokens.len() {
            Ok(i)
        } else {
            Err(TokenizerError::TokenOutOfRange {
                id,
                n_vocab: self.tokens.len(),
            })
        }
    }

    /// The id of the token whose stored text is exactly `text` (e.g. `"<|im_end|>"`).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.token_to_id.get(text).copied()
    }

    /// A token's stored text (byte-level encoded for normal tokens, e.g. `Ġthe`).
    pub fn token_text(&self, id: u32) -> Result<&str> {
        Ok(&self.tokens[self.check(id)?])
    }

    /// A token's type as stored in the file.
    pub fn token_type(&self, id: u32) -> Result<TokenType> {
        Ok(self.types[self.check(id)?])
    }

    /// Whether `id` is a control token (after llama.cpp's load-time fix-ups).
    pub fn is_control(&self, id: u32) -> bool {
        self.attrs
            .get(id as usize)
            .is_some_and(|a| a & ATTR_CONTROL != 0)
    }

    /// Whether generating `id` ends generation (llama.cpp's `llama_vocab_is_eog`).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// The beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.ids.bos
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.ids.eos
    }

    /// The end-of-turn token.
    pub fn eot(&self) -> Option<u32> {
        self.ids.eot
    }

    /// The padding token.
    pub fn pad(&self) -> Option<u32> {
        self.ids.pad
    }

    /// The unknown token.
    pub fn unk(&self) -> Option<u32> {
        self.ids.unk
    }

    /// Whether [`encode_with_special`](Self::encode_with_special) adds BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether [`encode_with_special`](Self::encode_with_special) adds EOS.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }
}
