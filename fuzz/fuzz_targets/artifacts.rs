//! The conversation protocol on arbitrary request artifacts and options: which task takes
//! what (the one request validator, `Request::resolve`, with options from the option table), every reply artifact read alone (`check_reply_meta`,
//! `decode_reply`), the whole history read (`read_history`: ids, order, kinds, meta, the step
//! limit, payloads, question WAVs) and, for a history that reads, its chat prompt. Any script
//! must give typed errors, never a panic, and a history that reads must lay out a prompt.
//!
//! Input script (see `lfm2_engine_fuzz::Bytes`): task byte, max_tokens u16, option count and
//! options, artifact count and per artifact id, kind, payload (u16 length) and meta entries.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use audio_engine::lfm2_audio::internals::audio::ReadOptions;
use audio_engine::lfm2_audio::conversation::{
    check_reply_meta, decode_reply, encode_reply, read_history, Artifact,
    ArtifactKind, ChatMarkup, HistoryConfig, Question, QuestionLayout, ReplyFormat, ReplyStep, Task,
    CONVERSATION_LIMIT, QUESTION_ID, REPLY_ID, REPLY_META_KEYS, RETURN_CODES,
};
use audio_engine::lfm2_audio::internals::prompt::SYSTEM_S2S;
use audio_engine::lfm2_audio::internals::tokenizer::Tokenizer;
use lfm2_engine_fuzz::{demo, tone, wav_bytes, write_seeds_if_asked, Bytes, Script};
use libfuzzer_sys::fuzz_target;
use audio_engine::lfm2_audio::{OptionValue, Request, RequestContext, REQUEST_OPTIONS};
use serde_json::Value;

/// Request options as a JSON map, as a request body carries them.
type RequestOptions = BTreeMap<String, Value>;

const IDS: [&str; 2] = [QUESTION_ID, REPLY_ID];
const KINDS: [ArtifactKind; 4] = [
    ArtifactKind::Audio,
    ArtifactKind::Text,
    ArtifactKind::AcousticTokens,
    ArtifactKind::Custom,
];
const TASKS: [Task; 3] = [Task::Asr, Task::Tts, Task::S2s];
/// why: earlier questions are decoded in full; a small limit keeps each input fast.
const MAX_SECONDS: f64 = 0.5;

struct Ctx {
    fmt: ReplyFormat,
    markup: ChatMarkup,
    tok: Tokenizer,
}

fn ctx() -> &'static Ctx {
    static C: OnceLock<Ctx> = OnceLock::new();
    C.get_or_init(|| {
        let tok = Tokenizer::open(&demo().backbone).expect("demo tokenizer");
        // A tiny reply format (2 codebooks of 5 entries: codes 0..=3, end of audio 4) over the
        // demo vocabulary, so that random payloads hit valid codes often.
        let fmt = ReplyFormat {
            language: "en".into(),
            codebooks: 2,
            audio_vocab_size: 5,
            text_vocab_size: tok.n_vocab() as u32,
            im_end: tok.token_id("<|im_end|>").expect("<|im_end|>"),
        };
        Ctx {
            markup: ChatMarkup::new(&tok, SYSTEM_S2S),
            fmt,
            tok,
        }
    })
}

/// A JSON value chosen by the script: strings, integers (also as strings, the C ABI's and
/// audio.cpp's spelling), booleans, null, floats, negatives, arrays.
fn value(b: &mut Bytes) -> Value {
    match b.u8() % 8 {
        0 => Value::from(b.short_str()),
        1 => Value::from(u64::from(b.u16())),
        2 => Value::from(b.u8() & 1 == 1),
        3 => Value::Null,
        4 => Value::from(f64::from(b.u32()) / 7.0),
        5 => Value::from(-i64::from(b.u16())),
        6 => Value::from(u64::from(b.u32()) << (b.u8() % 33)),
        _ => Value::from(vec![Value::from(u64::from(b.u8()))]),
    }
}

fn write_value(s: &mut Script, v: &Value) {
    match v {
        Value::String(t) => s.u8(0).short_bytes(t.as_bytes()),
        Value::Bool(x) => s.u8(2).u8(u8::from(*x)),
        Value::Number(n) => s.u8(6).u32(n.as_u64().unwrap() as u32).u8(0),
        _ => s.u8(3),
    };
}

