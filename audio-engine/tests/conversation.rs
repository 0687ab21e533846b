//! The conversation protocol of multi-turn S2S: the reply artifact's bytes and round trip, every
//! rejection of a request's history with its error kind and a message naming the problem, the
//! 8192-step limit at its boundary and before any payload is read, the chat prompt for zero, one
//! and two earlier turns against a hand-written layout, and which task takes what.

use std::collections::BTreeMap;

use audio_engine::ggml::gguf::GgufValue;
use audio_engine::lfm2_audio::conversation::{
    check_artifacts, check_room, decode_reply, encode_reply, read_history, Artifact, ArtifactKind,
    ChatMarkup, ConversationBudget, HistoryConfig, Question, Reply, ReplyFormat, ReplyStep, Task,
    CONVERSATION_LIMIT, QUESTION_ID, REPLY_ID,
};
use audio_engine::lfm2_audio::internals::audio::{encode_wav_24k, ReadOptions};
use audio_engine::lfm2_audio::internals::error::EngineError;
use audio_engine::lfm2_audio::internals::prompt::{Prompt, PromptBuilder, PromptPiece, SYSTEM_S2S};
use audio_engine::lfm2_audio::internals::tokenizer::Tokenizer;
use audio_engine::lfm2_audio::{
    AudioInput, Job, OptionMap, OptionValue, Request, RequestContext, ResolvedRequest,
};
use lfm2_llm::RandomModel;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------

/// GPT-2's byte -> character map.
fn byte_char(b: u8) -> char {
    let printable = |x: u32| (0x21..=0x7e).contains(&x) || (0xa1..=0xac).contains(&x) || x >= 0xae;
    if printable(b as u32) {
        return char::from(b);
    }
    let rank = (0..b as u32).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(0x100 + rank).unwrap()
}

/// First byte token: LFM2's special tokens take ids 0..=130, the 256 bytes follow in order.
const BYTE0: u32 = 131;

/// A byte-level vocabulary (no merges) with LFM2's special tokens at their ids, so every
/// character of plain ASCII text is one token, `BYTE0 + byte`.
fn tokenizer() -> Tokenizer {
    let mut tokens = Vec::new();
    let mut types = Vec::new();
    for i in 0..BYTE0 {
        tokens.push(match i {
            0 => "<|pad|>".to_owned(),
            1 => "<|startoftext|>".to_owned(),
            2 => "<|endoftext|>".to_owned(),
            6 => "<|im_start|>".to_owned(),
            7 => "<|im_end|>".to_owned(),
            10 => "<|tool_call_start|>".to_owned(),
            11 => "<|tool_call_end|>".to_owned(),
            12 => "<|tool_response_start|>".to_owned(),
            13 => "<|tool_response_end|>".to_owned(),
            128 => "<|audio_start|>".to_owned(),
            129 => "<|text_start|>".to_owned(),
            130 => "<|text_end|>".to_owned(),
            _ => format!("<|reserved_{i}|>"),
        });
        types.push(3i32); // control
    }
    for b in 0..=255u8 {
        tokens.push(byte_char(b).to_string());
        types.push(1i32); // normal
    }
    let mut m = RandomModel::tiny_lfm2(1).metadata();
    let n = tokens.len() as u32;
    let mut set = |k: &str, v: GgufValue| m.set(k, v).unwrap();
    set("lfm2.vocab_size", n.into());
    set("tokenizer.ggml.model", "gpt2".into());
    set("tokenizer.ggml.pre", "lfm2".into());
    set("tokenizer.ggml.tokens", tokens.into());
    set("tokenizer.ggml.token_type", types.into());
    set("tokenizer.ggml.merges", Vec::<String>::new().into());
    set("tokenizer.ggml.bos_token_id", 1u32.into());
    set("tokenizer.ggml.eos_token_id", 7u32.into());
    set("tokenizer.ggml.padding_token_id", 0u32.into());
    Tokenizer::from_metadata(&m, "<byte vocab>").unwrap()
}

/// The ids of plain ASCII text in the byte vocabulary.
fn bytes(s: &str) -> Vec<u32> {
    s.bytes().map(|b| BYTE0 + u32::from(b)).collect()
}

/// The published EN checkpoint's reply format.
fn en() -> ReplyFormat {
    ReplyFormat {
        language: "en".into(),
        codebooks: 8,
        audio_vocab_size: 2049,
        text_vocab_size: 65536,
        im_end: 7,
    }
}

/// A tiny format: 2 codebooks of 5 entries (codes 0..=3, end of audio 4), 300 text ids.
fn tiny() -> ReplyFormat {
    ReplyFormat {
        language: "en".into(),
        codebooks: 2,
        audio_vocab_size: 5,
        text_vocab_size: 300,
        im_end: 7,
    }
}

/// An interleaved reply of `n_text` text steps and `n_frames` frames (the last one end of
/// audio), text first, as S2S generates it.
fn reply_steps(fmt: &ReplyFormat, n_text: usize, n_frames: usize, seed: u32) -> Vec<ReplyStep> {
    let mut steps = Vec::new();
    for i in 0..n_text {
        steps.push(ReplyStep::Text(200 + (i as u32 + seed) % 50));
    }
    for f in 0..n_frames {
        if f + 1 == n_frames {
            steps.push(ReplyStep::Frame(vec![fmt.end_of_audio(); fmt.codebooks]));
        } else {
            steps.push(ReplyStep::Frame(
                (0..fmt.codebooks)
                    .map(|cb| (f as u32 * 7 + cb as u32 * 3 + seed) % fmt.end_of_audio())
                    .collect(),
            ));
        }
    }
    steps
}

