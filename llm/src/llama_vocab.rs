//! A libllama vocabulary loaded on its own (`vocab_only`): llama.cpp's own tokenizer, used as the
//! reference the Rust tokenizer (lfm2-audio-engine's `lfm2_audio::text::tokenizer`) is checked against.
//!
//! libllama throws C++ exceptions (which abort across FFI) for token ids out of range, so every
//! call checks ids first and returns [`LlamaVocabError`] instead.

use llama_sys as sys;
use std::ffi::CString;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Once;

/// Errors from a vocabulary-only libllama model.
#[derive(Debug, thiserror::Error)]
pub enum LlamaVocabError {
    /// libllama could not load the file's vocabulary (it logs the reason).
    #[error("failed to load the vocabulary of {path}: libllama rejected it (see the log)")]
    Load {
        /// The file.
        path: String,
    },
    /// A token id outside the vocabulary.
    #[error("token id {token} is out of range (the vocabulary has {n_vocab} tokens)")]
    TokenOutOfRange {
        /// The id.
        token: i32,
        /// The vocabulary size.
        n_vocab: usize,
    },
    /// The text is longer than libllama's `int32` length.
    #[error("text of {len} bytes is too long for llama_tokenize")]
    TextTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// `llama_tokenize` failed (e.g. the result would not fit an `int32` count).
    #[error("llama_tokenize failed with status {0}")]
    Tokenize(i32),
}

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, LlamaVocabError>;

static INIT: Once = Once::new();

fn init_backend() {
    INIT.call_once(|| {
        // SAFETY: llama_backend_init only initialises process-wide tables and may run more than
        // once (`crate::llama` calls it too); `Once` keeps this module to one call.
        unsafe { sys::llama_backend_init() };
        // SAFETY: the trampoline is a valid `extern "C"` function for the whole program, never
        // unwinds and ignores its user data, so null is fine.
        unsafe { sys::llama_log_set(Some(lfm2_ggml::log::trampoline), std::ptr::null_mut()) };
    });
}

/// A model loaded with `vocab_only`: no weights, just the tokenizer.
pub struct LlamaVocab {
    model: NonNull<sys::llama_model>,
    n_vocab: usize,
}

// SAFETY: a loaded model is immutable; libllama's tokenize/detokenize only read the vocabulary
// (its caches are built at load time), so sharing across threads is sound.
unsafe impl Send for LlamaVocab {}
// SAFETY: see `Send`: shared access is read-only.
unsafe impl Sync for LlamaVocab {}

impl Drop for LlamaVocab {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a successful load and is freed exactly once.
        unsafe { sys::llama_model_free(self.model.as_ptr()) };
    }
}

impl std::fmt::Debug for LlamaVocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaVocab")
            .field("n_vocab", &self.n_vocab)
            .finish()
    }
}

impl LlamaVocab {
    /// Loads only the vocabulary of a GGUF model file. libllama still reads the architecture's
    /// hyperparameter keys, so the file needs them (but no tensors).
    pub fn load(path: &Path) -> Result<LlamaVocab> {
        init_backend();
        let err = || LlamaVocabError::Load {
            path: path.display().to_string(),
        };
        let c_path = CString::new(path.to_string_lossy().as_bytes()).map_err(|_| err())?;
        // SAFETY: plain value constructor.
        let mut params = unsafe { sys::llama_model_default_params() };
        params.vocab_only = true;
        // SAFETY: `c_path` is a valid C string for the call; libllama copies what it keeps.
        let raw = unsafe { sys::llama_model_load_from_file(c_path.as_ptr(), params) };
        let model = NonNull::new(raw).ok_or_else(err)?;
        let mut v = LlamaVocab { model, n_vocab: 0 };
        // SAFETY: the vocab pointer belongs to the live model.
        let n = unsafe { sys::llama_vocab_n_tokens(v.vocab()) };
        v.n_vocab = n.max(0) as usize;
        Ok(v)
    }