fn script_of(task: usize, max_tokens: u16, opts: &RequestOptions, arts: &[Artifact]) -> Vec<u8> {
    let mut s = Script::default();
    s.u8(task as u8).u16(max_tokens).u8(opts.len() as u8);
    for (k, v) in opts {
        if k == RETURN_CODES {
            s.pick(0);
        } else {
            s.fresh(1, k);
        }
        write_value(&mut s, v);
    }
    s.u8(arts.len() as u8);
    for a in arts {
        match IDS.iter().position(|i| *i == a.id) {
            Some(i) => s.pick(i),
            None => s.fresh(IDS.len(), &a.id),
        };
        s.u8(KINDS.iter().position(|k| *k == a.kind).unwrap() as u8);
        s.long_bytes(&a.payload);
        s.u8(a.meta.len() as u8);
        for (k, v) in &a.meta {
            match REPLY_META_KEYS.iter().position(|m| m == k) {
                Some(i) => s.pick(i),
                None => s.fresh(REPLY_META_KEYS.len(), k),
            };
            write_value(&mut s, v);
        }
    }
    s.bytes()
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let fmt = &ctx().fmt;
    let question = |n: usize| Artifact {
        id: QUESTION_ID.into(),
        kind: ArtifactKind::Custom,
        payload: wav_bytes(&tone(n), 16_000, 1, 16, false),
        meta: BTreeMap::new(),
    };
    let reply = |text: &[u32], frames: usize, ended: bool| {
        let mut steps: Vec<ReplyStep> = text.iter().map(|&t| ReplyStep::Text(t)).collect();
        for f in 0..frames {
            steps.push(ReplyStep::Frame(vec![(f % 4) as u32, ((f + 1) % 4) as u32]));
        }
        steps.push(ReplyStep::Frame(vec![4, 4]));
        encode_reply(&steps, ended, fmt).unwrap()
    };
    let mut rc = RequestOptions::new();
    rc.insert(RETURN_CODES.into(), Value::Bool(true));
    let two_turns = vec![
        question(1600),
        reply(&[300, 301, 302], 3, true),
        question(800),
        reply(&[400], 2, false),
    ];
    let mut meta_as_strings = reply(&[300], 1, true);
    for v in meta_as_strings.meta.values_mut() {
        let text = match &*v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        *v = Value::from(text);
    }
    vec![
        ("s2s_two_turns".into(), script_of(2, 64, &rc, &two_turns)),
        (
            "s2s_one_turn".into(),
            script_of(2, 8000, &RequestOptions::new(), &two_turns[..2]),
        ),
        (
            "s2s_string_meta".into(),
            script_of(2, 16, &rc, &[question(400), meta_as_strings]),
        ),
        (
            "asr_with_history".into(),
            script_of(0, 16, &RequestOptions::new(), &two_turns[..2]),
        ),
        ("tts_option".into(), script_of(1, 16, &rc, &[])),
    ]
}

fuzz_target!(
    init: { write_seeds_if_asked(seeds) },
    |data: &[u8]| {
        let c = ctx();
        let mut b = Bytes::new(data);
        let task = TASKS[usize::from(b.u8()) % TASKS.len()];
        let max_tokens = usize::from(b.u16());
        let mut options = RequestOptions::new();
        for _ in 0..b.u8() % 4 {
            let names: Vec<&str> = REQUEST_OPTIONS.iter().map(|o| o.name).collect();
            let k = if b.u8() % 2 == 0 {
                b.pick_or_str(&[RETURN_CODES])
            } else {
                b.pick_or_str(&names)
            };
            options.insert(k, value(&mut b));
        }
        let mut artifacts = Vec::new();
        for _ in 0..b.u8() % 9 {
            let id = b.pick_or_str(&IDS);
            let kind = KINDS[usize::from(b.u8()) % KINDS.len()];
            let payload = b.long_bytes().to_vec();
            let mut meta = BTreeMap::new();
            for _ in 0..b.u8() % 10 {
                let k = b.pick_or_str(&REPLY_META_KEYS);
                meta.insert(k, value(&mut b));
            }
            artifacts.push(Artifact { id, kind, payload, meta });
        }

        let mut req = Request::new(task);
        req.history = artifacts.clone();
        req.options = options
            .iter()
            .map(|(k, v)| (k.clone(), OptionValue::Json(v.clone())))
            .collect();
        req.options
            .insert("max_tokens".into(), OptionValue::Json(max_tokens.into()));
        let _ = req.resolve(&RequestContext::new("en", 60.0));
        for a in artifacts.iter().filter(|a| a.id == REPLY_ID) {
            let _ = check_reply_meta(a, &c.fmt);
            if let Ok(r) = decode_reply(a, &c.fmt) {
                for s in &r.steps {
                    assert!(c.fmt.check_step(s).is_ok(), "decoded step {s:?} does not fit");
                }
            }
        }
        let cfg = HistoryConfig {
            format: &c.fmt,
            markup: &c.markup,
            limit: CONVERSATION_LIMIT,
            wav: ReadOptions { max_seconds: MAX_SECONDS },
            tokenizer: &c.tok,
        };
        if let Ok(h) = read_history(&artifacts, &cfg, max_tokens) {
            // One encoder row per 1280 samples (80 ms at 16 kHz), the new question last.
            let mut qs: Vec<QuestionLayout> = h
                .turns
                .iter()
                .map(|t| match &t.question {
                    Question::Audio(s) => t.question.layout(s.len() / 1280 + 1),
                    Question::Text(_) | Question::Tool(_) => t.question.layout(0),
                })
                .collect();
            qs.push(QuestionLayout::Audio { rows: 1 });
            let _ = c.markup.build_mixed(&c.fmt, h.replies(), &qs);
        }
    }
);