/// A question's WAV: `seconds` of a quiet tone at 24 kHz.
fn question_wav(seconds: f64) -> Vec<u8> {
    let n = (seconds * 24_000.0) as usize;
    let samples: Vec<f32> = (0..n).map(|i| 0.1 * (i as f32 * 0.05).sin()).collect();
    encode_wav_24k(&samples).unwrap()
}

fn question(seconds: f64) -> Artifact {
    Artifact {
        id: QUESTION_ID.into(),
        kind: ArtifactKind::Custom,
        payload: question_wav(seconds),
        meta: BTreeMap::new(),
    }
}

/// A valid history of one turn per `(n_text, n_frames)`.
fn history(fmt: &ReplyFormat, turns: &[(usize, usize)]) -> (Vec<Artifact>, Vec<Reply>) {
    let mut arts = Vec::new();
    let mut replies = Vec::new();
    for (t, &(n_text, n_frames)) in turns.iter().enumerate() {
        let steps = reply_steps(fmt, n_text, n_frames, t as u32);
        let ended = t % 2 == 0;
        arts.push(question(0.2 + 0.1 * t as f64));
        arts.push(encode_reply(&steps, ended, fmt).unwrap());
        replies.push(Reply { steps, ended });
    }
    (arts, replies)
}

struct Ctx {
    fmt: ReplyFormat,
    markup: ChatMarkup,
    tok: Tokenizer,
}

impl Ctx {
    fn new() -> Ctx {
        Ctx {
            fmt: en(),
            markup: ChatMarkup::new(&tokenizer(), SYSTEM_S2S),
            tok: tokenizer(),
        }
    }

    fn cfg(&self) -> HistoryConfig<'_> {
        HistoryConfig {
            format: &self.fmt,
            markup: &self.markup,
            limit: CONVERSATION_LIMIT,
            wav: ReadOptions::default(),
            tokenizer: &self.tok,
        }
    }
}

#[track_caller]
fn expect_invalid<T: std::fmt::Debug>(r: Result<T, EngineError>, needles: &[&str]) {
    match r {
        Err(EngineError::InvalidRequest(m)) => {
            for n in needles {
                assert!(m.contains(n), "message {m:?} does not name {n:?}");
            }
        }
        other => panic!("expected an invalid request naming {needles:?}, got {other:?}"),
    }
}

#[track_caller]
fn expect_capacity<T: std::fmt::Debug>(r: Result<T, EngineError>, needles: &[&str]) {
    match r {
        Err(EngineError::Capacity(m)) => {
            assert!(m.contains("leave out the oldest turns"), "{m}");
            assert!(m.contains("8192"), "{m}");
            for n in needles {
                assert!(m.contains(n), "message {m:?} does not name {n:?}");
            }
        }
        other => panic!("expected a capacity error, got {other:?}"),
    }
}

#[track_caller]
fn expect_internal<T: std::fmt::Debug>(r: Result<T, EngineError>, needle: &str) {
    // why: the engine's own faults (a step it generated, an inconsistent format) are neither
    // the request's nor capacity; the message keeps the detail.
    match r {
        Err(e @ (EngineError::ReplyStep { .. } | EngineError::Invariant(_))) => {
            let m = e.chain();
            assert!(m.contains(needle), "{m:?} lacks {needle:?}")
        }
        other => panic!("expected an internal error naming {needle:?}, got {other:?}"),
    }
}

