//! Reading a vocabulary from GGUF metadata: the tokens, their types, the merges, the special
//! ids, and llama.cpp's load-time fix-ups of token attributes.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::ggml::gguf::{GgufFile, GgufMetadata};
use crate::lfm2_audio::model::gguf_keys as K;

use super::bpe::{ByteMap, Merges};
use super::names::{
    ALWAYS_RENDERED_NAMES, EOG_NAMES, EOM_NAMES, EOT_NAMES, FIM_MID_NAMES, FIM_PAD_NAMES,
    FIM_PRE_NAMES, FIM_REP_NAMES, FIM_SEP_NAMES, FIM_SUF_NAMES, GPT2_PRES, LLAMA3_PLAIN_PRES,
    LLAMA3_PRES,
};
use super::piece::piece;
use super::pretokenize::PreKind;
use super::token_type::{attr_of, ATTR_CONTROL, ATTR_NORMAL, ATTR_UNKNOWN, ATTR_USER_DEFINED};
use super::{Result, SpecialIds, TokenType, Tokenizer, TokenizerError};

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
}
