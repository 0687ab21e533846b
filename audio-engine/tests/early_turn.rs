//! A turn started early ([`Session::prepare_turn`], what the realtime route does when the
//! speaker pauses): when the same request follows, it restores its whole prompt (the last
//! position's outputs included) and takes the encoded question, and its text, audio and reply
//! artifact are byte-identical to the same turn on a session without caches. A turn started
//! early for a question that then went on (the speaker spoke again) leaves the real turn's bytes
//! unchanged too, and a bad request fails in `prepare_turn` as it would in `s2s`.

mod common;

use audio_engine::lfm2_audio::conversation::Artifact;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::sampling::SamplerConfig;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    AudioInput, EngineError, S2sOptions, S2sRequest, Session, SessionOptions, TurnResult,
};

use common::package::{engine, uncached_session};
use common::wav::{mono_i16, question, question_artifact};

fn request(question: AudioInput, history: &[Artifact]) -> S2sRequest {
    S2sRequest {
        question,
        history: history.to_vec(),
        return_codes: true,
        s2s: S2sOptions {
            max_new_tokens: 40,
            text: SamplerConfig::GREEDY,
            audio: SamplerConfig::s2s_audio(11),
            ..Default::default()
        },
    }
}

fn same(a: &TurnResult, b: &TurnResult) {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(a.reply.text, b.reply.text);
    assert_eq!(a.reply.steps, b.reply.steps);
    assert_eq!(bits(&a.reply.audio), bits(&b.reply.audio));
    assert_eq!(a.artifact, b.artifact);
}

/// The first `n` samples of question `i` (the audio a pause would have committed).
fn cut_question(i: usize, n: usize) -> AudioInput {
    let wav = question(i);
    let samples = wav[44..]
        .chunks_exact(2)
        .take(n)
        .map(|b| i16::from_le_bytes([b[0], b[1]]));
    mono_i16(16_000, samples).into()
}

#[test]
fn a_turn_started_early_restores_its_whole_prompt_with_the_same_bytes() {
    let e = engine(Quant::F32);
    let mut plain = uncached_session(&e);
    let mut s = Session::new(e.clone(), SessionOptions::default());

    // Turn 1, started early: nothing of its prompt runs again.
    let first = request(question(0).into(), &[]);
    s.prepare_turn(&first).unwrap();
    let t1 = s.s2s(&first).unwrap();
    let p1 = plain.s2s(&first).unwrap();
    same(&t1, &p1);
    assert_eq!(t1.reply.resumed_prefill_steps, t1.reply.prompt_positions);
    let bg = t1
        .background
        .clone()
        .expect("the early turn's work is reported");
    assert!(!bg.stopped && bg.failed.is_none(), "{bg:?}");

    // Turn 2: an early start on a question the speaker then went on with is dropped; the
    // real turn runs its question itself, in the same bytes.
    let history = vec![question_artifact(0), t1.artifact.clone().unwrap()];
    let second = request(question(1).into(), &history);
    s.prepare_turn(&request(cut_question(1, 12_000), &history))
        .unwrap();
    let t2 = s.s2s(&second).unwrap();
    same(&t2, &plain.s2s(&second).unwrap());
    assert!(t2.reply.resumed_prefill_steps < t2.reply.prompt_positions);
    let bg = t2
        .background
        .clone()
        .expect("the dropped early turn is reported");
    println!("dropped early turn: {bg:?}");
    assert!(bg.failed.is_none(), "{bg:?}");

    // Turn 3, started early on a conversation whose reply was being prefilled ahead: the whole
    // prompt comes back again, and the streamed turn gives the same bytes too.
    let mut history3 = history.clone();
    history3.extend([question_artifact(1), t2.artifact.clone().unwrap()]);
    let third = request(question(2).into(), &history3);
    s.prepare_turn(&third).unwrap();
    let stream = s.s2s_stream(&third).map_err(|b| b.1).unwrap();
    let (back, t3) = stream.wait().unwrap();
    let t3 = t3.unwrap();
    same(&t3, &plain.s2s(&third).unwrap());
    assert_eq!(t3.reply.resumed_prefill_steps, t3.reply.prompt_positions);
    drop(back);
}

#[test]
fn a_bad_request_fails_when_started_early_and_leaves_the_session_usable() {
    let e = engine(Quant::F32);
    let mut s = Session::new(e.clone(), SessionOptions::default());
    let mut bad = request(question(0).into(), &[]);
    bad.s2s.max_new_tokens = 0;
    assert!(matches!(
        s.prepare_turn(&bad),
        Err(EngineError::InvalidRequest(_))
    ));
    let not_audio = request(AudioInput::Wav(b"RIFF....".to_vec()), &[]);
    assert!(s.prepare_turn(&not_audio).is_err());
    let good = request(question(0).into(), &[]);
    let mut plain = uncached_session(&e);
    same(&s.s2s(&good).unwrap(), &plain.s2s(&good).unwrap());
}
