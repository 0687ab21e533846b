//! The C ABI from C: programs under `tests/c/` compiled against `include/audiocpp.h` and
//! linked with the built library (as `-laudiocpp`), run as child processes. Their outputs are
//! compared byte for byte with the Rust API's on the demo package.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::internals::sampling::SamplerConfig;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    AsrOptions, S2sOptions, S2sRequest, Session, SessionOptions, TtsOptions, TurnResult, Voice,
};
use common::*;

// The settings of tests/c/suite.c.
const ASR_MAX_TOKENS: usize = 24;
const TTS_TEXT: &str = "Hello there, numbers 2024 and voices.";
const TTS_MAX_TOKENS: usize = 32;
const TTS_SEED: u64 = 11;
const S2S_MAX_TOKENS: usize = 40;
const S2S_SEED: u64 = 7;

fn text(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn meta(dir: &Path, stem: &str) -> BTreeMap<String, String> {
    let t = text(dir, &format!("{stem}.reply.meta"));
    let pairs: Vec<(String, String)> = t
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let map: BTreeMap<_, _> = pairs.iter().cloned().collect();
    assert_eq!(map.len(), pairs.len(), "duplicate meta keys: {t}");
    map
}

/// An artifact's meta as the C API spells it.
fn meta_strings(a: &Artifact) -> BTreeMap<String, String> {
    a.meta
        .iter()
        .map(|(k, v)| {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), s)
        })
        .collect()
}

fn tts_options() -> TtsOptions {
    TtsOptions {
        voice: Voice::UkFemale,
        max_new_tokens: TTS_MAX_TOKENS,
        text: SamplerConfig::text(),
        audio: SamplerConfig {
            temperature: 0.8,
            top_k: 64,
            seed: TTS_SEED,
        },
        chunk_chars: 200,
    }
}

fn s2s_request(question: &Pcm, history: Vec<Artifact>) -> S2sRequest {
    S2sRequest {
        question: wav(question).into(),
        history,
        return_codes: true,
        s2s: S2sOptions {
            max_new_tokens: S2S_MAX_TOKENS,
            text: SamplerConfig::text(),
            audio: SamplerConfig {
                temperature: 1.0,
                top_k: 4,
                seed: S2S_SEED,
            },
            ..S2sOptions::default()
        },
    }
}

/// The Rust API's three-turn conversation, with the question WAVs the C client sent as
/// history; also the session's cache figures per turn.
fn rust_conversation(c_out: &Path) -> Vec<(TurnResult, (usize, usize))> {
    let mut session = Session::new(rust_model().clone(), SessionOptions::default());
    let mut history = Vec::new();
    let mut turns = Vec::new();
    for (i, q) in question_signals().iter().enumerate() {
        let t = session.s2s(&s2s_request(q, history.clone())).unwrap();
        let figures = (session.resumed_prefill_steps(), session.reused_questions());
        history.push(Artifact {
            id: QUESTION_ID.to_owned(),
            kind: ArtifactKind::Custom,
            payload: std::fs::read(c_out.join(format!("turn{i}.question.wav"))).unwrap(),
            meta: BTreeMap::new(),
        });
        history.push(t.artifact.clone().unwrap());
        turns.push((t, figures));
    }
    turns
}

fn assert_reply(dir: &Path, stem: &str, turn: &TurnResult) {
    let art = turn.artifact.as_ref().unwrap();
    let payload = std::fs::read(dir.join(format!("{stem}.reply.bin"))).unwrap();
    assert!(payload == art.payload, "{stem}: reply payload differs");
    assert_eq!(meta(dir, stem), meta_strings(art), "{stem}: reply meta");
}

#[test]
fn offline_asr_equals_the_rust_api() {
    let (out, _) = run_case("asr", &[]);
    let q = read_pcm(&inputs().join("asr.pcm"));
    let want = rust_model()
        .asr_wav(
            &wav(&q),
            &AsrOptions {
                max_new_tokens: ASR_MAX_TOKENS,
                ..AsrOptions::default()
            },
        )
        .unwrap();
    assert_eq!(text(&out, "asr.txt"), lfm2_engine::c_text(&want.text));
}

#[test]
fn offline_tts_equals_the_rust_api() {
    let (out, _) = run_case("tts", &[]);
    let got = read_pcm(&out.join("tts.pcm"));
    let want = rust_model().tts(TTS_TEXT, &tts_options()).unwrap();
    assert_eq!((got.rate, got.channels), (24_000, 1));
    assert!(!want.audio.is_empty());
    assert!(bits(&got.samples) == bits(&want.audio), "tts audio differs");
    // A request naming no voice gets the Rust API's default voice, which is audio.cpp's.
    let got = read_pcm(&out.join("tts-default.pcm"));
    let default = TtsOptions {
        voice: Voice::default(),
        ..tts_options()
    };
    assert_eq!(default.voice, Voice::UsMale);
    let want_default = rust_model().tts(TTS_TEXT, &default).unwrap();
    assert!(
        bits(&got.samples) == bits(&want_default.audio),
        "the default voice's audio differs"
    );
    assert!(bits(&want_default.audio) != bits(&want.audio));
}

