//! The backbone's BPE vocabulary from the Hugging Face tokenizer files, as `convert_hf_to_gguf.py`
//! writes it (`_set_vocab_gpt2`: `get_vocab_base` for tokens and types, gguf-py's `SpecialVocab`
//! for merges, special ids, `add_*_token` and the chat template).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{read_json, ConvertError, Result};
use audio_engine::ggml::gguf::{GgufArray, GgufMetadata, GgufValue};
use audio_engine::lfm2_audio::internals::gguf_keys as K;

/// llama.cpp's token types (`llama_token_type`).
pub mod token_type {
    /// An ordinary BPE token.
    pub const NORMAL: i32 = 1;
    /// A control token (`<|im_start|>` and other special added tokens).
    pub const CONTROL: i32 = 3;
    /// A non-special added token.
    pub const USER_DEFINED: i32 = 4;
    /// A hole in the id range, written as `[PAD<id>]`.
    pub const UNUSED: i32 = 5;
}

/// The special token kinds gguf-py's `SpecialVocab` looks for, in its order, with their GGUF keys.
pub const SPECIAL_KINDS: [(&str, &str); 7] = [
    ("bos", K::TOKENIZER_BOS_ID),
    ("eos", K::TOKENIZER_EOS_ID),
    ("unk", K::TOKENIZER_UNK_ID),
    ("sep", K::TOKENIZER_SEP_ID),
    ("pad", K::TOKENIZER_PAD_ID),
    ("cls", K::TOKENIZER_CLS_ID),
    ("mask", K::TOKENIZER_MASK_ID),
];

