//! Text to token ids: special tokens split out of the text (longest first), the rest cut into
//! words by the pre-tokenizer, each word byte-encoded and merged by rank.

use super::bpe::ByteMap;
use super::pretokenize;
use super::token_type::{ATTR_CONTROL, ATTR_UNKNOWN};
use super::{Result, Tokenizer, TokenizerError};

impl Tokenizer {
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
}

/// A piece of the text being tokenized: raw text (byte range) or an already-split special token.
#[derive(Clone, Copy, Debug)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}