fn le(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

// ---------------------------------------------------------------------------
// the reply artifact
// ---------------------------------------------------------------------------

#[test]
fn reply_artifact_bytes_and_meta() {
    let fmt = tiny();
    let steps = vec![
        ReplyStep::Text(5),
        ReplyStep::Text(130),
        ReplyStep::Frame(vec![1, 2]),
        ReplyStep::Frame(vec![0, 3]),
        ReplyStep::Frame(vec![4, 4]),
        ReplyStep::Text(299),
    ];
    let art = encode_reply(&steps, false, &fmt).unwrap();
    assert_eq!(art.id, "lfm2_audio.reply");
    assert_eq!(art.kind, ArtifactKind::AcousticTokens);
    #[rustfmt::skip]
    let want: Vec<u8> = vec![
        0x05, 0, 0, 0,
        0x82, 0, 0, 0,
        0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0, 0x02, 0, 0, 0,
        0xff, 0xff, 0xff, 0xff, 0x00, 0, 0, 0, 0x03, 0, 0, 0,
        0xff, 0xff, 0xff, 0xff, 0x04, 0, 0, 0, 0x04, 0, 0, 0,
        0x2b, 0x01, 0, 0,
    ];
    assert_eq!(art.payload, want);
    let meta: BTreeMap<String, Value> = [
        ("format", json!("lfm2_audio.reply/1")),
        ("language", json!("en")),
        ("codebooks", json!(2)),
        ("audio_vocab_size", json!(5)),
        ("text_vocab_size", json!(300)),
        ("steps", json!(6)),
        ("ended", json!(false)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(art.meta, meta);

    // The published checkpoint's shape: a second of audio (12.5 frames) is about 470 bytes.
    let en = en();
    let second = reply_steps(&en, 6, 13, 0);
    let a = encode_reply(&second, true, &en).unwrap();
    assert_eq!(a.payload.len(), 4 * (6 + 13 * 9));
    assert_eq!(a.meta["ended"], json!(true));
}

#[test]
fn reply_round_trip() {
    let fmt = en();
    for (n_text, n_frames, ended) in [(0, 0, false), (1, 0, true), (40, 125, true), (7, 3, false)] {
        let steps = reply_steps(&fmt, n_text, n_frames, 3);
        let art = encode_reply(&steps, ended, &fmt).unwrap();
        let back = decode_reply(&art, &fmt).unwrap();
        assert_eq!(back, Reply { steps, ended });
        assert_eq!(back.len(), n_text + n_frames);
    }
    // Interleaved text and frames with <|text_end|> and every code at its bounds.
    let steps = vec![
        ReplyStep::Text(0),
        ReplyStep::Text(65535),
        ReplyStep::Text(130),
        ReplyStep::Frame(vec![0, 2047, 0, 2047, 1, 2, 3, 4]),
        ReplyStep::Frame(vec![2047, 2048, 2048, 0, 0, 0, 0, 0]),
        ReplyStep::Frame(vec![2048; 8]),
        ReplyStep::Text(9),
    ];
    let art = encode_reply(&steps, true, &fmt).unwrap();
    assert_eq!(decode_reply(&art, &fmt).unwrap().steps, steps);
}

#[test]
fn encode_refuses_steps_that_do_not_fit_as_internal() {
    let fmt = tiny();
    let cases: Vec<(ReplyStep, &str)> = vec![
        (ReplyStep::Text(300), "outside the 300-token vocabulary"),
        (ReplyStep::Text(7), "<|im_end|>"),
        (
            ReplyStep::Frame(vec![1]),
            "1 codes, the checkpoint has 2 codebooks",
        ),
        (ReplyStep::Frame(vec![1, 2, 3]), "3 codes"),
        (ReplyStep::Frame(vec![1, 5]), "code 5 of codebook 1"),
        (ReplyStep::Frame(vec![4, 1]), "not all end of audio"),
    ];
    for (step, needle) in cases {
        let steps = vec![ReplyStep::Text(1), step];
        expect_internal(encode_reply(&steps, true, &fmt), needle);
        expect_internal(encode_reply(&steps, true, &fmt), "reply step 1");
    }
    let mut broken = tiny();
    broken.codebooks = 0;
    expect_internal(encode_reply(&[], true, &broken), "unusable reply format");
}

/// A valid tiny reply artifact to break.
fn tiny_reply() -> Artifact {
    let steps = vec![
        ReplyStep::Text(5),
        ReplyStep::Frame(vec![1, 2]),
        ReplyStep::Frame(vec![4, 4]),
    ];
    encode_reply(&steps, true, &tiny()).unwrap()
}

#[test]
fn decode_rejects_what_does_not_fit_the_checkpoint() {
    let fmt = tiny();
    type Edit = Box<dyn Fn(&mut Artifact)>;
    let meta = |k: &'static str, v: Value| -> Edit {
        Box::new(move |a: &mut Artifact| {
            a.meta.insert(k.to_owned(), v.clone());
        })
    };
    let payload = |v: Vec<i32>, steps: u64| -> Edit {
        Box::new(move |a: &mut Artifact| {
            a.payload = le(&v);
            a.meta.insert("steps".into(), json!(steps));
        })
    };
    let cases: Vec<(Edit, &[&str])> = vec![
        (
            Box::new(|a| a.id = "lfm2_audio.answer".into()),
            &["artifact id", "lfm2_audio.answer"],
        ),
        (
            Box::new(|a| a.kind = ArtifactKind::Custom),
            &["kind is custom", "acoustic_tokens"],
        ),
        (
            Box::new(|a| a.kind = ArtifactKind::Audio),
            &["kind is audio"],
        ),
        (
            meta("format", json!("lfm2_audio.reply/2")),
            &["`format`", "lfm2_audio.reply/2"],
        ),
        (meta("format", json!(1)), &["`format`"]),
        (
            meta("language", json!("ja")),
            &["`language`", "\"ja\"", "\"en\""],
        ),
        (
            meta("codebooks", json!(8)),
            &["`codebooks` is 8", "2 codebooks"],
        ),
        (
            meta("codebooks", json!("2")),
            &["`codebooks`", "not a non-negative integer"],
        ),
        (
            meta("audio_vocab_size", json!(2049)),
            &["`audio_vocab_size` is 2049"],
        ),
        (
            meta("text_vocab_size", json!(65536)),
            &["`text_vocab_size` is 65536", "300"],
        ),
        (
            meta("steps", json!(-3)),
            &["`steps`", "not a non-negative integer"],
        ),
        (meta("steps", json!(3.0)), &["`steps`"]),
        (
            meta("ended", json!("true")),
            &["`ended`", "not true or false"],
        ),
        (meta("extra", json!(1)), &["unknown meta key `extra`"]),
        (
            Box::new(|a| {
                a.meta.remove("language");
            }),
            &["meta key `language` is missing"],
        ),
        (
            meta("steps", json!(4)),
            &["payload holds 3 steps, its meta says 4"],
        ),
        (meta("steps", json!(2)), &["more than the 2 steps"]),
        (
            Box::new(|a| {
                a.payload.pop();
            }),
            &["not a whole number of int32 values"],
        ),
        (
            payload(vec![5, -1, 1], 2),
            &["ends inside step 1", "after 1 of 2 codes"],
        ),
        (payload(vec![5, -2], 2), &["step 1", "value -2"]),
        (
            payload(vec![-1, 1, -5], 1),
            &["step 0", "code -5 of codebook 1 is negative"],
        ),
        (payload(vec![300], 1), &["step 0", "text id 300 is outside"]),
        (payload(vec![5, 7], 2), &["step 1", "<|im_end|>"]),
        (
            payload(vec![-1, 1, 5], 1),
            &["code 5 of codebook 1 is outside the 5-entry codebook"],
        ),
        (payload(vec![-1, 4, 0], 1), &["not all end of audio"]),
    ];
    for (i, (edit, needles)) in cases.into_iter().enumerate() {
        let mut a = tiny_reply();
        edit(&mut a);
        let r = decode_reply(&a, &fmt);
        assert!(r.is_err(), "case {i} decoded");
        expect_invalid(r, needles);
    }
    // The payload alone: an empty reply reads.
    let empty = encode_reply(&[], false, &fmt).unwrap();
    assert!(decode_reply(&empty, &fmt).unwrap().is_empty());
}

#[test]
fn reply_of_another_checkpoint_is_refused() {
    let en = en();
    let art = encode_reply(&reply_steps(&en, 4, 4, 0), true, &en).unwrap();
    let mut ja = en.clone();
    ja.language = "ja".into();
    expect_invalid(decode_reply(&art, &ja), &["`language`", "\"ja\""]);
    let mut other = en.clone();
    other.codebooks = 4;
    expect_invalid(decode_reply(&art, &other), &["`codebooks` is 8"]);
}

// ---------------------------------------------------------------------------
// reading history
// ---------------------------------------------------------------------------

#[test]
fn history_reads_in_order() {
    let ctx = Ctx::new();
    let (arts, replies) = history(&ctx.fmt, &[(6, 13), (12, 30), (1, 0)]);
    let h = read_history(&arts, &ctx.cfg(), 100).unwrap();
    assert_eq!(h.turns.len(), 3);
    for (t, turn) in h.turns.iter().enumerate() {
        assert_eq!(turn.reply, replies[t]);
        // 24 kHz seconds resampled to 16 kHz.
        let want = ((0.2 + 0.1 * t as f64) * 16_000.0).round() as usize;
        let Question::Audio(samples) = &turn.question else {
            panic!("turn {t}: a spoken question read as text");
        };
        assert!(samples.len().abs_diff(want) <= 1, "{}", samples.len());
    }
    assert!(h.budget.is_active());
    assert_eq!(h.budget.turns(), 3);
    assert_eq!(
        h.budget.known_steps(),
        ctx.markup.text_steps(replies.iter())
    );
    assert_eq!(h.replies().count(), 3);

    // No history: a first turn, held to the context alone.
    let h = read_history(&[], &ctx.cfg(), 1_000_000).unwrap();
    assert!(h.turns.is_empty());
    assert!(!h.budget.is_active());
    assert_eq!(h.budget.known_steps(), ctx.markup.markup_steps(0));
    let mut b = h.budget.clone();
    b.add_question(0, 100_000).unwrap();
    b.check_prompt(100_000).unwrap();

    // A question may also be labelled as audio.
    let (mut arts, _) = history(&ctx.fmt, &[(2, 2)]);
    arts[0].kind = ArtifactKind::Audio;
    read_history(&arts, &ctx.cfg(), 10).unwrap();
}

fn text_artifact(id: &str, payload: &[u8], by_meta: bool) -> Artifact {
    let mut meta = BTreeMap::new();
    if by_meta {
        meta.insert("format".to_owned(), json!("text"));
    }
    Artifact {
        id: id.into(),
        kind: if by_meta {
            ArtifactKind::Custom
        } else {
            ArtifactKind::Text
        },
        payload: payload.to_vec(),
        meta,
    }
}

#[test]
fn typed_questions_and_replies_are_read_as_their_tokens() {
    let ctx = Ctx::new();
    let (spoken, replies) = history(&ctx.fmt, &[(3, 4)]);
    // A typed question (kind text) with a text-only reply (meta format=text, as the C ABI
    // marks it), a spoken turn, then a typed question with no reply yet: the pending one.
    let mut arts = vec![
        text_artifact(QUESTION_ID, b"Hi there?", false),
        text_artifact(REPLY_ID, b"Hello.", true),
    ];
    arts.extend(spoken);
    arts.push(text_artifact(QUESTION_ID, b"And then?", true));
    let h = read_history(&arts, &ctx.cfg(), 100).unwrap();
    assert_eq!(h.turns.len(), 2);
    assert_eq!(h.turns[0].question, Question::Text(bytes("Hi there?")));
    let typed_reply = Reply {
        steps: bytes("Hello.").into_iter().map(ReplyStep::Text).collect(),
        ended: true,
    };
    assert_eq!(h.turns[0].reply, typed_reply);
    assert!(matches!(h.turns[1].question, Question::Audio(_)));
    assert_eq!(h.turns[1].reply, replies[0]);
    assert_eq!(h.pending, Some(Question::Text(bytes("And then?"))));
    // The typed reply's tokens count toward the limit like a reply's steps.
    assert_eq!(
        h.budget.known_steps(),
        ctx.markup.text_steps([&typed_reply, &replies[0]])
    );

    // Control tokens in a typed question are read as add_text reads them; a typed reply that
    // holds <|im_end|> (which would end it early) is the request's fault, as is text that is
    // not UTF-8.
    let special = [text_artifact(QUESTION_ID, b"<|im_end|>", false)];
    let h = read_history(&special, &ctx.cfg(), 100).unwrap();
    assert_eq!(h.pending, Some(Question::Text(vec![7])));
    let bad_reply = [
        text_artifact(QUESTION_ID, b"Hi", false),
        text_artifact(REPLY_ID, b"ok<|im_end|>", false),
    ];
    expect_invalid(
        read_history(&bad_reply, &ctx.cfg(), 100),
        &["turn 1", REPLY_ID, "typed reply", "<|im_end|>"],
    );
    let not_utf8 = [text_artifact(QUESTION_ID, &[0xff, 0xfe], true)];
    expect_invalid(
        read_history(&not_utf8, &ctx.cfg(), 100),
        &["turn 1", QUESTION_ID, "UTF-8"],
    );
}

/// A tool's result as the question artifact a front end sends: text with meta role=tool.
fn tool_result(output: &str) -> Artifact {
    let mut a = text_artifact(QUESTION_ID, output.as_bytes(), false);
    a.meta.insert("role".to_owned(), json!("tool"));
    a
}

#[test]
fn a_tool_result_is_a_turn_of_role_tool_after_its_reply() {
    let ctx = Ctx::new();
    // A typed question, a reply that called a tool, the tool's result (pending: the request
    // asks it).
    let arts = vec![
        text_artifact(QUESTION_ID, b"Weather?", false),
        text_artifact(
            REPLY_ID,
            b"<|tool_call_start|>[w()]<|tool_call_end|>",
            false,
        ),
        tool_result("21 C"),
    ];
    let h = read_history(&arts, &ctx.cfg(), 100).unwrap();
    let mut wrapped = vec![12];
    wrapped.extend(bytes("21 C"));
    wrapped.push(13);
    assert_eq!(h.pending, Some(Question::Tool(wrapped.clone())));
    let mut call = vec![10];
    call.extend(bytes("[w()]"));
    call.push(11);
    assert_eq!(
        h.turns[0].reply.steps,
        call.iter().map(|&t| ReplyStep::Text(t)).collect::<Vec<_>>()
    );

    // The prompt: the reply's chunk ends by opening the tool's turn, whose text follows, then
    // the assistant's turn.
    let layouts = [
        h.turns[0].question.layout(0),
        h.pending.clone().unwrap().layout(0),
    ];
    let prompt = ctx
        .markup
        .build_mixed(&ctx.fmt, h.replies(), &layouts)
        .unwrap();
    let ids: Vec<u32> = prompt
        .pieces()
        .iter()
        .flat_map(|p| match p {
            PromptPiece::Text(ids) => ids.clone(),
            other => panic!("a typed conversation has no {other:?}"),
        })
        .collect();
    let mut tail = vec![7];
    tail.extend(bytes("\n"));
    tail.push(6);
    tail.extend(bytes("tool\n"));
    tail.extend(&wrapped);
    tail.push(7);
    tail.extend(bytes("\n"));
    tail.push(6);
    tail.extend(bytes("assistant\n"));
    assert!(ids.ends_with(&tail), "{ids:?}");
    let mut reply_then_tool = call.clone();
    reply_then_tool.extend(&tail[..tail.len() - 1 - bytes("assistant\n").len()]);
    assert!(ids
        .windows(reply_then_tool.len())
        .any(|w| w == reply_then_tool.as_slice()));
    // Its length is what the budget knows at least.
    assert!(h.budget.known_steps() <= prompt.len());

    // A tool's result first (no reply to answer), one that is not text, an unknown role.
    expect_invalid(
        read_history(&[tool_result("x")], &ctx.cfg(), 100),
        &["input artifact 0", "no reply before it"],
    );
    let mut not_text = arts.clone();
    not_text[2].kind = ArtifactKind::Custom;
    expect_invalid(
        read_history(&not_text, &ctx.cfg(), 100),
        &["turn 2", "role `tool`", "not text"],
    );
    let mut odd = arts.clone();
    odd[2].meta.insert("role".to_owned(), json!("system"));
    expect_invalid(read_history(&odd, &ctx.cfg(), 100), &["turn 2", "role"]);
}

#[test]
fn history_rejections_name_the_problem() {
    let ctx = Ctx::new();
    let (good, _) = history(&ctx.fmt, &[(3, 4), (5, 6)]);
    let read = |arts: &[Artifact]| read_history(arts, &ctx.cfg(), 50);

    // Unknown artifact id.
    let mut a = good.clone();
    a[2].id = "lfm2_audio.questions".into();
    expect_invalid(
        read(&a),
        &["input artifact 2", "unknown id `lfm2_audio.questions`"],
    );
    let mut a = good.clone();
    a.push(Artifact {
        id: "speaker".into(),
        kind: ArtifactKind::Audio,
        payload: vec![],
        meta: BTreeMap::new(),
    });
    expect_invalid(read(&a), &["input artifact 4", "unknown id `speaker`"]);

    // Out of turn: a reply first, a reply twice, two questions in a row.
    let a = vec![good[1].clone(), good[0].clone()];
    expect_invalid(read(&a), &["input artifact 0", "out of turn"]);
    let a = vec![good[0].clone(), good[1].clone(), good[3].clone()];
    expect_invalid(read(&a), &["input artifact 2", "out of turn"]);
    let a = vec![good[0].clone(), good[2].clone(), good[3].clone()];
    expect_invalid(
        read(&a),
        &["turn 1", "input artifact 0", "has no lfm2_audio.reply"],
    );

    // A question without its reply (the last one) is the pending question: the request's own
    // when it carries none apart (the session refuses it beside a question of its own).
    let a = good[..3].to_vec();
    let h = read(&a).unwrap();
    assert_eq!(h.turns.len(), 1);
    assert!(matches!(h.pending, Some(Question::Audio(_))));

    // A question of the wrong kind.
    let mut a = good.clone();
    a[2].kind = ArtifactKind::AcousticTokens;
    expect_invalid(read(&a), &["turn 2", "kind acoustic_tokens"]);

    // A WAV that does not read, and one over the length limit.
    let mut a = good.clone();
    a[2].payload = b"RIFF....not a wav at all".to_vec();
    expect_invalid(read(&a), &["turn 2", "input artifact 2", "WAV"]);
    let mut a = good.clone();
    a[0].payload.clear();
    expect_invalid(read(&a), &["turn 1", "input artifact 0", "WAV"]);
    let mut cfg = ctx.cfg();
    cfg.wav.max_seconds = 0.25;
    expect_invalid(
        read_history(&good, &cfg, 50),
        &["turn 2", "input artifact 2", "over the 0.250 s limit"],
    );

    // Replies that do not fit: kind, format, meta keys and values, length, tokens, codes.
    type Edit = fn(&mut Artifact);
    let edits: Vec<(Edit, &[&str])> = vec![
        (|a| a.kind = ArtifactKind::Custom, &["kind is custom"]),
        (
            |a| {
                a.meta.insert("format".into(), json!("lfm2_audio.reply/0"));
            },
            &["`format`"],
        ),
        (
            |a| {
                a.meta.remove("ended");
            },
            &["`ended` is missing"],
        ),
        (
            |a| {
                a.meta.insert("voice".into(), json!("x"));
            },
            &["unknown meta key `voice`"],
        ),
        (
            |a| {
                a.meta.insert("language".into(), json!("ja"));
            },
            &["`language`"],
        ),
        (
            |a| {
                a.meta.insert("audio_vocab_size".into(), json!(2048));
            },
            &["`audio_vocab_size`"],
        ),
        (
            |a| {
                a.meta.insert("steps".into(), json!(12));
            },
            &["payload holds 11 steps, its meta says 12"],
        ),
        (
            |a| {
                a.payload.truncate(a.payload.len() - 4);
            },
            &["ends inside step 10"],
        ),
        (
            |a| a.payload[..4].copy_from_slice(&70000i32.to_le_bytes()),
            &["step 0", "text id 70000"],
        ),
        (
            |a| a.payload[..4].copy_from_slice(&7i32.to_le_bytes()),
            &["step 0", "<|im_end|>"],
        ),
        (
            |a| {
                let n = a.payload.len();
                a.payload[n - 4..].copy_from_slice(&2049i32.to_le_bytes());
            },
            &["step 10", "code 2049 of codebook 7"],
        ),
    ];
    for (edit, needles) in edits {
        let mut a = good.clone();
        edit(&mut a[3]);
        let r = read(&a);
        expect_invalid(r, needles);
        let mut a = good.clone();
        edit(&mut a[3]);
        expect_invalid(read(&a), &["turn 2", "input artifact 3"]);
    }
}

// ---------------------------------------------------------------------------
// the limit
// ---------------------------------------------------------------------------

#[test]
fn limit_boundary_on_reply_counts() {
    let ctx = Ctx::new();
    let (arts, replies) = history(&ctx.fmt, &[(6, 30), (20, 50)]);
    let text = ctx.markup.text_steps(replies.iter());
    assert_eq!(text, ctx.markup.markup_steps(2) + 106);
    let room = CONVERSATION_LIMIT - text;

    let h = read_history(&arts, &ctx.cfg(), room).unwrap();
    assert_eq!(h.budget.known_steps() + room, 8192);
    expect_capacity(
        read_history(&arts, &ctx.cfg(), room + 1),
        &["max_tokens", "before their payloads are read"],
    );

    // max_tokens alone over the limit, with history.
    expect_capacity(read_history(&arts, &ctx.cfg(), 9000), &["max_tokens 9000"]);
    // The same max_tokens on a first turn is the context's business.
    read_history(&[], &ctx.cfg(), 9000).unwrap();
}

#[test]
fn limit_boundary_after_questions_and_on_the_whole_prompt() {
    let ctx = Ctx::new();
    let (arts, _) = history(&ctx.fmt, &[(6, 30), (20, 50)]);
    let max_tokens = 1000;
    let h = read_history(&arts, &ctx.cfg(), max_tokens).unwrap();
    let known = h.budget.known_steps();
    let room = CONVERSATION_LIMIT - max_tokens - known;

    // Three questions (two earlier, the new one) that fill the room exactly.
    let rows = [room / 3, room / 3, room - 2 * (room / 3)];
    let mut b = h.budget.clone();
    for (q, &r) in rows.iter().enumerate() {
        b.add_question(q, r).unwrap();
    }
    assert_eq!(b.known_steps() + max_tokens, 8192);
    let prompt = ctx.markup.build(&ctx.fmt, h.replies(), &rows).unwrap();
    assert_eq!(prompt.len(), b.known_steps());
    b.check_prompt(prompt.len()).unwrap();
    expect_capacity(b.check_prompt(prompt.len() + 1), &["the whole prompt"]);

    // One row more on the second question fails right after it is encoded.
    let mut b = h.budget.clone();
    b.add_question(0, rows[0]).unwrap();
    expect_capacity(
        b.add_question(1, rows[1] + rows[2] + 1),
        &["after encoding question 2"],
    );

    // The helper itself.
    check_room(8000, 192, 8192, "x").unwrap();
    expect_capacity(check_room(8000, 193, 8192, "x"), &["8193"]);
    expect_capacity(check_room(usize::MAX, 1, 8192, "x"), &[]);
    let b = ConversationBudget::new(8192, 0, 1, 8192);
    b.check_prompt(8192).unwrap();
}

#[test]
fn limit_fails_before_payloads_are_read() {
    let ctx = Ctx::new();
    let (good, _) = history(&ctx.fmt, &[(3, 4)]);

    // A reply whose meta says 9000 steps over a garbage payload: capacity, not a payload error.
    let mut huge = good[1].clone();
    huge.meta.insert("steps".into(), json!(9000));
    huge.payload = vec![0xab; 7];
    let mut garbage_question = good[0].clone();
    garbage_question.payload = b"not a wav".to_vec();
    expect_capacity(
        read_history(&[garbage_question.clone(), huge.clone()], &ctx.cfg(), 1),
        &["turns 1 to 1"],
    );

    // The reading stops at the first reply that leaves no room: later artifacts, even ones
    // that would be refused, are not looked at.
    let mut a = good.clone();
    a.push(garbage_question.clone());
    a.push(huge.clone());
    a.push(Artifact {
        id: "bogus".into(),
        kind: ArtifactKind::Custom,
        payload: vec![],
        meta: BTreeMap::new(),
    });
    expect_capacity(read_history(&a, &ctx.cfg(), 1), &["turns 1 to 2"]);

    // A step count no usize holds still fails as capacity.
    huge.meta.insert("steps".into(), json!(u64::MAX));
    expect_capacity(read_history(&[good[0].clone(), huge], &ctx.cfg(), 0), &[]);
}

// ---------------------------------------------------------------------------
// the prompt
// ---------------------------------------------------------------------------

/// One position of a prompt.
#[derive(Debug, Clone, PartialEq)]
enum Pos {
    Tok(u32),
    Audio { question: usize, row: usize },
    Frame(Vec<u32>),
}

fn flatten(p: &Prompt) -> Vec<Pos> {
    let mut out = Vec::new();
    for piece in p.pieces() {
        match piece {
            PromptPiece::Text(ids) => out.extend(ids.iter().map(|&i| Pos::Tok(i))),
            PromptPiece::Audio { question, rows, .. } => {
                out.extend((0..*rows).map(|row| Pos::Audio {
                    question: *question,
                    row,
                }))
            }
            PromptPiece::Frame(c) => out.push(Pos::Frame(c.clone())),
        }
    }
    out
}

/// The expected prompt, written out from the chat template by hand.
fn expected(replies: &[Reply], rows: &[usize]) -> Vec<Pos> {
    let toks = |v: &[u32]| v.iter().map(|&i| Pos::Tok(i)).collect::<Vec<_>>();
    let (bos, im_start, im_end) = (1, 6, 7);
    let mut want = toks(&[bos, im_start]);
    want.extend(toks(&bytes("system\n")));
    want.extend(toks(&bytes("Respond with interleaved text and audio.")));
    want.extend(toks(&[im_end]));
    want.extend(toks(&bytes("\n")));
    want.extend(toks(&[im_start]));
    want.extend(toks(&bytes("user\n")));
    for (q, &n) in rows.iter().enumerate() {
        want.extend((0..n).map(|row| Pos::Audio { question: q, row }));
        want.push(Pos::Tok(im_end));
        want.extend(toks(&bytes("\n")));
        want.push(Pos::Tok(im_start));
        want.extend(toks(&bytes("assistant\n")));
        if let Some(r) = replies.get(q) {
            for s in &r.steps {
                want.push(match s {
                    ReplyStep::Text(i) => Pos::Tok(*i),
                    ReplyStep::Frame(c) => Pos::Frame(c.clone()),
                });
            }
            want.push(Pos::Tok(im_end));
            want.extend(toks(&bytes("\n")));
            want.push(Pos::Tok(im_start));
            want.extend(toks(&bytes("user\n")));
        }
    }
    want
}

#[test]
fn prompt_layout_for_zero_one_two_earlier_turns() {
    let ctx = Ctx::new();
    let tok = tokenizer();
    let (_, replies) = history(&ctx.fmt, &[(6, 13), (4, 2)]);
    // A reply cut mid-frame run, without an end-of-audio frame, goes in as it is.
    let cut = Reply {
        steps: reply_steps(&ctx.fmt, 6, 12, 5)[..15].to_vec(),
        ended: false,
    };
    let replies = [replies[0].clone(), cut, replies[1].clone()];
    for turns in 0..=2 {
        let rows: Vec<usize> = (0..=turns).map(|q| 5 + 3 * q).collect();
        let p = ctx
            .markup
            .build(&ctx.fmt, &replies[..turns], &rows)
            .unwrap();
        let want = expected(&replies[..turns], &rows);
        assert_eq!(flatten(&p), want, "{turns} earlier turns");
        assert_eq!(p.len(), want.len());
        assert_eq!(p.audio_rows(), rows.iter().sum::<usize>());
        assert_eq!(p.text_steps(), p.len() - p.audio_rows());
        assert_eq!(p.text_steps(), ctx.markup.text_steps(&replies[..turns]));
        let frames: Vec<(usize, Vec<u32>)> = want
            .iter()
            .enumerate()
            .filter_map(|(i, w)| match w {
                Pos::Frame(c) => Some((i, c.clone())),
                _ => None,
            })
            .collect();
        let got: Vec<(usize, Vec<u32>)> = p
            .frames()
            .into_iter()
            .map(|(i, c)| (i, c.to_vec()))
            .collect();
        assert_eq!(got, frames);
        // Audio rows count across questions.
        let firsts: Vec<usize> = p
            .pieces()
            .iter()
            .filter_map(|x| match x {
                PromptPiece::Audio { first, .. } => Some(*first),
                _ => None,
            })
            .collect();
        let want_firsts: Vec<usize> = (0..=turns).map(|q| rows[..q].iter().sum()).collect();
        assert_eq!(firsts, want_firsts);
    }

    // Without history it has exactly the pieces S2S builds for one question, in two chunks:
    // the head every conversation shares, then the question with its markup.
    let p = ctx.markup.build(&ctx.fmt, &[], &[17]).unwrap();
    let mut b = PromptBuilder::new(&tok);
    b.system(SYSTEM_S2S).audio(17).assistant_turn();
    assert_eq!(p.pieces(), b.finish().pieces());
    let head = ctx.markup.head_prompt();
    assert!(!head.is_empty() && head.audio_rows() == 0);
    assert_eq!(p.chunk_starts(), &[0, head.len()]);
    assert_eq!(&p.pieces()[..head.pieces().len()], head.pieces());
}

#[test]
fn prompt_build_refuses_bad_input_as_internal() {
    let ctx = Ctx::new();
    let (_, replies) = history(&ctx.fmt, &[(2, 2)]);
    expect_internal(
        ctx.markup.build(&ctx.fmt, &replies, &[3]),
        "1 question row counts for 1 earlier turns",
    );
    expect_internal(
        ctx.markup.build(&ctx.fmt, &replies, &[3, 4, 5]),
        "3 question row counts",
    );
    let bad = Reply {
        steps: vec![ReplyStep::Text(1), ReplyStep::Text(7)],
        ended: true,
    };
    expect_internal(ctx.markup.build(&ctx.fmt, [&bad], &[1, 1]), "turn 1 step 1");
}

// ---------------------------------------------------------------------------
// request options and tasks
// ---------------------------------------------------------------------------

fn opts(pairs: &[(&str, Value)]) -> OptionMap {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), OptionValue::Json(v.clone())))
        .collect()
}

