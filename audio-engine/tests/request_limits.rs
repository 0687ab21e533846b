//! The request-size limits of `lfm2_audio::limits` through the Rust API, on the tiny package:
//! for each, a request at the limit is not refused by it and one past it is a capacity error
//! naming the limit, raised before the rest of the request is looked at.

mod common;

use audio_engine::lfm2_audio::conversation::{check_artifacts, encode_reply, Task};
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::limits::{
    MAX_ARTIFACTS, MAX_ARTIFACT_BYTES, MAX_SYSTEM_PROMPT_BYTES, MAX_TTS_TEXT_BYTES,
};
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, AsrOptions, EngineError, Lfm2Audio, S2sOptions, S2sRequest, Session,
    SessionOptions, TtsOptions, QUESTION_ID,
};

use common::lfm2_tiny::input_signal;
use common::package::engine;

fn model() -> &'static Lfm2Audio {
    static M: std::sync::OnceLock<Lfm2Audio> = std::sync::OnceLock::new();
    M.get_or_init(|| engine(Quant::F32))
}

/// Asserts `r` is a capacity error whose message names `limit` and its value.
fn refused_by<T: std::fmt::Debug>(r: Result<T, EngineError>, limit: &str, value: usize) {
    match r {
        Err(e) => {
            let msg = e.to_string();
            assert!(e.is_capacity(), "expected a capacity error, got {e:?}");
            assert!(
                msg.contains(limit) && msg.contains(&value.to_string()),
                "the message does not name {limit} = {value}: {msg}"
            );
        }
        Ok(v) => panic!("expected {limit} to refuse the request, got {v:?}"),
    }
}

/// Asserts `r` was not refused by `limit` (it may succeed or fail for another reason).
fn not_refused_by<T>(r: &Result<T, EngineError>, limit: &str) {
    if let Err(e) = r {
        assert!(!e.to_string().contains(limit), "refused by {limit}: {e}");
    }
}

