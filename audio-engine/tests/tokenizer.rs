//! The Rust byte-level BPE tokenizer against llama.cpp's own (a vocabulary-only libllama model
//! of the same GGUF): identical ids on many strings, identical pieces for every token, decode
//! round trips, and typed errors for bad vocabularies and ids.
//!
//! The vocabulary is synthetic but real: LFM2's special tokens at their ids, the 256 byte
//! tokens, and a few hundred merges learned here from English and non-ASCII text.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use audio_engine::ggml::gguf::{GgufMetadata, GgufValue, GgufWriter};
use audio_engine::lfm2_audio::internals::tokenizer::{TokenType, Tokenizer, TokenizerError};
use lfm2_llm::llama_vocab::{LlamaVocab, LlamaVocabError};
use lfm2_llm::RandomModel;

// ---------------------------------------------------------------------------
// the synthetic vocabulary
// ---------------------------------------------------------------------------

const CHAT_PROMPT: &str =
    "<|startoftext|><|im_start|>system\nPerform ASR.<|im_end|>\n<|im_start|>user\n";

/// GPT-2's byte -> character map, written independently of the crate's.
fn byte_char(b: u8) -> char {
    let printable = |x: u32| (0x21..=0x7e).contains(&x) || (0xa1..=0xac).contains(&x) || x >= 0xae;
    if printable(b as u32) {
        return char::from(b);
    }
    let rank = (0..b as u32).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(0x100 + rank).unwrap()
}

fn byte_encode(s: &str) -> String {
    s.bytes().map(byte_char).collect()
}

const CORPUS: &str = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs \
away into the forest. Perform ASR on this audio and transcribe what the speaker says. \
Respond with interleaved text and audio. Perform TTS with the US female voice. \
I'm sure they're here, we've seen them, and it's true that he'll come and she'd agree. \
Numbers like 123, 2024 and 3.14159 appear in text; so do 1000000 and 42. \
Hello world! Hello there, how are you today? I am fine, thank you very much. \
The weather is nice and the sun is shining over the hills and the river. \
Café, naïve, émigré, façade, Ångström, über, straße, niño, jalapeño, crème brûlée. \
日本語のテキストです。中文文本也在这里。한국어 문장도 있습니다. \
Emoji: 😀😀 🎉 👍🏽 ❤️ and more emoji 😀. \
Ελληνικά κείμενα και русский текст тоже здесь. \
    indented code:\n\tfn main() {\n\t\tprintln!(\"hello\");\n\t}\n\n\
The end of the text is near; the end is here.";

/// A tiny deterministic BPE trainer: words split before spaces and at letter/digit/other
/// boundaries, then the most frequent adjacent pair (ties: smallest strings) merged `n` times.
fn learn_merges(corpus: &str, n: usize) -> Vec<(String, String)> {
    let class = |c: char| {
        if c.is_alphabetic() {
            0
        } else if c.is_numeric() {
            1
        } else if c == ' ' {
            3
        } else {
            2
        }
    };
    let mut words: BTreeMap<String, usize> = BTreeMap::new();
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    for c in corpus.chars() {
        let cut = match prev {
            None => false,
            Some(p) => c == ' ' || (class(p) != class(c) && p != ' '),
        };
        if cut && !cur.is_empty() {
            *words.entry(std::mem::take(&mut cur)).or_default() += 1;
        }
        cur.push(c);
        prev = Some(c);
    }
    if !cur.is_empty() {
        *words.entry(cur).or_default() += 1;
    }
    let mut seqs: Vec<(Vec<String>, usize)> = words
        .into_iter()
        .map(|(w, k)| (byte_encode(&w).chars().map(String::from).collect(), k))
        .collect();
    let mut merges = Vec::new();
    for _ in 0..n {
        let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (s, k) in &seqs {
            for w in s.windows(2) {
                *counts.entry((w[0].clone(), w[1].clone())).or_default() += k;
            }
        }
        // BTreeMap order makes ties go to the smallest pair.
        let Some((best, &k)) = counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))) else {
            break;
        };
        if k < 1 {
            break;
        }
        let best = best.clone();
        for (s, _) in &mut seqs {
            let mut out = Vec::with_capacity(s.len());
            let mut i = 0;
            while i < s.len() {
                if i + 1 < s.len() && s[i] == best.0 && s[i + 1] == best.1 {
                    out.push(format!("{}{}", best.0, best.1));
                    i += 2;
                } else {
                    out.push(s[i].clone());
                    i += 1;
                }
            }
            *s = out;
        }
        merges.push(best);
    }
    merges
}

struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    merges: Vec<String>,
}

const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;
const BYTE: i32 = 6;

fn build_vocab() -> Vocab {
    let mut tokens = Vec::new();
    let mut types = Vec::new();
    for i in 0..=130 {
        let (text, ty) = match i {
            0 => ("<|pad|>".to_string(), CONTROL),
            1 => ("<|startoftext|>".to_string(), CONTROL),
            2 => ("<|endoftext|>".to_string(), CONTROL),
            6 => ("<|im_start|>".to_string(), CONTROL),
            7 => ("<|im_end|>".to_string(), CONTROL),
            10 => ("<think>".to_string(), USER_DEFINED),
            12 => ("<unused12>".to_string(), UNUSED),
            13 => ("<0x0A>".to_string(), BYTE),
            128 => ("<|audio_start|>".to_string(), CONTROL),
            129 => ("<|text_start|>".to_string(), CONTROL),
            130 => ("<|text_end|>".to_string(), CONTROL),
            _ => (format!("<|reserved_{i}|>"), CONTROL),
        };
        tokens.push(text);
        types.push(ty);
    }
    for b in 0..=255u8 {
        tokens.push(byte_char(b).to_string());
        types.push(NORMAL);
    }
    let learned = learn_merges(CORPUS, 400);
    assert!(learned.len() > 250, "only {} merges learned", learned.len());
    let mut seen: HashSet<String> = tokens.iter().cloned().collect();
    let mut merges = Vec::new();
    for (a, b) in learned {
        merges.push(format!("{a} {b}"));
        let t = format!("{a}{b}");
        if seen.insert(t.clone()) {
            tokens.push(t);
            types.push(NORMAL);
        }
    }
    // A token no merge sequence builds: only whole-word look-up (lfm2's ignore_merges) finds it.
    for extra in [" zzyzx", "</think>"] {
        let t = byte_encode(extra);
        assert!(seen.insert(t.clone()));
        tokens.push(t);
        types.push(NORMAL);
    }
    Vocab {
        tokens,
        types,
        merges,
    }
}

/// The GGUF metadata of a vocabulary-only lfm2 model with `pre` as its pre-tokenizer.
fn metadata(v: &Vocab, pre: &str, add_bos: bool) -> GgufMetadata {
    let mut m = RandomModel::tiny_lfm2(1).metadata();
    let mut set = |k: &str, val: GgufValue| {
        m.set(k, val).unwrap();
    };
    set("lfm2.vocab_size", (v.tokens.len() as u32).into());
    set("tokenizer.ggml.model", "gpt2".into());
    set("tokenizer.ggml.pre", pre.into());
    set("tokenizer.ggml.tokens", v.tokens.clone().into());
    set("tokenizer.ggml.token_type", v.types.clone().into());
    set("tokenizer.ggml.merges", v.merges.clone().into());
    set("tokenizer.ggml.bos_token_id", 1u32.into());
    set("tokenizer.ggml.eos_token_id", 7u32.into());
    set("tokenizer.ggml.padding_token_id", 0u32.into());
    set("tokenizer.ggml.add_bos_token", add_bos.into());
    m
}

/// A GGUF file on disk, removed on drop.
struct TempGguf(PathBuf);

impl TempGguf {
    fn write(meta: &GgufMetadata, tag: &str) -> TempGguf {
        let path = std::env::temp_dir().join(format!(
            "audio-engine-tokenizer-{tag}-{}.gguf",
            std::process::id()
        ));
        let mut w = GgufWriter::new();
        w.extend_metadata(meta).unwrap();
        w.write_to_path(&path).unwrap();
        TempGguf(path)
    }
}

impl Drop for TempGguf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Both tokenizers of one vocabulary.
struct Pair {
    ours: Tokenizer,
    theirs: LlamaVocab,
    _file: TempGguf,
}

