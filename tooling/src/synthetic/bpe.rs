//! A small byte-level BPE tokenizer in the Hugging Face `tokenizer.json` layout of LFM2:
//! special tokens at LFM2's ids, then the 256 byte tokens (GPT-2 byte-to-unicode alphabet), then
//! merges learned deterministically from fixed text ([`PROMPT_TEXT`], [`TRAINING_TEXT`]). The pre-tokenizer mirrors LFM2's
//! (`Split` on the Llama-3 style regex, then `ByteLevel` without its own regex).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

/// LFM2's pre-tokenizer regex, as its `tokenizer.json` spells it.
pub const PRETOKENIZER_REGEX: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/// Number of special tokens: ids `0..N_SPECIAL` (the last named one is `<|text_end|>` = 130).
pub const N_SPECIAL: usize = 131;

/// First id of the 256 byte tokens (byte `b` has id `BYTE_BASE + b`).
pub const BYTE_BASE: usize = N_SPECIAL;

/// The prompt pieces the engine tokenizes; they count [`PROMPT_WEIGHT`] times in training, so
/// they become few tokens.
pub const PROMPT_TEXT: &str = "Perform ASR. Perform TTS. Use the US male voice. Use the UK female \
voice. Use the US female voice. Use the UK male voice. Respond with interleaved text and audio.\n\
system\nuser\nassistant\n";

/// How many times each word of [`PROMPT_TEXT`] counts.
pub const PROMPT_WEIGHT: u64 = 8;

/// Plain English the remaining merges are learned from.
pub const TRAINING_TEXT: &str = "The quick brown fox jumps over the lazy dog. The weather is nice today, and the sun is shining \
over the hills. She said that the meeting will start at nine in the morning, and that everyone \
should bring their notes. What time is it? It is ten past three in the afternoon. Can you tell \
me a story about a little robot that learned to sing? Once upon a time there was a small robot \
who lived in a quiet town. Every morning the robot listened to the birds and tried to sing \
along with them. At first the sounds were strange, but the robot kept practicing, and one day \
the whole town stopped to listen. Speech recognition turns spoken words into written text. \
Text to speech turns written text into spoken words. The model answers with interleaved text \
and audio, switching between the two while it speaks. Numbers like 123, 2024 and 3.14 are \
written with digits. Please repeat that again, slowly and clearly. Thank you very much, that \
was very helpful. I think the answer is yes, but let me check the notes first. We went to the \
market and bought apples, oranges, bread and cheese. The children were playing in the garden \
while their parents talked about the news. How are you doing today? I am doing well, thank \
you for asking. Hello there, how can I help you this evening? The train leaves the station at \
half past seven, so we should hurry. Remember to turn off the lights when you leave the room.";

/// The special tokens: `(id, content)`.
pub fn special_tokens() -> Vec<(usize, String)> {
    (0..N_SPECIAL)
        .map(|id| {
            let name = match id {
                0 => "<|pad|>".to_owned(),
                1 => "<|startoftext|>".to_owned(),
                2 => "<|endoftext|>".to_owned(),
                3 => "<|fim_pre|>".to_owned(),
                4 => "<|fim_mid|>".to_owned(),
                5 => "<|fim_suf|>".to_owned(),
                6 => "<|im_start|>".to_owned(),
                7 => "<|im_end|>".to_owned(),
                8 => "<|tool_list_start|>".to_owned(),
                9 => "<|tool_list_end|>".to_owned(),
                10 => "<|tool_call_start|>".to_owned(),
                11 => "<|tool_call_end|>".to_owned(),
                12 => "<|tool_response_start|>".to_owned(),
                13 => "<|tool_response_end|>".to_owned(),
                128 => "<|audio_start|>".to_owned(),
                129 => "<|text_start|>".to_owned(),
                130 => "<|text_end|>".to_owned(),
                other => format!("<|reserved_{other}|>"),
            };
            (id, name)
        })
        .collect()
}