/// A request of `task` with the input it needs, `history` and `options`, resolved by the one
/// validator.
fn resolve(
    task: Task,
    history: &[Artifact],
    options: OptionMap,
) -> Result<ResolvedRequest, EngineError> {
    let wav = encode_wav_24k(&[0.0; 2400]).unwrap();
    let mut r = Request::new(task);
    match task {
        Task::Tts => r.text = Some("Hello.".into()),
        _ => r.audio = Some(AudioInput::Wav(wav)),
    }
    r.history = history.to_vec();
    r.options = options;
    r.resolve(&RequestContext::new("en", 60.0))
}

fn return_codes(r: &ResolvedRequest) -> bool {
    match &r.job {
        Job::S2s(s) => s.return_codes,
        other => panic!("not s2s: {other:?}"),
    }
}

#[test]
fn return_codes_is_a_boolean() {
    assert!(return_codes(&resolve(Task::S2s, &[], opts(&[])).unwrap()));
    for (v, want) in [
        (json!(true), true),
        (json!(false), false),
        (json!("true"), true),
    ] {
        let r = resolve(Task::S2s, &[], opts(&[("return_codes", v)])).unwrap();
        assert_eq!(return_codes(&r), want);
    }
    for v in [json!("yes"), json!(2), json!(null), json!([true])] {
        expect_invalid(
            resolve(Task::S2s, &[], opts(&[("return_codes", v.clone())])),
            &["return_codes", "true or false"],
        );
    }
}

