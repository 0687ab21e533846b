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

mod bpe;
mod pretokenize;
mod unicode;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::ggml::gguf::{GgufError, GgufFile, GgufMetadata};
use crate::lfm2_audio::model::gguf_keys as K;
use bpe::{ByteMap, Merges};
use pretokenize::PreKind;

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

/// A token's type as stored in `tokenizer.ggml.token_type` (llama.cpp's `llama_token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    /// 0, or any value outside 1..=6.
    Undefined,
    /// 1: an ordinary byte-level BPE token.
    Normal,
    /// 2: the unknown token.
    Unknown,
    /// 3: a control token (`<|im_end|>`, ...).
    Control,
    /// 4: a user-defined token, split out of text even when special tokens are not parsed.
    UserDefined,
    /// 5: an unused slot.
    Unused,
    /// 6: a byte token written `<0xXX>`.
    Byte,
}

impl TokenType {
    fn from_raw(v: i64) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

// llama.cpp's token attribute bits (`llama_token_attr`); a token may gain bits at load time.
const ATTR_UNKNOWN: u32 = 1 << 0;
const ATTR_UNUSED: u32 = 1 << 1;
const ATTR_NORMAL: u32 = 1 << 2;
const ATTR_CONTROL: u32 = 1 << 3;
const ATTR_USER_DEFINED: u32 = 1 << 4;
const ATTR_BYTE: u32 = 1 << 5;

fn attr_of(t: TokenType) -> u32 {
    match t {
        TokenType::Undefined => 0,
        TokenType::Normal => ATTR_NORMAL,
        TokenType::Unknown => ATTR_UNKNOWN,
        TokenType::Control => ATTR_CONTROL,
        TokenType::UserDefined => ATTR_USER_DEFINED,
        TokenType::Unused => ATTR_UNUSED,
        TokenType::Byte => ATTR_BYTE,
    }
}

// Token texts llama.cpp recognises by name at load time (from llama-vocab.cpp).
const EOT_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_NAMES: &[&str] = &["<|eom_id|>"];
const FIM_PRE_NAMES: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_NAMES: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_NAMES: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_NAMES: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_NAMES: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_NAMES: &[&str] = &["<|file_sep|>"];
const EOG_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
const ALWAYS_RENDERED_NAMES: &[&str] =
    &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// Pre-tokenizer names llama.cpp maps to the llama3 expression with whole-word look-up first
/// (`ignore_merges`) and BOS added by default.
const LLAMA3_PRES: &[&str] = &[
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
];
/// Pre-tokenizer names that use the llama3 expression with plain BPE.
const LLAMA3_PLAIN_PRES: &[&str] = &["dbrx", "smaug-bpe"];
/// Pre-tokenizer names that use GPT-2's expression alone.
const GPT2_PRES: &[&str] = &[
    "gpt-2",
    "phi-2",
    "jina-es",
    "jina-de",
    "gigachat",
    "jina-v2-es",
    "jina-v2-de",
    "a.x-4.0",
    "mellum",
    "modern-bert",
    "exaone4",
    "mpt",
    "olmo",
    "jais",
    "trillion",
    "granite-docling",
];

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

/// Metadata reads that name the file in their errors.
struct Keys<'a> {
    meta: &'a GgufMetadata,
    file: &'a str,
}

impl<'a> Keys<'a> {
    fn bad(&self, key: &str, reason: impl Into<String>) -> TokenizerError {
        TokenizerError::BadValue {
            file: self.file.to_owned(),
            key: key.to_owned(),
            reason: reason.into(),
        }
    }

    fn missing(&self, key: &str) -> TokenizerError {
        TokenizerError::MissingKey {
            file: self.file.to_owned(),
            key: key.to_owned(),
        }
    }

