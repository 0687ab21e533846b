//! Conversations that mix typed and spoken turns against liquid-audio 1.3.0 on the tiny
//! synthetic checkpoint: each turn run through the engine's one [`Request`] (earlier turns as
//! history artifacts, the new question as text or audio) gives liquid-audio's greedy replies
//! (`ChatState.add_text` / `add_audio`, replies appended as its multi-turn demo does), and the
//! last turn's prompt is liquid-audio's position for position: token ids, audio-in rows, and the
//! earlier replies' codes.
//!
//! The fixture is `tests/fixtures/lfm2_tiny/text_turns_reference.safetensors`, written by
//! `tests/reference/make_text_turns_reference.py` (its header documents each tensor).

mod common;

use std::sync::OnceLock;

use audio_engine::lfm2_audio::conversation::{
    decode_reply, read_history, ChatMarkup, HistoryConfig, QuestionLayout, ReplyStep,
    CONVERSATION_LIMIT,
};
use audio_engine::lfm2_audio::internals::audio::ReadOptions;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::prompt::{PromptPiece, SYSTEM_S2S};
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, AudioInput, Lfm2Audio, Outcome, Request, RequestContext, Session,
    SessionOptions, Task, QUESTION_ID, REPLY_ID,
};
use audio_tooling::safetensors::{Dtype, SafeTensors};

use common::lfm2_tiny::{input_signal, reference};
use common::package::engine;
use common::wav::mono_i16;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/lfm2_tiny/text_turns_reference.safetensors"
);

/// The fixture, checked to come from the checkpoint the main reference fixture came from (the
/// one `common::package` converts).
fn fixture() -> &'static SafeTensors {
    static F: OnceLock<SafeTensors> = OnceLock::new();
    F.get_or_init(|| {
        let f = SafeTensors::open(FIXTURE).expect("open the text turns fixture");
        for key in ["digest_model", "digest_tokenizer"] {
            assert_eq!(
                f.metadata().get(key).map(String::as_str),
                Some(reference().meta(key)),
                "{key}: rerun tests/reference/make_text_turns_reference.py"
            );
        }
        f
    })
}

fn meta(key: &str) -> &'static str {
    fixture()
        .metadata()
        .get(key)
        .unwrap_or_else(|| panic!("fixture metadata has no `{key}`"))
}

fn i64s(name: &str) -> Vec<i64> {
    let t = fixture().tensor(name).unwrap();
    assert_eq!(t.dtype, Dtype::I64, "{name}");
    t.data
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Steps tensor `name` ([n, 9]: text `[tok, -1 x8]`, frame `[-1, c0..c7]`).
fn steps(name: &str) -> Vec<ReplyStep> {
    i64s(name)
        .chunks_exact(9)
        .map(|r| match r[0] {
            -1 => ReplyStep::Frame(r[1..].iter().map(|&c| c as u32).collect()),
            t => ReplyStep::Text(t as u32),
        })
        .collect()
}

/// One prompt position as liquid-audio's `ChatState` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pos {
    Text(u32),
    AudioIn,
    AudioOut(Vec<u32>),
}

/// Conversation `c`'s last prompt from the fixture.
fn fixture_prompt(c: &str) -> Vec<Pos> {
    let ids = i64s(&format!("{c}_prompt_ids"));
    let flags = i64s(&format!("{c}_prompt_modality"));
    let codes = i64s(&format!("{c}_prompt_codes"));
    let mut frames = codes.chunks_exact(8);
    let out: Vec<Pos> = ids
        .iter()
        .zip(&flags)
        .map(|(&id, &f)| match f {
            1 => Pos::Text(id as u32),
            2 => Pos::AudioIn,
            3 => Pos::AudioOut(
                frames
                    .next()
                    .expect("as many codes as audio-out positions")
                    .iter()
                    .map(|&c| c as u32)
                    .collect(),
            ),
            other => panic!("modality {other} in the {c} prompt"),
        })
        .collect();
    assert!(frames.next().is_none(), "codes left over in the {c} prompt");
    out
}

/// The lengths of the runs of audio-in positions: each spoken question's rows, in order.
fn audio_runs(p: &[Pos]) -> Vec<usize> {
    let mut runs: Vec<usize> = Vec::new();
    let mut in_run = false;
    for pos in p {
        let audio = *pos == Pos::AudioIn;
        match (audio, in_run) {
            (true, true) => *runs.last_mut().expect("a run started") += 1,
            (true, false) => runs.push(1),
            _ => {}
        }
        in_run = audio;
    }
    runs
}

/// The first `n` samples of the fixtures' input signal as 16-bit WAV bytes (the signal is
/// 16-bit integers over 32768, so this is exactly what liquid-audio was given).
fn signal_wav(n: usize) -> Vec<u8> {
    let s = input_signal();
    mono_i16(16_000, s[..n].iter().map(|&x| (x * 32768.0) as i16))
}

fn spoken(wav: Vec<u8>) -> Artifact {
    Artifact {
        id: QUESTION_ID.into(),
        kind: ArtifactKind::Custom,
        payload: wav,
        meta: Default::default(),
    }
}

fn typed(id: &str, text: &str) -> Artifact {
    Artifact {
        id: id.into(),
        kind: ArtifactKind::Text,
        payload: text.as_bytes().to_vec(),
        meta: Default::default(),
    }
}