fn pair(v: &Vocab, pre: &str, add_bos: bool) -> Pair {
    let file = TempGguf::write(&metadata(v, pre, add_bos), pre);
    let ours = Tokenizer::open(&file.0).unwrap();
    let theirs = LlamaVocab::load(&file.0).unwrap();
    Pair {
        ours,
        theirs,
        _file: file,
    }
}

// ---------------------------------------------------------------------------
// strings
// ---------------------------------------------------------------------------

fn fixed_strings() -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        " ",
        "  ",
        "\n",
        "a",
        "Hello world",
        "The quick brown fox jumps over the lazy dog.",
        "  leading and trailing spaces  ",
        "multiple   spaces\tand\ttabs\n\nnewlines\r\n\r\n  end",
        "trailing newline and spaces \n   ",
        "Numbers: 1 12 123 1234 12345 1234567 3.14159 -42 1,000,000 x2024y",
        "I'm can't won't they're we've he'll she'd IT'S I'LL We'Re 'twas rock'n'roll",
        "émigré café naïve Ångström façade straße",
        "日本語のテキストです。中文文本 한국어",
        "emoji 😀🎉👍🏽 family 👨\u{200d}👩\u{200d}👧 ❤️",
        "Ⅻ ² ٣٤٥ numbers ½",
        "\u{a0}nbsp\u{3000}ideographic\u{85}next\u{2028}line",
        "x\u{A7CB}y \u{0378} \u{2EBF0}",
        "code: fn main() {\n\tprintln!(\"hi\"); // done\n}\n",
        ",,,,....!!!!????  ---===+++$$$",
        " zzyzx zzyzxx zzyzx",
        "<|im_end|>",
        "<|im_start|>user\nhi<|im_end|>",
        "hello<|im_end|>world<|endoftext|><|pad|> <|text_end|>",
        "<|im_end <|im_end|<|im_end|>>",
        "<think>reasoning</think> answer",
        "<unused12><0x0A>",
        "<|audio_start|><|text_start|>The answer is 42.<|text_end|>",
        CHAT_PROMPT,
        "Perform ASR.",
        "<|im_end|>\n<|im_start|>assistant\n",
        "Perform TTS. Use the UK male voice.",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("aaaa".repeat(200));
    v.push(" ".repeat(300) + "x");
    v.push("1234567890".repeat(20));
    v.push(CORPUS.to_string());
    v
}

/// Deterministic random strings from pieces chosen to hit the pre-tokenizer's corners.
fn fuzz_strings(n: usize, seed: u64) -> Vec<String> {
    const PIECES: &[&str] = &[
        "a",
        "b",
        "e",
        "the",
        "The",
        " ",
        "  ",
        "\n",
        "\r",
        "\t",
        "'",
        "s",
        "'s",
        "'LL",
        "'re",
        "1",
        "2",
        "0",
        "9",
        "42",
        ".",
        ",",
        "!",
        "?",
        "é",
        "ü",
        "中",
        "文",
        "😀",
        "👍🏽",
        "\u{a0}",
        "\u{3000}",
        "\u{85}",
        "<|im_end|>",
        "<|im_start|>",
        "<|",
        "|>",
        "<think>",
        "٣",
        "Ⅻ",
        "-",
        "$",
        "+",
        "<",
        "zzyzx",
        " zzyzx",
        "Hello",
        " world",
        "日本",
        "ß",
        "\u{301}",
        "ǅ",
        "_",
        "`",
        "~",
        "Ω",
        "\u{200d}",
    ];
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|_| {
            let k = 1 + (next() % 16) as usize;
            (0..k)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect()
        })
        .collect()
}

fn to_i32(ids: &[u32]) -> Vec<i32> {
    ids.iter().map(|&i| i as i32).collect()
}