    fn opt<T: crate::ggml::gguf::FromGgufValue<'a>>(&self, key: &str) -> Result<Option<T>> {
        self.meta
            .get_opt::<T>(key)
            .map_err(|e| self.bad(key, e.kind().to_string()))
    }

    fn req<T: crate::ggml::gguf::FromGgufValue<'a>>(&self, key: &str) -> Result<T> {
        self.opt(key)?.ok_or_else(|| self.missing(key))
    }

    fn int_opt(&self, key: &str) -> Result<Option<i64>> {
        self.meta
            .get_integer_opt::<i64>(key)
            .map_err(|e| self.bad(key, e.kind().to_string()))
    }
}

impl Tokenizer {
    /// Reads the vocabulary of an open GGUF file (e.g. the backbone the loader already opened).
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer> {
        let name = file
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "<in-memory GGUF>".to_owned());
        Self::from_metadata(file.metadata(), &name)
    }

    /// Opens `path` and reads its vocabulary.
    pub fn open(path: impl AsRef<Path>) -> Result<Tokenizer> {
        Self::from_gguf(&GgufFile::open(path)?)
    }

    /// Reads the vocabulary from GGUF metadata; `file` names the source in errors.
    pub fn from_metadata(meta: &GgufMetadata, file: &str) -> Result<Tokenizer> {
        let k = Keys { meta, file };

        let model: &str = k.req(K::TOKENIZER_MODEL)?;
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel {
                file: file.to_owned(),
                found: model.to_owned(),
            });
        }
        let pre_name: &str = k.opt(K::TOKENIZER_PRE)?.unwrap_or("");
        let (pre, ignore_merges, mut add_bos) = if pre_name.is_empty() || pre_name == "default" {
            (PreKind::Default, false, false)
        } else if LLAMA3_PRES.contains(&pre_name) {
            (PreKind::Llama3, true, true)
        } else if LLAMA3_PLAIN_PRES.contains(&pre_name) {
            (PreKind::Llama3, false, false)
        } else if GPT2_PRES.contains(&pre_name) {
            (PreKind::Gpt2, false, false)
        } else {
            return Err(TokenizerError::UnknownPreTokenizer {
                file: file.to_owned(),
                found: pre_name.to_owned(),
            });
        };

        let key_tokens = K::TOKENIZER_TOKENS;
        let raw_tokens: &[String] = k.req(key_tokens)?;
        let n = raw_tokens.len();
        if n == 0 || n > u32::MAX as usize {
            return Err(k.bad(key_tokens, format!("{n} tokens")));
        }
        // llama.cpp renames empty tokens so that each text maps to one id.
        let tokens: Vec<String> = raw_tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if t.is_empty() {
                    format!("[EMPTY_{i}]")
                } else {
                    t.clone()
                }
            })
            .collect();
        let mut token_to_id = HashMap::with_capacity(n);
        for (i, t) in tokens.iter().enumerate() {
            if let Some(prev) = token_to_id.insert(t.clone(), i as u32) {
                return Err(k.bad(
                    key_tokens,
                    format!("token {i} repeats the text {t:?} of token {prev}"),
                ));
            }
        }

        let key_types = K::TOKENIZER_TOKEN_TYPE;
        let types: Vec<TokenType> = if meta.get(key_types).is_some() {
            let raw = meta
                .get_integer_array::<i64>(key_types)
                .map_err(|e| k.bad(key_types, e.kind().to_string()))?;
            if raw.len() < n {
                return Err(k.bad(key_types, format!("{} entries for {n} tokens", raw.len())));
            }
            raw[..n].iter().map(|&v| TokenType::from_raw(v)).collect()
        } else {
            vec![TokenType::Normal; n]
        };
        let mut attrs: Vec<u32> = types.iter().map(|&t| attr_of(t)).collect();

        let merges: &[String] = k.req(K::TOKENIZER_MERGES)?;
        let merges = Merges::new(merges);

        // Special ids: gpt2 vocabularies default BOS and EOS to 11 when that id exists; a key
        // pointing outside the vocabulary is ignored (llama.cpp warns and keeps the default).
        let default_11 = (n > 11).then_some(11);
        let mut ids = SpecialIds {
            bos: default_11,
            eos: default_11,
            ..SpecialIds::default()
        };
        let read_id = |key: &str, slot: &mut Option<u32>| -> Result<()> {
            if let Some(v) = k.int_opt(key)? {
                if (0..n as i64).contains(&v) {
                    *slot = Some(v as u32);
                }
            }
            Ok(())
        };
        read_id(K::TOKENIZER_BOS_ID, &mut ids.bos)?;
        read_id(K::TOKENIZER_EOS_ID, &mut ids.eos)?;
        read_id(K::TOKENIZER_EOT_ID, &mut ids.eot)?;
        read_id(K::TOKENIZER_EOM_ID, &mut ids.eom)?;
        read_id(K::TOKENIZER_UNK_ID, &mut ids.unk)?;
        read_id(K::TOKENIZER_SEP_ID, &mut ids.sep)?;
        read_id(K::TOKENIZER_PAD_ID, &mut ids.pad)?;
        read_id(K::TOKENIZER_MASK_ID, &mut ids.mask)?;
        read_id(K::TOKENIZER_FIM_PRE_ID, &mut ids.fim_pre)?;
        read_id(K::TOKENIZER_FIM_SUF_ID, &mut ids.fim_suf)?;
        read_id(K::TOKENIZER_FIM_MID_ID, &mut ids.fim_mid)?;
        read_id(K::TOKENIZER_FIM_PAD_ID, &mut ids.fim_pad)?;
        read_id(K::TOKENIZER_FIM_REP_ID, &mut ids.fim_rep)?;
        read_id(K::TOKENIZER_FIM_SEP_ID, &mut ids.fim_sep)?;
        // deprecated spellings, read after the new ones as llama.cpp does
        read_id(K::TOKENIZER_PREFIX_ID, &mut ids.fim_pre)?;
        read_id(K::TOKENIZER_SUFFIX_ID, &mut ids.fim_suf)?;
        read_id(K::TOKENIZER_MIDDLE_ID, &mut ids.fim_mid)?;

        let read_bool = |key: &str| -> Result<Option<bool>> { k.opt::<bool>(key) };
        if let Some(v) = read_bool(K::TOKENIZER_ADD_BOS)? {
            add_bos = v;
        }
        let add_eos = read_bool(K::TOKENIZER_ADD_EOS)?.unwrap_or(false);

        // Attribute fix-ups by token text, in llama.cpp's order.
        let by_name = |names: &[&str]| -> Vec<u32> {
            let mut v: Vec<u32> = names
                .iter()
                .filter_map(|nm| token_to_id.get(*nm).copied())
                .collect();
            v.sort_unstable();
            v
        };
        for (slot, names) in [
            (&mut ids.eot, EOT_NAMES),
            (&mut ids.eom, EOM_NAMES),
            (&mut ids.fim_pre, FIM_PRE_NAMES),
            (&mut ids.fim_suf, FIM_SUF_NAMES),
            (&mut ids.fim_mid, FIM_MID_NAMES),
            (&mut ids.fim_pad, FIM_PAD_NAMES),
            (&mut ids.fim_rep, FIM_REP_NAMES),
            (&mut ids.fim_sep, FIM_SEP_NAMES),
        ] {
            if slot.is_none() {
                if let Some(&id) = by_name(names).first() {
                    *slot = Some(id);
                    attrs[id as usize] |= ATTR_CONTROL;
                }
            }
        }
        let mut eog: HashSet<u32> = [ids.fim_pad, ids.fim_rep, ids.fim_sep]
            .into_iter()
            .flatten()
            .collect();
        for id in by_name(EOG_NAMES) {
            eog.insert(id);
            attrs[id as usize] |= ATTR_CONTROL;
        }
        for id in by_name(ALWAYS_RENDERED_NAMES) {
            attrs[id as usize] = ATTR_USER_DEFINED;
        }
        eog.extend([ids.eos, ids.eot, ids.eom].into_iter().flatten());
        let eog_has = |eog: &HashSet<u32>, name: &str| {
            token_to_id.get(name).copied().filter(|id| eog.contains(id))
        };
        // Harmony-style vocabularies: `<|end|>` ends a message, not the generation.
        if let Some(end) = eog_has(&eog, "<|end|>") {
            let call = eog_has(&eog, "<|call|>").is_some() || eog_has(&eog, "<|calls|>").is_some();
            let ret = eog_has(&eog, "<|return|>").is_some();
            let flush = eog_has(&eog, "<|flush|>").is_some();
            if call && (ret || flush) {
                eog.remove(&end);
                attrs[end as usize] = ATTR_USER_DEFINED;
            }
        }
        // Vocabularies where `</s>` is ordinary text.
        if let Some(s) = eog_has(&eog, "</s>") {
            if eog_has(&eog, "<|tool_response>").is_some()
                || eog_has(&eog, "<|plamo:eos|>").is_some()
            {
                eog.remove(&s);
                attrs[s as usize] = ATTR_NORMAL;
            }
        }

        let mut special_order: Vec<u32> = (0..n as u32)
            .filter(|&i| attrs[i as usize] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN) != 0)
            .collect();
        // Longest first so that a special token containing another wins; ties by id.
        special_order.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].len()));

        let map = ByteMap::get();
        let pieces = tokens
            .iter()
            .zip(&attrs)
            .enumerate()
            .map(|(i, (t, &a))| {
                piece(map, t, a).ok_or_else(|| {
                    k.bad(
                        key_tokens,
                        format!("byte token {i} ({t:?}) is not of the form <0xXX>"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;

        Ok(Tokenizer {
            tokens,
            types,
            attrs,
            token_to_id,
            merges,
            pre,
            pre_name: pre_name.to_owned(),
            ignore_merges,
            add_bos,
            add_eos,
            ids,
            eog,
            special_order,
            pieces,
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.tokens.len()
    }

    /// The `tokenizer.ggml.pre` value (empty when the file has none).
    pub fn pre_tokenizer(&self) -> &str {
        &self.pre_name
    }

    /// Tokenizes `text` alone, adding no BOS/EOS: llama.cpp's `llama_tokenize` with
    /// `add_special = false`. With `parse_special`, the text of control tokens (e.g.
    /// `<|im_end|>`) becomes that token; without, only user-defined tokens are split out and
    /// control-token text is tokenized as ordinary text.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_into(text, parse_special, &mut out);
        out
    }

    /// `llama_tokenize` in full: with `add_special`, BOS/EOS are added when the vocabulary asks
    /// for them (see [`add_bos`](Self::add_bos)).
    pub fn encode_with_special(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        if add_special && self.add_bos {
            out.push(
                self.ids
                    .bos
                    .ok_or(TokenizerError::MissingSpecialToken { what: "BOS" })?,
            );
        }
        self.encode_into(text, parse_special, &mut out);
        if add_special && self.add_eos {
            out.push(
                self.ids
                    .eos
                    .ok_or(TokenizerError::MissingSpecialToken { what: "EOS" })?,
            );
        }
        Ok(out)
    }

    fn encode_into(&self, text: &str, parse_special: bool, out: &mut Vec<u32>) {
        for frag in self.partition(text, parse_special) {
            match frag {
                Fragment::Token(id) => out.push(id),
                Fragment::Text(s, e) => {
                    let map = ByteMap::get();
                    for word in pretokenize::split(self.pre, &text[s..e]) {
                        self.encode_word(&map.encode(&word), out);
                    }
                }
            }
        }
    }

    /// Splits special-token text out of `text`, one special token at a time, longest first.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        let mut frags = Vec::new();
        if !text.is_empty() {
            frags.push(Fragment::Text(0, text.len()));
        }
        for &id in &self.special_order {
            if !parse_special && self.attrs[id as usize] & (ATTR_CONTROL | ATTR_UNKNOWN) != 0 {
                continue;
            }
            let needle = self.tokens[id as usize].as_str();
            let found = frags
                .iter()
                .any(|f| matches!(*f, Fragment::Text(s, e) if text[s..e].contains(needle)));
            if !found {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(s, e) = f else {
                    next.push(f);
                    continue;
                };
                let mut at = s;
                while let Some(m) = text[at..e].find(needle) {
                    if m > 0 {
                        next.push(Fragment::Text(at, at + m));
                    }
                    next.push(Fragment::Token(id));
                    at += m + needle.len();
                }
                if at < e {
                    next.push(Fragment::Text(at, e));
                }
            }
            frags = next;
        }
        frags
    }

    /// Appends the tokens of one byte-encoded word.
    fn encode_word(&self, word: &str, out: &mut Vec<u32>) {
        if self.ignore_merges {
            if let Some(&id) = self.token_to_id.get(word) {
                out.push(id);
                return;
            }
        }
        for (s, e) in self.merges.apply(word) {
            let sym = &word[s..e];
            match self.token_to_id.get(sym) {
                Some(&id) => out.push(id),
                // A merge result missing from the vocabulary: llama.cpp falls back to looking
                // up each raw byte of the encoded text as a one-byte token (only ASCII can hit).
                None => {
                    let mut buf = [0u8; 4];
                    for b in sym.bytes().filter(u8::is_ascii) {
                        let one = char::from(b).encode_utf8(&mut buf);
                        if let Some(&id) = self.token_to_id.get(&*one) {
                            out.push(id);
                        }
                    }
                }
            }
        }
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

    /// The bytes a token stands for: special tokens give their text, normal tokens their
    /// byte-decoded text, unused ones nothing (llama.cpp's `token_to_piece`, `special = true`).
    /// A piece may end inside a UTF-8 character; streaming callers accumulate bytes.
    pub fn token_bytes(&self, id: u32) -> Result<&[u8]> {
        Ok(&self.pieces[self.check(id)?])
    }

    /// The concatenated bytes of `ids`.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for &id in ids {
            out.extend_from_slice(self.token_bytes(id)?);
        }
        Ok(out)
    }

    /// The text of `ids`: their bytes as UTF-8, invalid sequences replaced by U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids)?).into_owned())
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

/// A piece of the text being tokenized: raw text (byte range) or an already-split special token.
#[derive(Clone, Copy, Debug)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

/// A token's decoded bytes; `None` for a byte token whose text is too short to hold `<0xXX>`
/// (llama.cpp fails to load such a vocabulary).
fn piece(map: &ByteMap, text: &str, attr: u32) -> Option<Box<[u8]>> {
    if attr & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED) != 0 {
        return Some(text.as_bytes().into());
    }
    if attr & ATTR_NORMAL != 0 {
        let mut out = Vec::with_capacity(text.len());
        for c in text.chars() {
            match map.byte_of(c) {
                Some(b) => out.push(b),
                None => {
                    // llama.cpp's marker for a character outside the byte map.
                    out.extend_from_slice(b"[UNK_BYTE_0x");
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.extend_from_slice(format!("{b:02x}").as_bytes());
                    }
                    out.extend_from_slice(text.as_bytes());
                    out.push(b']');
                }
            }
        }
        return Some(out.into());
    }
    if attr & ATTR_BYTE != 0 {
        let b = text.as_bytes();
        if b.len() < 3 {
            return None;
        }
        return Some(vec![strtol_hex(&b[3..b.len().min(5)])].into());
    }
    Some(Box::default())
}

/// C's `strtol(s, NULL, 16)` truncated to a byte, as llama.cpp reads `<0xXX>`.
fn strtol_hex(s: &[u8]) -> u8 {
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let neg = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    if s.get(i) == Some(&b'0')
        && matches!(s.get(i + 1), Some(b'x' | b'X'))
        && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
    }
    let mut v: i64 = 0;
    while let Some(d) = s.get(i).and_then(|&c| (c as char).to_digit(16)) {
        v = v * 16 + d as i64;
        i += 1;
    }
    (if neg { -v } else { v }) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtol_reads_like_c() {
        assert_eq!(strtol_hex(b"0A"), 0x0a);
        assert_eq!(strtol_hex(b"ff"), 0xff);
        assert_eq!(strtol_hex(b"G1"), 0);
        assert_eq!(strtol_hex(b"-1"), 0xff);
        assert_eq!(strtol_hex(b" 5"), 5);
        assert_eq!(strtol_hex(b""), 0);
    }
}