/// The new question of a turn.
enum Ask {
    Text(&'static str),
    Audio(Vec<u8>),
}

/// One greedy turn through the request model (the default system prompt, as the fixture's).
fn turn(e: &Lfm2Audio, history: &[Artifact], ask: &Ask, max_tokens: usize) -> Outcome {
    let mut req = Request {
        history: history.to_vec(),
        ..Request::new(Task::S2s)
    }
    .option("max_tokens", max_tokens.to_string().as_str())
    .option("temperature", "0");
    match ask {
        Ask::Text(t) => req.text = Some((*t).to_owned()),
        Ask::Audio(wav) => req.audio = Some(AudioInput::Wav(wav.clone())),
    }
    let job = req
        .resolve(&RequestContext::new("en", 60.0))
        .expect("a valid request")
        .job;
    Session::new(e.clone(), SessionOptions::default())
        .run(&job, &mut |_| true)
        .expect("the turn runs")
}

fn reply_steps(e: &Lfm2Audio, o: &Outcome) -> Vec<ReplyStep> {
    let art = o.artifact.as_ref().expect("return_codes defaults to true");
    decode_reply(art, &e.reply_format()).unwrap().steps
}

/// The engine's prompt for `history` (with a pending typed question, or `audio_last`: a spoken
/// question's rows), laid out by the conversation module, as positions.
fn engine_prompt(
    e: &Lfm2Audio,
    history: &[Artifact],
    rows: &[usize],
    audio_last: bool,
) -> Vec<Pos> {
    let fmt = e.reply_format();
    let markup = ChatMarkup::new(e.tokenizer(), SYSTEM_S2S);
    let cfg = HistoryConfig {
        format: &fmt,
        markup: &markup,
        limit: CONVERSATION_LIMIT,
        wav: ReadOptions::default(),
        tokenizer: e.tokenizer(),
    };
    let h = read_history(history, &cfg, 16).unwrap();
    assert_eq!(h.pending.is_none(), audio_last);
    let mut rows = rows.iter().copied();
    let mut layouts: Vec<QuestionLayout> = h
        .turns
        .iter()
        .map(|t| &t.question)
        .chain(h.pending.as_ref())
        .map(|q| q.layout(0))
        .map(|l| match l {
            QuestionLayout::Audio { .. } => QuestionLayout::Audio {
                rows: rows.next().expect("a row count per spoken question"),
            },
            text => text,
        })
        .collect();
    if audio_last {
        layouts.push(QuestionLayout::Audio {
            rows: rows.next().expect("the new question's rows"),
        });
    }
    assert!(rows.next().is_none());
    let p = markup.build_mixed(&fmt, h.replies(), &layouts).unwrap();
    let mut out = Vec::new();
    for piece in p.pieces() {
        match piece {
            PromptPiece::Text(ids) => out.extend(ids.iter().map(|&i| Pos::Text(i))),
            PromptPiece::Audio { rows, .. } => out.extend((0..*rows).map(|_| Pos::AudioIn)),
            PromptPiece::Frame(c) => out.push(Pos::AudioOut(c.clone())),
        }
    }
    out
}

fn first_difference<T: PartialEq>(a: &[T], b: &[T]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then_some(a.len().min(b.len())))
}

#[test]
fn typed_then_spoken_equals_liquid_audio() {
    assert_eq!(meta("system"), SYSTEM_S2S);
    let e = engine(Quant::F32);
    let want1 = steps("two_reply1_steps");
    let q1 = Ask::Text(meta("two_q1"));
    let o1 = turn(&e, &[], &q1, want1.len());
    assert_eq!(reply_steps(&e, &o1), want1, "turn 1 (typed question)");
    assert!(!o1.ended, "cut at max_tokens, as liquid-audio's");

    let history = vec![
        typed(QUESTION_ID, meta("two_q1")),
        o1.artifact.clone().unwrap(),
    ];
    let want = fixture_prompt("two");
    let got = engine_prompt(&e, &history, &audio_runs(&want), true);
    assert_eq!(first_difference(&got, &want), None, "the turn 2 prompt");

    let want2 = steps("two_steps");
    let n = input_signal().len();
    let o2 = turn(&e, &history, &Ask::Audio(signal_wav(n)), want2.len());
    assert_eq!(
        o2.prompt_positions,
        want.len(),
        "the spoken question's rows"
    );
    assert_eq!(reply_steps(&e, &o2), want2, "turn 2 (spoken question)");
}

#[test]
fn spoken_typed_with_a_typed_reply_then_typed_equals_liquid_audio() {
    assert_eq!(meta("system"), SYSTEM_S2S);
    let e = engine(Quant::F32);
    let samples: usize = meta("three_q1_samples").parse().unwrap();
    let q1 = signal_wav(samples);
    let want1 = steps("three_reply1_steps");
    let o1 = turn(&e, &[], &Ask::Audio(q1.clone()), want1.len());
    assert_eq!(reply_steps(&e, &o1), want1, "turn 1 (spoken question)");

    // Turn 2 is typed both ways: the client holds a text-only assistant reply.
    let history = vec![
        spoken(q1),
        o1.artifact.clone().unwrap(),
        typed(QUESTION_ID, meta("three_q2")),
        typed(REPLY_ID, meta("three_r2")),
    ];
    let mut pending = history.clone();
    pending.push(typed(QUESTION_ID, meta("three_q3")));
    let want = fixture_prompt("three");
    let got = engine_prompt(&e, &pending, &audio_runs(&want), false);
    assert_eq!(first_difference(&got, &want), None, "the turn 3 prompt");

    let want3 = steps("three_steps");
    let o3 = turn(&e, &history, &Ask::Text(meta("three_q3")), want3.len());
    assert_eq!(o3.prompt_positions, want.len());
    assert_eq!(reply_steps(&e, &o3), want3, "turn 3 (typed question)");
}