/// Compares every string under both `parse_special` settings (and `add_special`), and checks
/// that decoding gives the text back. Returns the number of comparisons.
fn compare(p: &Pair, strings: &[String]) -> usize {
    let mut n = 0;
    for s in strings {
        for parse_special in [false, true] {
            let ours = p.ours.encode(s, parse_special);
            let theirs = p.theirs.tokenize(s, false, parse_special).unwrap();
            assert_eq!(
                to_i32(&ours),
                theirs,
                "pre {:?}, parse_special {parse_special}: {s:?}",
                p.ours.pre_tokenizer()
            );
            assert_eq!(p.ours.decode(&ours).unwrap(), *s, "round trip of {s:?}");
            let ours = p.ours.encode_with_special(s, true, parse_special).unwrap();
            let theirs = p.theirs.tokenize(s, true, parse_special).unwrap();
            assert_eq!(to_i32(&ours), theirs, "add_special, {s:?}");
            n += 2;
        }
    }
    n
}

// ---------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------

#[test]
fn lfm2_vocab_matches_llama_cpp() {
    let v = build_vocab();
    let p = pair(&v, "lfm2", true);
    assert_eq!(p.ours.n_vocab(), p.theirs.n_vocab());
    assert_eq!(p.ours.n_vocab(), v.tokens.len());

    let mut strings = fixed_strings();
    strings.extend(fuzz_strings(1500, 0x5eed));
    let n = compare(&p, &strings);
    assert!(n > 3000);

    // Every token's piece, EOG flag, and the special ids.
    for id in 0..p.ours.n_vocab() as u32 {
        assert_eq!(
            p.ours.token_bytes(id).unwrap(),
            &p.theirs.token_to_piece(id as i32, true).unwrap()[..],
            "piece of token {id} {:?}",
            v.tokens[id as usize]
        );
        assert_eq!(p.ours.is_eog(id), p.theirs.is_eog(id as i32), "eog {id}");
    }
    assert_eq!(p.ours.bos().map(|b| b as i32), p.theirs.bos());
    assert_eq!(p.ours.eos().map(|b| b as i32), p.theirs.eos());
    assert_eq!(p.ours.add_bos(), p.theirs.add_bos());
    assert!(p.ours.add_bos());
}

#[test]
fn other_pre_tokenizers_match_llama_cpp() {
    let v = build_vocab();
    for pre in ["default", "gpt-2", "dbrx"] {
        let p = pair(&v, pre, false);
        let mut strings = fixed_strings();
        strings.extend(fuzz_strings(400, 0xabc ^ pre.len() as u64));
        compare(&p, &strings);
        assert!(!p.ours.add_bos());
        // gpt2 vocabularies with this pre-tokenizer take merges literally: no whole-word look-up.
        let z = p.ours.token_id(&byte_encode(" zzyzx")).unwrap();
        assert!(!p.ours.encode(" zzyzx", false).contains(&z), "{pre}");
    }
}