/// The vocabulary keys of a backbone GGUF.
#[derive(Debug, Clone, PartialEq)]
pub struct BpeVocab {
    /// `tokenizer.ggml.tokens`: one entry per id below the vocabulary size.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type`.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`, `"left right"`.
    pub merges: Vec<String>,
    /// Special token ids by kind (`bos`, `eos`, ...), in the order they were found.
    pub special_ids: Vec<(String, u32)>,
    /// `add_<kind>_token` flags, in the order they were found.
    pub add_special: Vec<(String, bool)>,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

fn bad(file: &Path, reason: impl Into<String>) -> ConvertError {
    ConvertError::BadConfig {
        file: file.to_path_buf(),
        reason: reason.into(),
    }
}

/// Whether a token's text marks it special although the tokenizer does not (`<|...|>` and the
/// few spellings `does_token_look_special` lists).
fn looks_special(t: &str) -> bool {
    matches!(t, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (t.starts_with("<|") && t.ends_with("|>"))
        || (t.starts_with("<\u{ff5c}") && t.ends_with("\u{ff5c}>"))
        || (t.starts_with("<unused") && t.ends_with('>'))
}

/// The content of a `tokenizer_config.json` token entry (a string or `{"content": ...}`).
fn entry_content(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content")?.as_str().map(str::to_owned),
        _ => None,
    }
}

struct Added {
    id: u32,
    content: String,
    special: bool,
}

impl BpeVocab {
    /// Reads `tokenizer.json`, `tokenizer_config.json` (optional), `chat_template.jinja` /
    /// `chat_template.json` (optional) and `config.json` (special ids) from `dir`.
    /// `vocab_size` is the model's (`config.json` `vocab_size`); ids without a token become
    /// `[PAD<id>]`.
    pub fn from_dir(dir: &Path, vocab_size: Option<u32>) -> Result<BpeVocab> {
        let tok_file = dir.join("tokenizer.json");
        let tok = read_json(&tok_file)?;
        let model = tok
            .get("model")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(&tok_file, "no 'model' object"))?;
        if model.get("type").and_then(Value::as_str) != Some("BPE") {
            return Err(bad(&tok_file, "model.type is not BPE"));
        }
        let vocab = model
            .get("vocab")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(&tok_file, "no model.vocab object"))?;
        let mut by_id: HashMap<u32, String> = HashMap::new();
        for (text, id) in vocab {
            let id = id
                .as_u64()
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| bad(&tok_file, format!("model.vocab['{text}'] is not an id")))?;
            by_id.insert(id, text.clone());
        }
        let mut added = Vec::new();
        for a in tok
            .get("added_tokens")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let (Some(id), Some(content)) = (
                a.get("id")
                    .and_then(Value::as_u64)
                    .and_then(|i| u32::try_from(i).ok()),
                a.get("content").and_then(Value::as_str),
            ) else {
                return Err(bad(&tok_file, "an added_tokens entry lacks id or content"));
            };
            by_id.insert(id, content.to_owned());
            added.push(Added {
                id,
                content: content.to_owned(),
                special: a.get("special").and_then(Value::as_bool).unwrap_or(false),
            });
        }
        let max_id = by_id.keys().max().copied();
        let n = match (vocab_size, max_id) {
            (Some(n), Some(m)) if m >= n => {
                return Err(bad(
                    &tok_file,
                    format!("token id {m} is not below the model's vocab_size {n}"),
                ))
            }
            (Some(n), _) => n,
            (None, m) => m.map_or(0, |m| m + 1),
        };
        let added_by_id: HashMap<u32, &Added> = added.iter().map(|a| (a.id, a)).collect();
        let mut tokens = Vec::with_capacity(n as usize);
        let mut token_types = Vec::with_capacity(n as usize);
        for i in 0..n {
            match by_id.get(&i) {
                None => {
                    tokens.push(format!("[PAD{i}]"));
                    token_types.push(token_type::UNUSED);
                }
                Some(text) => match added_by_id.get(&i) {
                    Some(a) if a.special || looks_special(text) => {
                        tokens.push(text.clone());
                        token_types.push(token_type::CONTROL);
                    }
                    Some(_) => {
                        // why: llama.cpp expects user-defined tokens pre-normalized.
                        tokens.push(text.replace('\u{2581}', " "));
                        token_types.push(token_type::USER_DEFINED);
                    }
                    None => {
                        tokens.push(text.clone());
                        token_types.push(token_type::NORMAL);
                    }
                },
            }
        }
        let merges = parse_merges(&tok_file, model.get("merges"))?;

        let cfg_file = dir.join("tokenizer_config.json");
        let tok_cfg = if cfg_file.is_file() {
            Some(read_json(&cfg_file)?)
        } else {
            None
        };
        let mut v = BpeVocab {
            tokens,
            token_types,
            merges,
            special_ids: Vec::new(),
            add_special: Vec::new(),
            chat_template: None,
        };
        v.read_special(dir, &tok, tok_cfg.as_ref(), &added)?;
        Ok(v)
    }

    fn set_add(&mut self, kind: &str, value: bool) {
        match self.add_special.iter_mut().find(|(k, _)| k == kind) {
            Some(e) => e.1 = value,
            None => self.add_special.push((kind.to_owned(), value)),
        }
    }

    fn set_special(&mut self, kind: &str, id: Option<u64>) {
        // why: SpecialVocab keeps the first id found for a kind.
        let Some(id) = id.and_then(|i| u32::try_from(i).ok()) else {
            return;
        };
        if !self.special_ids.iter().any(|(k, _)| k == kind) {
            self.special_ids.push((kind.to_owned(), id));
        }
    }

    /// SpecialVocab: post-processor hints, then `tokenizer_config.json`, then `config.json` ids.
    fn read_special(
        &mut self,
        dir: &Path,
        tok: &Value,
        tok_cfg: Option<&Value>,
        added: &[Added],
    ) -> Result<()> {
        let cfg_str = |k: &str| tok_cfg.and_then(|c| entry_content(c.get(k)));
        let bos = cfg_str("bos_token").or_else(|| cfg_str("cls_token"));
        let eos = cfg_str("eos_token").or_else(|| cfg_str("sep_token"));
        let cls = cfg_str("cls_token");
        let sep = cfg_str("sep_token");
        // why: gguf-py names the EOS token as the separator when the pair template separates
        // with it and `tokenizer_config.json` names none.
        let mut sep_is_eos = false;
        if let Some(pp) = tok.get("post_processor").filter(|p| p.is_object()) {
            let procs: Vec<&Value> = match pp.get("processors").and_then(Value::as_array) {
                Some(a) => a.iter().collect(),
                None => vec![pp],
            };
            for p in procs {
                match p.get("type").and_then(Value::as_str) {
                    Some("RobertaProcessing") => {
                        for k in ["bos", "eos", "sep"] {
                            self.set_add(k, true);
                        }
                    }
                    Some("TemplateProcessing") => {
                        let single = p.get("single").and_then(Value::as_array);
                        let special_id = |v: &Value| {
                            v.get("SpecialToken")
                                .and_then(|s| s.get("id"))
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        };
                        let (mut first, mut last) = (None, None);
                        if let Some(single) = single.filter(|s| s.len() > 1) {
                            first = single.first().and_then(special_id);
                            if let Some(first) = &first {
                                let is_bos =
                                    Some(first) == bos.as_ref() || Some(first) == cls.as_ref();
                                self.set_add("bos", is_bos || tok_cfg.is_none());
                            }
                            last = single.last().and_then(special_id);
                            if let Some(last) = &last {
                                self.set_add(
                                    "eos",
                                    Some(last) == eos.as_ref() || tok_cfg.is_none(),
                                );
                            }
                        }
                        let pair = p.get("pair").and_then(Value::as_array);
                        if let Some(add_sep) =
                            pair_separator(pair, &first, &last, &[&sep, &eos], &special_id)
                        {
                            self.set_add("sep", add_sep);
                            sep_is_eos = add_sep && sep.is_none() && tok_cfg.is_some();
                        }
                    }
                    _ => {}
                }
            }
        }
        let Some(cfg) = tok_cfg else {
            return Ok(());
        };
        self.chat_template = match cfg.get("chat_template") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => read_template_file(dir)?,
        };
        for (kind, _) in SPECIAL_KINDS {
            // why: where the post-processor already decided, gguf-py keeps its answer over
            // `add_<kind>_token` (it warns about the mismatch and "opts for the latter").
            if let Some(Value::Bool(b)) = cfg.get(format!("add_{kind}_token")) {
                if !self.add_special.iter().any(|(k, _)| k == kind) {
                    self.set_add(kind, *b);
                }
            }
            let content = match entry_content(cfg.get(format!("{kind}_token"))) {
                None if kind == "sep" && sep_is_eos => eos.clone(),
                c => c,
            };
            let Some(content) = content else {
                continue;
            };
            let id = added
                .iter()
                .find(|a| a.content == content)
                .map(|a| u64::from(a.id));
            self.set_special(kind, id);
        }
        let config_file = dir.join("config.json");
        if config_file.is_file() {
            let config = read_json(&config_file)?;
            for (kind, _) in SPECIAL_KINDS {
                let id = config
                    .get(format!("{kind}_token_id"))
                    .and_then(Value::as_u64);
                self.set_special(kind, id);
            }
        }
        Ok(())
    }

    /// Appends the keys `_set_vocab_gpt2` writes, in its order (`tokenizer.ggml.pre` is `pre`).
    pub fn write_keys(
        &self,
        md: &mut GgufMetadata,
        pre: &str,
    ) -> audio_engine::ggml::gguf::Result<()> {
        md.insert(K::TOKENIZER_MODEL, "gpt2")?;
        md.insert(K::TOKENIZER_PRE, pre)?;
        md.insert(
            K::TOKENIZER_TOKENS,
            GgufValue::Array(GgufArray::String(self.tokens.clone())),
        )?;
        md.insert(K::TOKENIZER_TOKEN_TYPE, self.token_types.clone())?;
        if !self.merges.is_empty() {
            md.insert(
                K::TOKENIZER_MERGES,
                GgufValue::Array(GgufArray::String(self.merges.clone())),
            )?;
        }
        let keys: BTreeMap<&str, &str> = SPECIAL_KINDS.into_iter().collect();
        for (kind, id) in &self.special_ids {
            if let Some(key) = keys.get(kind.as_str()) {
                md.set(*key, *id)?;
            }
        }
        for (kind, value) in &self.add_special {
            // gguf-py has handlers for bos, eos and sep only; others are skipped with a warning.
            let key = match kind.as_str() {
                "bos" => K::TOKENIZER_ADD_BOS,
                "eos" => K::TOKENIZER_ADD_EOS,
                "sep" => K::TOKENIZER_ADD_SEP,
                _ => continue,
            };
            md.set(key, *value)?;
        }
        if let Some(t) = &self.chat_template {
            md.set(K::TOKENIZER_CHAT_TEMPLATE, t.as_str())?;
        }
        Ok(())
    }
}