/// 16 kHz mono 16-bit WAV bytes of the tiny fixture's first half second.
fn question_wav() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for s in &input_signal()[..8_000] {
        w.write_sample((s.clamp(-1.0, 1.0) * 32767.0) as i16)
            .unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

fn one_step() -> TtsOptions {
    TtsOptions {
        max_new_tokens: 1,
        ..TtsOptions::default()
    }
}

#[test]
fn tts_text_at_the_limit_is_spoken_and_one_byte_more_is_refused() {
    let m = model();
    // 4-byte sentences: the first 400-character chunk is generated (one step, so the reply is
    // cut and the remaining chunks are not run).
    let at = "Hi. ".repeat(MAX_TTS_TEXT_BYTES / 4);
    assert_eq!(at.len(), MAX_TTS_TEXT_BYTES);
    let r = m.tts(&at, &one_step());
    not_refused_by(&r, "MAX_TTS_TEXT_BYTES");
    let r = r.expect("a text at the limit is spoken");
    assert!(!r.ended && !r.steps.is_empty(), "{:?}", r.steps);

    let past = format!("{at}!");
    refused_by(
        m.tts(&past, &one_step()),
        "MAX_TTS_TEXT_BYTES",
        MAX_TTS_TEXT_BYTES,
    );
    refused_by(
        m.tts_stream(&past, &one_step()).map(|_| ()),
        "MAX_TTS_TEXT_BYTES",
        MAX_TTS_TEXT_BYTES,
    );
    let mut s = Session::new(m.clone(), SessionOptions::default());
    refused_by(
        s.tts(&past, &one_step()),
        "MAX_TTS_TEXT_BYTES",
        MAX_TTS_TEXT_BYTES,
    );
}

/// A system prompt of exactly `n` bytes that tokenizes short: `<|audio_start|>` (15 bytes, one
/// token) repeated, padded with letters, so a prompt at the limit fits the default context.
fn system_prompt(n: usize) -> String {
    let unit = "<|audio_start|>";
    let mut s = unit.repeat(n / unit.len());
    s.push_str(&"a".repeat(n - s.len()));
    assert_eq!(s.len(), n);
    s
}

#[test]
fn system_prompt_at_the_limit_runs_and_one_byte_more_is_refused() {
    let m = model();
    let samples = &input_signal()[..8_000];
    let at = AsrOptions {
        max_new_tokens: 1,
        system_prompt: system_prompt(MAX_SYSTEM_PROMPT_BYTES),
    };
    let r = m.asr(samples, &at);
    not_refused_by(&r, "MAX_SYSTEM_PROMPT_BYTES");
    let r = r.expect("ASR with a system prompt at the limit");
    assert!(
        r.prompt_positions > MAX_SYSTEM_PROMPT_BYTES / 15,
        "{}",
        r.prompt_positions
    );

    let past = AsrOptions {
        system_prompt: system_prompt(MAX_SYSTEM_PROMPT_BYTES + 1),
        ..at
    };
    let limit = ("MAX_SYSTEM_PROMPT_BYTES", MAX_SYSTEM_PROMPT_BYTES);
    refused_by(m.asr(samples, &past), limit.0, limit.1);
    let s2s = S2sOptions {
        max_new_tokens: 1,
        system_prompt: past.system_prompt.clone(),
        ..S2sOptions::default()
    };
    refused_by(m.s2s(samples, &s2s), limit.0, limit.1);
    refused_by(
        m.s2s_stream(samples.to_vec(), &s2s).map(|_| ()),
        limit.0,
        limit.1,
    );
    // A session refuses it before reading the question (here not even a WAV).
    let mut session = Session::new(m.clone(), SessionOptions::default());
    let req = S2sRequest {
        question: Vec::new().into(),
        s2s,
        ..S2sRequest::default()
    };
    refused_by(session.s2s(&req), limit.0, limit.1);
}

fn question(payload: Vec<u8>) -> Artifact {
    Artifact {
        id: QUESTION_ID.to_owned(),
        kind: ArtifactKind::Custom,
        payload,
        meta: Default::default(),
    }
}

fn s2s_request(history: Vec<Artifact>) -> S2sRequest {
    S2sRequest {
        question: question_wav().into(),
        history,
        s2s: S2sOptions {
            max_new_tokens: 1,
            ..S2sOptions::default()
        },
        ..S2sRequest::default()
    }
}

#[test]
fn artifact_count_at_the_limit_is_read_and_one_more_is_refused() {
    let m = model();
    let mut session = Session::new(m.clone(), SessionOptions::default());
    // Turns of an empty question and an empty reply (valid meta, no steps): the artifact limit
    // lets MAX_ARTIFACTS of them through, and the conversation limit, which is tighter (every
    // turn takes markup steps), refuses them from the replies' meta.
    let reply = encode_reply(&[], true, &session.reply_format()).unwrap();
    let turns = |n: usize| -> Vec<Artifact> {
        (0..n)
            .flat_map(|_| [question(Vec::new()), reply.clone()])
            .collect()
    };
    let at = turns(MAX_ARTIFACTS / 2);
    assert_eq!(at.len(), MAX_ARTIFACTS);
    assert!(check_artifacts(Task::S2s, &at).unwrap());
    let r = session.s2s(&s2s_request(at));
    not_refused_by(&r, "MAX_ARTIFACTS");
    let e = r.unwrap_err();
    assert!(
        e.is_capacity() && e.to_string().contains("conversation too long"),
        "{e}"
    );

    let mut past = turns(MAX_ARTIFACTS / 2);
    past.push(question(Vec::new()));
    refused_by(
        check_artifacts(Task::S2s, &past),
        "MAX_ARTIFACTS",
        MAX_ARTIFACTS,
    );
    refused_by(
        check_artifacts(Task::Asr, &past),
        "MAX_ARTIFACTS",
        MAX_ARTIFACTS,
    );
    refused_by(
        session.s2s(&s2s_request(past)),
        "MAX_ARTIFACTS",
        MAX_ARTIFACTS,
    );
    // The session still answers.
    session.s2s(&s2s_request(Vec::new())).unwrap();
}

#[test]
fn artifact_bytes_at_the_limit_are_read_and_one_more_is_refused() {
    let m = model();
    let mut session = Session::new(m.clone(), SessionOptions::default());
    let reply = encode_reply(&[], true, &session.reply_format()).unwrap();
    // why: zeroed allocations are mapped lazily and nothing here reads past the first bytes,
    // so a 256 MiB payload costs no memory.
    let turn = |payload_bytes: usize| vec![question(vec![0u8; payload_bytes]), reply.clone()];
    let at = turn(MAX_ARTIFACT_BYTES - reply.payload.len());
    assert!(check_artifacts(Task::S2s, &at).unwrap());
    // Past the limit checks, the question is read and is no WAV.
    let r = session.s2s(&s2s_request(at));
    not_refused_by(&r, "MAX_ARTIFACT_BYTES");
    let e = r.unwrap_err();
    assert!(
        e.is_invalid_request() && e.to_string().contains("WAV"),
        "{e}"
    );

    let past = turn(MAX_ARTIFACT_BYTES - reply.payload.len() + 1);
    refused_by(
        check_artifacts(Task::S2s, &past),
        "MAX_ARTIFACT_BYTES",
        MAX_ARTIFACT_BYTES,
    );
    refused_by(
        session.s2s(&s2s_request(past)),
        "MAX_ARTIFACT_BYTES",
        MAX_ARTIFACT_BYTES,
    );
}
