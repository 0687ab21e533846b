//! The demo package's BPE tokenizer (the backbone's vocabulary, LFM2's pre-tokenizer and
//! special tokens): encode of arbitrary UTF-8 with and without special-token parsing, and
//! decode of arbitrary ids (in and out of the vocabulary). Encoding never panics, plain text
//! round-trips byte for byte, and decoding gives a typed error for an unknown id.
//!
//! Input: a flag byte, a u16 text length, the text (invalid UTF-8 replaced), then ids as u32s.
#![no_main]

use std::sync::OnceLock;

use audio_engine::lfm2_audio::internals::tokenizer::Tokenizer;
use lfm2_engine_fuzz::{demo, write_seeds_if_asked, Bytes, Script};
use libfuzzer_sys::fuzz_target;

fn tok() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| Tokenizer::open(&demo().backbone).expect("demo tokenizer"))
}

fn seed(flags: u8, text: &str, ids: &[u32]) -> Vec<u8> {
    let mut s = Script::default();
    s.u8(flags).long_bytes(text.as_bytes());
    for &i in ids {
        s.u32(i);
    }
    s.bytes()
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let t = tok();
    let chat = "<|startoftext|><|im_start|>system\nRespond with interleaved text and audio.<|im_end|>\n<|im_start|>user\n<|audio_start|><|im_end|>\n<|im_start|>assistant\n<|text_start|>Hi!<|text_end|>";
    let ids = t.encode(chat, true);
    vec![
        ("chat_markup".into(), seed(1, chat, &ids)),
        (
            "plain_en".into(),
            seed(
                0,
                "Hello there, numbers 2024 and voices. It's 3.14!",
                &[0, 1, 2],
            ),
        ),
        (
            "unicode".into(),
            seed(
                3,
                "日本語のテキスト 🎙️ café — ｆｕｌｌ  \t\n spaces",
                &[t.n_vocab() as u32, u32::MAX],
            ),
        ),
        (
            "partial_special".into(),
            seed(1, "<|im_end <|im_end|><|<|audio_start|>|>", &[]),
        ),
    ]
}

fuzz_target!(
    init: { write_seeds_if_asked(seeds) },
    |data: &[u8]| {
        let t = tok();
        let mut b = Bytes::new(data);
        let flags = b.u8();
        let text = String::from_utf8_lossy(b.long_bytes()).into_owned();
        let n = t.n_vocab() as u32;

        let plain = t.encode(&text, false);
        assert!(plain.iter().all(|&i| i < n), "encode gave an id outside the vocabulary");
        // why: byte-level BPE is lossless on text that is not parsed for special tokens.
        let back = t.decode_bytes(&plain).expect("decoding encoded ids");
        assert_eq!(back, text.as_bytes(), "plain text does not round-trip");
        let special = t.encode(&text, true);
        assert!(special.iter().all(|&i| i < n), "encode gave an id outside the vocabulary");
        let _ = t.decode(&special);
        let _ = t.encode_with_special(&text, flags & 2 != 0, flags & 1 != 0);

        // Arbitrary ids: a few past the vocabulary's end too.
        let ids: Vec<u32> = b
            .rest()
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                let v = u32::from_le_bytes(w);
                if flags & 4 != 0 { v } else { v % (n + 4) }
            })
            .collect();
        match t.decode_bytes(&ids) {
            Ok(_) => assert!(ids.iter().all(|&i| i < n), "decoded an unknown id"),
            Err(_) => assert!(ids.iter().any(|&i| i >= n), "refused known ids"),
        }
        let _ = t.decode(&ids);
        for &i in ids.iter().take(8) {
            let _ = (t.token_text(i), t.token_type(i), t.is_control(i), t.is_eog(i));
        }
    }
);