/// GPT-2's byte-to-unicode map: printable Latin-1 bytes map to themselves, the others to
/// code points from U+0100 up, in byte order.
pub fn byte_to_unicode() -> [char; 256] {
    let printable = |b: u32| {
        (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
    };
    let mut out = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let cp = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        out[b as usize] = char::from_u32(cp).expect("valid code point");
    }
    out
}

/// Splits ASCII training text roughly as the LFM2 regex does (letters with one optional leading
/// non-letter, digit groups of up to 3, punctuation runs with an optional leading space,
/// newlines, spaces). Only the training corpus goes through it; any split gives valid merges.
fn pretokenize_ascii(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let is_letter = |c: u8| c.is_ascii_alphabetic();
    let is_digit = |c: u8| c.is_ascii_digit();
    let is_space = |c: u8| c == b' ' || c == b'\t' || c == b'\n' || c == b'\r';
    while i < b.len() {
        let start = i;
        let c = b[i];
        if is_letter(c)
            || (!is_digit(c) && c != b'\n' && c != b'\r' && i + 1 < b.len() && is_letter(b[i + 1]))
        {
            i += 1;
            while i < b.len() && is_letter(b[i]) {
                i += 1;
            }
        } else if is_digit(c) {
            while i < b.len() && is_digit(b[i]) && i - start < 3 {
                i += 1;
            }
        } else if c == b'\n' || c == b'\r' {
            while i < b.len() && (b[i] == b'\n' || b[i] == b'\r') {
                i += 1;
            }
        } else if is_space(c) && (i + 1 == b.len() || is_space(b[i + 1])) {
            // "\s+(?!\S)": a space run not followed by a word.
            while i < b.len() && b[i] == b' ' {
                i += 1;
            }
        } else {
            // " ?[^\s\p{L}\p{N}]+": an optional space, then punctuation.
            if c == b' ' {
                i += 1;
            }
            while i < b.len() && !is_space(b[i]) && !is_letter(b[i]) && !is_digit(b[i]) {
                i += 1;
            }
            if i == start {
                i += 1;
            }
            while i < b.len() && (b[i] == b'\n' || b[i] == b'\r') {
                i += 1;
            }
        }
        out.push(&text[start..i]);
    }
    out
}

/// The learned vocabulary: every token's string (byte-level alphabet) by id, and the merges in
/// rank order.
#[derive(Debug, Clone)]
pub struct BpeVocab {
    /// Token strings by id (specials as their content).
    pub tokens: Vec<String>,
    /// Merges in rank order, each a pair of token strings.
    pub merges: Vec<(String, String)>,
}