#[test]
fn a_three_turn_conversation_through_artifacts_equals_the_rust_session() {
    let (out, _) = run_case("s2s", &[]);
    let turns = rust_conversation(&out);
    for (i, (t, figures)) in turns.iter().enumerate() {
        assert_eq!(
            text(&out, &format!("turn{i}.txt")),
            lfm2_engine::c_text(&t.reply.text),
            "turn {i} text"
        );
        let audio = read_pcm(&out.join(format!("turn{i}.pcm")));
        assert!(
            bits(&audio.samples) == bits(&t.reply.audio),
            "turn {i} audio differs"
        );
        assert_reply(&out, &format!("turn{i}"), t);
        let m = meta(&out, &format!("turn{i}"));
        assert_eq!(m["format"], "lfm2_audio.reply/1");
        assert!(m["ended"] == "true" || m["ended"] == "false");
        let c_figures = text(&out, &format!("turn{i}.figures"));
        assert_eq!(
            c_figures.trim(),
            format!("{} {}", figures.0, figures.1),
            "turn {i} figures"
        );
        println!(
            "turn {i}: {} steps, figures {figures:?}",
            t.reply.steps.len()
        );
    }
    assert_eq!(
        turns[2].1 .1, 2,
        "the third turn reuses both earlier questions"
    );
}

#[test]
fn streamed_s2s_events_add_up_to_the_offline_turn() {
    let (out, _) = run_case("s2s_stream", &[]);
    let q = &question_signals()[0];
    let mut session = Session::new(rust_model().clone(), SessionOptions::default());
    let want = session.s2s(&s2s_request(q, Vec::new())).unwrap();
    let want_text = lfm2_engine::c_text(&want.reply.text);
    for stem in ["events", "final", "unpulled"] {
        assert_eq!(text(&out, &format!("{stem}.txt")), want_text, "{stem} text");
        let a = read_pcm(&out.join(format!("{stem}.pcm")));
        assert!(
            bits(&a.samples) == bits(&want.reply.audio),
            "{stem} audio differs"
        );
    }
    assert_reply(&out, "final", &want);
    let events: usize = text(&out, "events.count").trim().parse().unwrap();
    assert!(events > 3, "{events} events");
    // Cut after three events: those are the full stream's first three, and the reply artifact
    // holds a prefix of the full reply's steps, marked as not ended.
    let cut_text = text(&out, "cut_events.txt");
    assert!(want_text.starts_with(&cut_text));
    let cut_audio = read_pcm(&out.join("cut_events.pcm")).samples;
    assert!(!cut_audio.is_empty());
    assert!(bits(&want.reply.audio).starts_with(&bits(&cut_audio)));
    let cut_meta = meta(&out, "cut");
    assert_eq!(cut_meta["ended"], "false");
    let cut_steps: usize = cut_meta["steps"].parse().unwrap();
    assert!(cut_steps < want.reply.steps.len(), "cut {cut_steps} steps");
    let cut_payload = std::fs::read(out.join("cut.reply.bin")).unwrap();
    assert!(want
        .artifact
        .as_ref()
        .unwrap()
        .payload
        .starts_with(&cut_payload));
    assert!(text(&out, "cut.txt").starts_with(&cut_text));
}

#[test]
fn streamed_tts_events_add_up_to_the_offline_audio() {
    let (out, _) = run_case("tts_stream", &[]);
    let want = rust_model().tts(TTS_TEXT, &tts_options()).unwrap();
    for stem in ["events", "final"] {
        let a = read_pcm(&out.join(format!("{stem}.pcm")));
        assert!(
            bits(&a.samples) == bits(&want.audio),
            "{stem} audio differs"
        );
    }
    let events: usize = text(&out, "events.count").trim().parse().unwrap();
    assert!(events > 1);
}

#[test]
fn every_status_code_is_provoked_with_its_message() {
    let (_, o) = run_case("errors", &[]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("every status code provoked"));
}

#[test]
fn handles_are_freed_in_any_order() {
    run_case("frees", &[]);
}

#[test]
fn two_sessions_at_once_give_what_each_gives_alone_with_their_steps_in_shared_ticks() {
    let (_, o) = run_case("threads", &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("step ticks: "), "{stdout}");
}

#[test]
fn a_run_and_a_stream_are_cancelled_from_another_thread() {
    let (out, o) = run_case("cancel", &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("offline run cancelled"));
    // ASR in one chunk: cut between decode steps (suite.c checks it returned within a quarter
    // of the uncancelled run's time), then the session transcribes as the Rust API does.
    assert!(
        stdout.contains("asr cancelled within its chunk"),
        "{stdout}"
    );
    let q = read_pcm(&inputs().join("asr.pcm"));
    let want = rust_model()
        .asr_wav(
            &wav(&q),
            &AsrOptions {
                max_new_tokens: ASR_MAX_TOKENS,
                ..AsrOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        text(&out, "asr_after_cancel.txt"),
        lfm2_engine::c_text(&want.text)
    );
}