#[test]
fn lfm2_ids_and_specials() {
    let v = build_vocab();
    let file = TempGguf::write(&metadata(&v, "lfm2", true), "ids");
    let tok = Tokenizer::open(&file.0).unwrap();
    for (name, id) in [
        ("<|pad|>", 0),
        ("<|startoftext|>", 1),
        ("<|endoftext|>", 2),
        ("<|im_start|>", 6),
        ("<|im_end|>", 7),
        ("<|audio_start|>", 128),
        ("<|text_start|>", 129),
        ("<|text_end|>", 130),
    ] {
        assert_eq!(tok.token_id(name), Some(id), "{name}");
        assert_eq!(tok.token_bytes(id).unwrap(), name.as_bytes());
        assert!(tok.is_control(id));
    }
    assert_eq!(tok.token_id("<|nonexistent|>"), None);
    assert_eq!(tok.bos(), Some(1));
    assert_eq!(tok.eos(), Some(7));
    assert_eq!(tok.pad(), Some(0));
    assert!(tok.is_eog(7) && tok.is_eog(2) && !tok.is_eog(6));

    // The chat prompt: specials are single tokens, text in between is BPE.
    let ids = tok.encode(CHAT_PROMPT, true);
    assert_eq!(&ids[..2], &[1, 6]);
    let nl = tok.encode("\n", false);
    assert_eq!(nl.len(), 1);
    let end = ids.iter().position(|&i| i == 7).unwrap();
    assert_eq!(ids[end + 1..end + 3], [nl[0], 6]);
    assert_eq!(tok.decode(&ids).unwrap(), CHAT_PROMPT);
    // Without parse_special the control-token text is ordinary text.
    let plain = tok.encode(CHAT_PROMPT, false);
    assert!(!plain.contains(&1) && !plain.contains(&6) && !plain.contains(&7));
    assert_eq!(tok.decode(&plain).unwrap(), CHAT_PROMPT);
    // A user-defined token splits out either way.
    assert_eq!(tok.encode("<think>", false), [10]);
    // Whole-word look-up finds a token no merge builds.
    let z = tok.token_id(&byte_encode(" zzyzx")).unwrap();
    assert_eq!(tok.encode(" zzyzx", false), [z]);
    // Digits go in groups of three.
    let ids = tok.encode("1234567", false);
    let parts: Vec<String> = ids.iter().map(|&i| tok.decode(&[i]).unwrap()).collect();
    assert!(
        parts.concat() == "1234567" && parts.iter().all(|p| p.len() <= 3),
        "{parts:?}"
    );
    // Types and pieces of the odd token kinds.
    assert_eq!(tok.token_type(12).unwrap(), TokenType::Unused);
    assert_eq!(tok.token_bytes(12).unwrap(), b"");
    assert_eq!(tok.token_type(13).unwrap(), TokenType::Byte);
    assert_eq!(tok.token_bytes(13).unwrap(), b"\n");
    assert_eq!(tok.token_type(10).unwrap(), TokenType::UserDefined);
    // with_special adds BOS only.
    let with = tok.encode_with_special("hi", true, false).unwrap();
    assert_eq!(with[0], 1);
    assert_eq!(&with[1..], &tok.encode("hi", false)[..]);

    // A multi-byte character split over tokens decodes once its bytes are all there.
    let ids = tok.encode("🦀", false);
    assert!(ids.len() > 1, "{ids:?}");
    let mut bytes = Vec::new();
    for &id in &ids {
        bytes.extend_from_slice(tok.token_bytes(id).unwrap());
    }
    assert_eq!(String::from_utf8(bytes).unwrap(), "🦀");
    assert_eq!(tok.decode(&ids[..1]).unwrap(), "\u{fffd}");

    // The file-opened tokenizer equals one built from the in-memory metadata.
    let meta = metadata(&v, "lfm2", true);
    let mem = Tokenizer::from_metadata(&meta, "mem").unwrap();
    for s in fixed_strings() {
        assert_eq!(mem.encode(&s, true), tok.encode(&s, true));
    }
}

#[test]
fn encoding_is_fast_enough() {
    let v = build_vocab();
    let tok = Tokenizer::from_metadata(&metadata(&v, "lfm2", true), "mem").unwrap();
    let text = CORPUS.repeat(50);
    let t0 = std::time::Instant::now();
    let ids = tok.encode(&text, true);
    let dt = t0.elapsed();
    assert_eq!(tok.decode(&ids).unwrap(), text);
    // Generous even for an unoptimised build: ~60 kB of text.
    assert!(dt.as_secs_f64() < 5.0, "{dt:?} for {} bytes", text.len());
}

// ---------------------------------------------------------------------------
// errors
// ---------------------------------------------------------------------------

fn err_of(meta: &GgufMetadata) -> TokenizerError {
    Tokenizer::from_metadata(meta, "bad.gguf").unwrap_err()
}