    fn vocab(&self) -> *const sys::llama_vocab {
        // SAFETY: the model is alive; the vocabulary lives as long as the model.
        unsafe { sys::llama_model_get_vocab(self.model.as_ptr()) }
    }

    fn check(&self, token: i32) -> Result<()> {
        if token >= 0 && (token as usize) < self.n_vocab {
            Ok(())
        } else {
            Err(LlamaVocabError::TokenOutOfRange {
                token,
                n_vocab: self.n_vocab,
            })
        }
    }

    /// Number of tokens.
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// `llama_tokenize(text, add_special, parse_special)`.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<i32>> {
        let len = i32::try_from(text.len())
            .map_err(|_| LlamaVocabError::TextTooLong { len: text.len() })?;
        let mut out: Vec<i32> = vec![0; text.len() + 2];
        loop {
            let cap = i32::try_from(out.len())
                .map_err(|_| LlamaVocabError::TextTooLong { len: text.len() })?;
            // SAFETY: `text` is readable for `len` bytes (libllama does not need a NUL), and
            // `out` is writable for `cap` tokens; libllama writes at most `cap`.
            let n = unsafe {
                sys::llama_tokenize(
                    self.vocab(),
                    text.as_ptr().cast(),
                    len,
                    out.as_mut_ptr(),
                    cap,
                    add_special,
                    parse_special,
                )
            };
            if n >= 0 {
                out.truncate(n as usize);
                return Ok(out);
            }
            if n == i32::MIN {
                return Err(LlamaVocabError::Tokenize(n));
            }
            // A negative count is the size needed.
            let need = n.unsigned_abs() as usize;
            if need <= out.len() {
                return Err(LlamaVocabError::Tokenize(n));
            }
            out.resize(need, 0);
        }
    }

    /// `llama_token_to_piece(token, lstrip = 0, special)`: the token's bytes.
    pub fn token_to_piece(&self, token: i32, special: bool) -> Result<Vec<u8>> {
        self.check(token)?;
        let mut buf = vec![0u8; 64];
        loop {
            // SAFETY: `token` is in range (checked), `buf` is writable for its length, and
            // libllama writes at most that many bytes.
            let n = unsafe {
                sys::llama_token_to_piece(
                    self.vocab(),
                    token,
                    buf.as_mut_ptr().cast(),
                    buf.len() as i32,
                    0,
                    special,
                )
            };
            if n >= 0 {
                buf.truncate(n as usize);
                return Ok(buf);
            }
            let need = n.unsigned_abs() as usize;
            if need <= buf.len() {
                return Err(LlamaVocabError::Tokenize(n));
            }
            buf.resize(need, 0);
        }
    }

    /// The token's attribute bits (`llama_token_attr`).
    pub fn attr(&self, token: i32) -> Result<u32> {
        self.check(token)?;
        // SAFETY: the vocabulary is alive and `token` is in range.
        Ok(unsafe { sys::llama_vocab_get_attr(self.vocab(), token) })
    }

    /// Whether the token ends generation.
    pub fn is_eog(&self, token: i32) -> bool {
        // SAFETY: the vocabulary is alive; libllama looks the id up in a set (any id is fine).
        unsafe { sys::llama_vocab_is_eog(self.vocab(), token) }
    }

    /// The BOS token, if any.
    pub fn bos(&self) -> Option<i32> {
        // SAFETY: the vocabulary is alive.
        let t = unsafe { sys::llama_vocab_bos(self.vocab()) };
        (t >= 0).then_some(t)
    }

    /// The EOS token, if any.
    pub fn eos(&self) -> Option<i32> {
        // SAFETY: the vocabulary is alive.
        let t = unsafe { sys::llama_vocab_eos(self.vocab()) };
        (t >= 0).then_some(t)
    }

    /// Whether `tokenize(.., add_special = true, ..)` adds BOS.
    pub fn add_bos(&self) -> bool {
        // SAFETY: the vocabulary is alive.
        unsafe { sys::llama_vocab_get_add_bos(self.vocab()) }
    }
}