#[test]
fn tasks_take_what_they_take() {
    let ctx = Ctx::new();
    let (arts, _) = history(&ctx.fmt, &[(2, 2)]);
    let rc = opts(&[("return_codes", json!(true))]);
    let rc_false = opts(&[("return_codes", json!(false))]);
    let none = opts(&[]);

    let r = resolve(Task::S2s, &arts, rc.clone()).unwrap();
    match &r.job {
        Job::S2s(s) => assert!(s.return_codes && s.history.len() == arts.len()),
        other => panic!("{other:?}"),
    }
    let mut other = arts.clone();
    other[0].id = "voice".into();
    expect_invalid(
        resolve(Task::S2s, &other, none.clone()),
        &["input artifact 0", "unknown id `voice`"],
    );

    for task in [Task::Asr, Task::Tts] {
        resolve(task, &[], none.clone()).unwrap();
        expect_invalid(
            resolve(task, &[], rc.clone()),
            &["return_codes", task.name()],
        );
        expect_invalid(resolve(task, &[], rc_false.clone()), &["return_codes"]);
        expect_invalid(
            resolve(task, &arts, none.clone()),
            &["input artifact 0", "lfm2_audio.question", task.name()],
        );
        expect_invalid(
            resolve(task, &arts[1..], none.clone()),
            &["lfm2_audio.reply", "only s2s"],
        );
    }
    // Unknown keys are named, with what the task takes.
    expect_invalid(
        resolve(Task::S2s, &[], opts(&[("retrun_codes", json!(true))])),
        &["unknown request option `retrun_codes`", "return_codes"],
    );
    for task in [Task::Asr, Task::Tts] {
        expect_invalid(
            resolve(task, &[], opts(&[("temprature", json!(0.5))])),
            &["unknown request option `temprature`", task.name()],
        );
    }
    // The artifact half alone, for typed requests.
    assert!(check_artifacts(Task::S2s, &arts).unwrap());
    assert!(!check_artifacts(Task::S2s, &[]).unwrap());
    expect_invalid(check_artifacts(Task::Asr, &arts), &["only s2s"]);
    // A reply id constant the checks use.
    assert_eq!(REPLY_ID, "lfm2_audio.reply");
}