/// Learns merges from [`PROMPT_TEXT`] and [`TRAINING_TEXT`] until the vocabulary holds `vocab_size` tokens.
/// Deterministic: the most frequent adjacent pair wins, ties broken by the smaller
/// `(left, right)` string pair.
pub fn learn(vocab_size: usize) -> BpeVocab {
    assert!(
        vocab_size >= BYTE_BASE + 256,
        "vocab_size {vocab_size} cannot hold the specials and byte tokens"
    );
    let alphabet = byte_to_unicode();
    let mut tokens: Vec<String> = special_tokens().into_iter().map(|(_, s)| s).collect();
    tokens.extend(alphabet.iter().map(|c| c.to_string()));
    let mut known: BTreeSet<String> = tokens.iter().cloned().collect();

    // Word -> (symbols, count); BTreeMap keeps iteration order fixed.
    let mut words: BTreeMap<&str, (Vec<String>, u64)> = BTreeMap::new();
    let weighted = pretokenize_ascii(PROMPT_TEXT)
        .into_iter()
        .map(|w| (w, PROMPT_WEIGHT))
        .chain(pretokenize_ascii(TRAINING_TEXT).into_iter().map(|w| (w, 1)));
    for (w, n) in weighted {
        let e = words.entry(w).or_insert_with(|| {
            let syms = w
                .bytes()
                .map(|b| alphabet[b as usize].to_string())
                .collect();
            (syms, 0)
        });
        e.1 += n;
    }

    let mut merges = Vec::new();
    let mut grow = Grow::default();
    while tokens.len() < vocab_size {
        let mut counts: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for (syms, n) in words.values() {
            for p in syms.windows(2) {
                *counts.entry((p[0].as_str(), p[1].as_str())).or_insert(0) += n;
            }
        }
        // Max count; among equal counts the first in BTreeMap order (smallest pair) wins.
        let Some(((l, r), _)) =
            counts
                .iter()
                .fold(None::<(&(&str, &str), u64)>, |best, (k, &v)| match best {
                    Some((_, bv)) if bv >= v => best,
                    _ => Some((k, v)),
                })
        else {
            // The corpus is exhausted: pad with merges of byte tokens into new two-byte tokens.
            let a = alphabet[(tokens.len() * 7) % 26 + usize::from(b'a')].to_string();
            let b = alphabet[(tokens.len() / 26) % 26 + usize::from(b'a')].to_string();
            let m = format!("{a}{b}");
            if known.insert(m.clone()) {
                tokens.push(m);
                merges.push((a, b));
            } else {
                // why: only large vocabularies (a full-size synthetic model's 65536) exhaust the
                // two-letter tokens; the small ones never get here, so their bytes are unchanged.
                let (l, r) = grow.next(&alphabet, &mut known);
                tokens.push(format!("{l}{r}"));
                merges.push((l, r));
            }
            continue;
        };
        let (l, r) = (l.to_string(), r.to_string());
        let merged = format!("{l}{r}");
        for (syms, _) in words.values_mut() {
            let mut out = Vec::with_capacity(syms.len());
            let mut i = 0;
            while i < syms.len() {
                if i + 1 < syms.len() && syms[i] == l && syms[i + 1] == r {
                    out.push(merged.clone());
                    i += 2;
                } else {
                    out.push(std::mem::take(&mut syms[i]));
                    i += 1;
                }
            }
            *syms = out;
        }
        if known.insert(merged.clone()) {
            tokens.push(merged);
        }
        merges.push((l, r));
    }
    BpeVocab { tokens, merges }
}

/// Padding tokens past the two-letter ones: every known lowercase token of two or more letters,
/// in sorted order, extended by each letter `a..z` in turn (breadth first, so tokens stay short).
#[derive(Default)]
struct Grow {
    queue: std::collections::VecDeque<String>,
    letter: usize,
    started: bool,
}

impl Grow {
    /// The next merge `(base, letter)` whose result is not known yet; records the result.
    fn next(&mut self, alphabet: &[char; 256], known: &mut BTreeSet<String>) -> (String, String) {
        if !self.started {
            self.started = true;
            self.queue = known
                .iter()
                .filter(|t| t.len() >= 2 && t.bytes().all(|b| b.is_ascii_lowercase()))
                .cloned()
                .collect();
        }
        loop {
            let base = self.queue.front().expect("the queue only grows").clone();
            let letter = alphabet[usize::from(b'a') + self.letter].to_string();
            self.letter += 1;
            if self.letter == 26 {
                self.letter = 0;
                self.queue.pop_front();
            }
            let m = format!("{base}{letter}");
            if known.insert(m.clone()) {
                self.queue.push_back(m);
                return (base, letter);
            }
        }
    }
}