/// Whether a `TemplateProcessing` pair template `A <sep> B` (or `A <sep> <sep> B`) puts a
/// separator between its sequences, the way gguf-py's `SpecialVocab` reads it: the single
/// template's leading/trailing special tokens (`first`, `last`) are stripped from the pair's ends
/// first, and a separator counts when it is one of `seps` (and, for a lone one, when the single
/// template has no trailing token). `None` when the template has no such middle part.
fn pair_separator(
    pair: Option<&Vec<Value>>,
    first: &Option<String>,
    last: &Option<String>,
    seps: &[&Option<String>],
    special_id: &dyn Fn(&Value) -> Option<String>,
) -> Option<bool> {
    let mut pair: &[Value] = pair?;
    if first.is_some() && pair.first().and_then(special_id) == *first {
        pair = &pair[1..];
    }
    if last.is_some() && pair.last().and_then(special_id) == *last {
        pair = &pair[..pair.len() - 1];
    }
    let sequence = |v: &Value| {
        v.get("Sequence")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if pair.len() < 3
        || sequence(&pair[0]).as_deref() != Some("A")
        || sequence(&pair[pair.len() - 1]).as_deref() != Some("B")
    {
        return None;
    }
    let middle = &pair[1..pair.len() - 1];
    let is_sep =
        |v: &Value| special_id(v).is_some_and(|t| seps.iter().any(|s| s.as_ref() == Some(&t)));
    let mut add_sep = is_sep(&middle[0]) && last.is_none();
    if middle.len() == 2 && is_sep(&middle[1]) {
        add_sep = true;
    }
    Some(add_sep)
}

fn read_template_file(dir: &Path) -> Result<Option<String>> {
    let jinja: PathBuf = dir.join("chat_template.jinja");
    if jinja.is_file() {
        return std::fs::read_to_string(&jinja)
            .map(Some)
            .map_err(|source| ConvertError::Io {
                file: jinja,
                source,
            });
    }
    let json = dir.join("chat_template.json");
    if json.is_file() {
        return Ok(read_json(&json)?
            .get("chat_template")
            .and_then(Value::as_str)
            .map(str::to_owned));
    }
    Ok(None)
}

/// `model.merges`: `"a b"` strings, or `["a", "b"]` pairs (transformers >= 4.45) joined with a
/// space, a space inside a part written as U+0120 as gguf-py does.
fn parse_merges(file: &Path, merges: Option<&Value>) -> Result<Vec<String>> {
    let Some(list) = merges.and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|m| match m {
            Value::String(s) => Ok(s.clone()),
            Value::Array(pair) if pair.len() == 2 => {
                let part = |v: &Value| {
                    v.as_str()
                        .map(|s| s.replace(' ', "\u{120}"))
                        .ok_or_else(|| bad(file, "a merge pair holds a non-string"))
                };
                Ok(format!("{} {}", part(&pair[0])?, part(&pair[1])?))
            }
            _ => Err(bad(file, "unknown model.merges format")),
        })
        .collect()
}