#[test]
fn bad_vocabularies_are_typed_errors() {
    let v = build_vocab();
    let good = metadata(&v, "lfm2", true);

    let mut m = good.clone();
    m.set("tokenizer.ggml.model", "llama").unwrap();
    let e = err_of(&m);
    assert!(
        matches!(&e, TokenizerError::UnsupportedModel { found, .. } if found == "llama"),
        "{e}"
    );
    assert!(e.to_string().contains("bad.gguf"), "{e}");

    let mut m = good.clone();
    m.set("tokenizer.ggml.pre", "no-such-pre").unwrap();
    let e = err_of(&m);
    assert!(
        matches!(&e, TokenizerError::UnknownPreTokenizer { found, .. } if found == "no-such-pre"),
        "{e}"
    );

    for key in [
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.merges",
    ] {
        let mut m = good.clone();
        m.remove(key);
        let e = err_of(&m);
        assert!(
            matches!(&e, TokenizerError::MissingKey { key: k, file } if k == key && file == "bad.gguf"),
            "{e}"
        );
    }

    let mut m = good.clone();
    m.set("tokenizer.ggml.tokens", 5u32).unwrap();
    let e = err_of(&m);
    assert!(
        matches!(&e, TokenizerError::BadValue { key, .. } if key == "tokenizer.ggml.tokens"),
        "{e}"
    );

    let mut m = good.clone();
    m.set("tokenizer.ggml.token_type", vec![1i32; 3]).unwrap();
    let e = err_of(&m);
    assert!(
        matches!(&e, TokenizerError::BadValue { key, .. } if key == "tokenizer.ggml.token_type"),
        "{e}"
    );

    let mut m = good.clone();
    let mut toks = v.tokens.clone();
    toks[200] = toks[201].clone();
    m.set("tokenizer.ggml.tokens", toks).unwrap();
    let e = err_of(&m);
    assert!(
        matches!(&e, TokenizerError::BadValue { reason, .. } if reason.contains("repeats")),
        "{e}"
    );

    let mut m = good.clone();
    m.set("tokenizer.ggml.bos_token_id", "one").unwrap();
    let e = err_of(&m);
    assert!(
        matches!(&e, TokenizerError::BadValue { key, .. } if key == "tokenizer.ggml.bos_token_id"),
        "{e}"
    );

    let mut m = good.clone();
    let mut types = v.types.clone();
    types[300] = 6; // a byte token whose text is one character
    m.set("tokenizer.ggml.token_type", types).unwrap();
    assert!(matches!(err_of(&m), TokenizerError::BadValue { .. }));

    // A vocabulary that asks for BOS but has none: an error, not an abort.
    let mut m = GgufMetadata::new();
    m.set("tokenizer.ggml.model", "gpt2").unwrap();
    m.set("tokenizer.ggml.pre", "lfm2").unwrap();
    m.set("tokenizer.ggml.tokens", vec!["a", "b", "c"]).unwrap();
    m.set("tokenizer.ggml.merges", vec!["a b"]).unwrap();
    let tok = Tokenizer::from_metadata(&m, "tiny").unwrap();
    assert_eq!(tok.bos(), None);
    assert_eq!(tok.encode("abc", false), [0, 1, 2]);
    assert!(matches!(
        tok.encode_with_special("abc", true, false),
        Err(TokenizerError::MissingSpecialToken { what: "BOS" })
    ));

    // Missing file: the GGUF error names it.
    let e = Tokenizer::open("/nonexistent/backbone.gguf").unwrap_err();
    assert!(matches!(e, TokenizerError::Gguf(_)));
    assert!(e.to_string().contains("/nonexistent/backbone.gguf"), "{e}");
}

#[test]
fn out_of_range_ids_are_typed_errors() {
    let v = build_vocab();
    let p = pair(&v, "lfm2", true);
    let n = p.ours.n_vocab() as u32;
    assert!(matches!(
        p.ours.token_bytes(n),
        Err(TokenizerError::TokenOutOfRange { id, n_vocab }) if id == n && n_vocab == n as usize
    ));
    assert!(matches!(
        p.ours.decode(&[1, n + 5]),
        Err(TokenizerError::TokenOutOfRange { .. })
    ));
    assert!(p.ours.token_text(u32::MAX).is_err());
    assert!(p.ours.token_type(n).is_err());
    assert!(!p.ours.is_eog(u32::MAX) && !p.ours.is_control(u32::MAX));

    assert!(matches!(
        p.theirs.token_to_piece(-1, true),
        Err(LlamaVocabError::TokenOutOfRange { .. })
    ));
    assert!(matches!(
        p.theirs.token_to_piece(n as i32, true),
        Err(LlamaVocabError::TokenOutOfRange { .. })
    ));
    assert!(p.theirs.attr(n as i32).is_err());
    let e = LlamaVocab::load(std::path::Path::new("/nonexistent/v.gguf")).unwrap_err();
    assert!(matches!(e, LlamaVocabError::Load { .. }));
}