/// `tokenizer.json` for `vocab`.
pub fn tokenizer_json(vocab: &BpeVocab) -> Value {
    let added: Vec<Value> = special_tokens()
        .into_iter()
        .map(|(id, content)| {
            json!({
                "id": id, "content": content, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true
            })
        })
        .collect();
    let vocab_map: serde_json::Map<String, Value> = vocab
        .tokens
        .iter()
        .enumerate()
        .map(|(id, t)| (t.clone(), json!(id)))
        .collect();
    let merges: Vec<Value> = vocab
        .merges
        .iter()
        .map(|(l, r)| json!(format!("{l} {r}")))
        .collect();
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": PRETOKENIZER_REGEX},
                    "behavior": "Isolated",
                    "invert": false
                },
                {
                    "type": "ByteLevel",
                    "add_prefix_space": false,
                    "trim_offsets": true,
                    "use_regex": false
                }
            ]
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}}
            ],
            "pair": [
                {"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "<|startoftext|>", "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}}
            ],
            "special_tokens": {
                "<|startoftext|>": {"id": "<|startoftext|>", "ids": [1], "tokens": ["<|startoftext|>"]}
            }
        },
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": true,
            "trim_offsets": true,
            "use_regex": true
        },
        "model": {
            "type": "BPE",
            "dropout": null,
            "unk_token": null,
            "continuing_subword_prefix": null,
            "end_of_word_suffix": null,
            "fuse_unk": false,
            "byte_fallback": false,
            "ignore_merges": true,
            "vocab": vocab_map,
            "merges": merges
        }
    })
}

/// `tokenizer_config.json`: the class transformers builds and the named special tokens.
pub fn tokenizer_config_json() -> Value {
    let decoder: serde_json::Map<String, Value> = special_tokens()
        .into_iter()
        .map(|(id, content)| {
            (
                id.to_string(),
                json!({
                    "content": content, "lstrip": false, "normalized": false, "rstrip": false,
                    "single_word": false, "special": true
                }),
            )
        })
        .collect();
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": decoder,
        "bos_token": "<|startoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>",
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "legacy": false,
        "model_max_length": 1_000_000,
        "use_default_system_prompt": false
    })
}

/// `special_tokens_map.json`.
pub fn special_tokens_map_json() -> Value {
    json!({
        "bos_token": "<|startoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet_is_a_bijection() {
        let a = byte_to_unicode();
        let set: BTreeSet<char> = a.iter().copied().collect();
        assert_eq!(set.len(), 256);
        assert_eq!(a[b'A' as usize], 'A');
        assert_eq!(a[b' ' as usize], '\u{120}');
        assert_eq!(a[b'\n' as usize], '\u{10A}');
    }

    #[test]
    fn large_vocabularies_are_padded_with_unique_tokens() {
        let v = learn(65_536);
        let ids: BTreeSet<&str> = v.tokens.iter().map(String::as_str).collect();
        assert_eq!((v.tokens.len(), ids.len()), (65_536, 65_536));
        for (l, r) in &v.merges {
            assert!(ids.contains(l.as_str()) && ids.contains(r.as_str()));
            assert!(ids.contains(format!("{l}{r}").as_str()));
        }
        assert!(v.tokens.iter().all(|t| t.len() <= 24));
    }

    #[test]
    fn learned_vocab_is_consistent() {
        let v = learn(640);
        assert_eq!(v.tokens.len(), 640);
        let ids: BTreeMap<&str, usize> = v
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i))
            .collect();
        assert_eq!(ids.len(), 640, "token strings are unique");
        for (l, r) in &v.merges {
            assert!(ids.contains_key(l.as_str()) && ids.contains_key(r.as_str()));
            assert!(ids.contains_key(format!("{l}{r}").as_str()));
        }
        // The prompt words were learned whole.
        for w in [
            "Perform",
            "system",
            "user",
            "assistant",
            "\u{120}interleaved",
            "\u{120}ASR",
        ] {
            assert!(
                ids.contains_key(w),
                "{w} not learned: {:?}",
                &v.tokens[387..]
            );
        }
    }

    #[test]
    fn pretokenizer_splits_words_and_punctuation() {
        assert_eq!(
            pretokenize_ascii("Perform ASR. It is 2024!\nok"),
            ["Perform", " ASR", ".", " It", " is", " ", "202", "4", "!\n", "ok"]
        );
    }
}
