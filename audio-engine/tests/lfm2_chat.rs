//! Multi-turn speech-to-speech through a `Session` on the tiny synthetic package: the history
//! travels as artifacts, prefill blocks and encoder outputs are reused (each later turn of a
//! four-turn conversation, and of a ten-turn one, runs only its new question: the previous
//! prompt's blocks come back, and the reply was prefilled ahead), and every turn's text, audio
//! and reply artifact are byte-identical to a session without caches, to one that does not
//! prefill ahead, and to a fresh one.

mod common;

use audio_engine::lfm2_audio::conversation::Artifact;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::sampling::SamplerConfig;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    EngineError, ReplyEvent, S2sOptions, S2sRequest, Session, SessionOptions, TurnResult,
};

use common::package::{engine, uncached_session};
use common::wav::{question, question_artifact};

fn s2s() -> S2sOptions {
    S2sOptions {
        max_new_tokens: 300,
        text: SamplerConfig::GREEDY,
        audio: SamplerConfig::s2s_audio(7),
        ..Default::default()
    }
}

fn request(i: usize, history: &[Artifact]) -> S2sRequest {
    S2sRequest {
        question: question(i).into(),
        history: history.to_vec(),
        return_codes: true,
        s2s: s2s(),
    }
}

fn same(a: &TurnResult, b: &TurnResult) {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(a.reply.text, b.reply.text);
    assert_eq!(a.reply.steps, b.reply.steps);
    assert_eq!(bits(&a.reply.audio), bits(&b.reply.audio));
    assert_eq!(a.artifact, b.artifact);
}

#[test]
fn a_conversation_reuses_blocks_and_questions_without_changing_bytes() {
    let e = engine(Quant::F32);
    let mut cached = Session::new(e.clone(), SessionOptions::default());
    let mut plain = uncached_session(&e);
    let mut no_ahead = Session::new(
        e.clone(),
        SessionOptions {
            prefill_ahead: false,
            ..Default::default()
        },
    );
    let mut history: Vec<Artifact> = Vec::new();
    let mut requests = Vec::new();
    let mut prev: Option<(usize, usize)> = None;
    let mut closing = None;
    let mut last_resumed = 0;
    let mut head_len = 0;
    for i in 0..4 {
        let req = request(i, &history);
        let a = cached.s2s(&req).unwrap();
        let b = plain.s2s(&req).unwrap();
        let c = no_ahead.s2s(&req).unwrap();
        same(&a, &b);
        same(&a, &c);
        let len = a.reply.prompt_positions;
        let resumed = cached.resumed_prefill_steps();
        println!(
            "turn {}: prompt {len}, {} steps, resumed {resumed} ({} without prefill ahead), \
             reused {}, background {:?}",
            i + 1,
            a.reply.steps.len(),
            no_ahead.resumed_prefill_steps(),
            cached.reused_questions(),
            a.background
        );
        assert_eq!(a.reply.resumed_prefill_steps, resumed);
        assert_eq!(plain.resumed_prefill_steps(), 0);
        assert_eq!(cached.reused_questions(), i);
        assert_eq!(plain.reused_questions(), 0);
        assert!(b.background.is_none());
        match prev {
            None => {
                // A new session prefilled the head every conversation starts with (the
                // first request waited for it): the first turn restored it and ran only its
                // question; with prefill ahead off the head is still prefilled.
                for (r, s) in [(&a, &cached), (&c, &no_ahead)] {
                    let head = r.background.clone().expect("the head was prefilled");
                    assert!(!head.stopped && head.failed.is_none(), "{head:?}");
                    assert_eq!(head.restored_positions, 0);
                    assert!(head.prefilled_positions > 0);
                    assert_eq!(s.resumed_prefill_steps(), head.prefilled_positions);
                    head_len = head.prefilled_positions;
                }
            }
            Some((prev_len, prev_steps)) => {
                // The request continued the conversation being prefilled ahead, so it waited
                // for it: the previous prompt came back whole (its last block included) and the
                // previous reply with its closing markup was run ahead.
                let bg = a.background.clone().expect("the reply was prefilled ahead");
                assert!(!bg.stopped && bg.failed.is_none(), "{bg:?}");
                assert_eq!(bg.restored_positions, prev_len);
                let markup = bg.prefilled_positions - prev_steps;
                assert!(markup > 0);
                assert_eq!(*closing.get_or_insert(markup), markup);
                // This turn ran only its new question and the markup after it.
                assert_eq!(resumed, prev_len + prev_steps + markup);
                assert!(len - resumed < 100, "{} new positions", len - resumed);
                // Without prefill ahead the previous prompt still comes back; the reply runs.
                assert_eq!(no_ahead.resumed_prefill_steps(), prev_len);
                assert!(c.background.is_none());
            }
        }
        assert_eq!(cached.background_work(), a.background.as_ref());
        prev = Some((len, a.reply.steps.len()));
        last_resumed = resumed;
        let art = a.artifact.clone().unwrap();
        history.push(question_artifact(i));
        history.push(art);
        requests.push((req, a));
    }

    // The last turn again: in a fresh session, and in the cached one after another conversation
    // and after a request without history.
    let (last_req, last) = requests.last().unwrap();
    let mut fresh = Session::new(e.clone(), SessionOptions::default());
    same(&fresh.s2s(last_req).unwrap(), last);
    let other = request(5, &[]);
    cached.s2s(&other).unwrap();
    let mut no_codes = other.clone();
    no_codes.return_codes = false;
    let single = cached.s2s(&no_codes).unwrap();
    assert!(single.artifact.is_none());
    same(&cached.s2s(last_req).unwrap(), last);
    assert_eq!(cached.reused_questions(), 3);
    // The other conversation shared only the head: the first one's blocks were kept beside it,
    // its last block with the prompt's outputs, so the same prompt again runs nothing.
    let last_len = last.reply.prompt_positions;
    assert!(last_resumed < last_len);
    assert_eq!(cached.resumed_prefill_steps(), last_len);

    // Streamed through a session moved onto a worker thread: the same bytes and artifact, the
    // events adding up to the result, and the session (with its caches) given back.
    let mut stream = fresh.s2s_stream(last_req).unwrap();
    let (mut text, mut audio) = (String::new(), Vec::new());
    while let Some(ev) = stream.next_event() {
        match ev {
            ReplyEvent::Text(t) => text.push_str(&t),
            ReplyEvent::Audio(a) => audio.extend(a),
        }
    }
    let (fresh, streamed) = stream.wait().unwrap();
    let streamed = streamed.unwrap();
    same(&streamed, last);
    assert_eq!(text, last.reply.text);
    assert_eq!(audio.len(), last.reply.audio.len());
    assert!(
        fresh.resumed_prefill_steps() > head_len,
        "the session came back with its caches"
    );
    // A bad request fails at start and gives the session back.
    let mut bad = last_req.clone();
    bad.history.truncate(1);
    let (back, err) = *fresh.s2s_stream(&bad).unwrap_err();
    assert!(matches!(err, EngineError::InvalidRequest(_)));
    let mut fresh = back;

    // A turn stopped early (a streaming client finishing before the reply is over) returns the
    // steps so far as a reply that did not end.
    let mut events = 0;
    let cut = fresh
        .s2s_with(last_req, &mut |_| {
            events += 1;
            events < 5
        })
        .unwrap();
    assert!(!cut.reply.ended);
    let art = cut.artifact.unwrap();
    assert_eq!(art.meta["ended"], serde_json::json!(false));
    assert!(cut.reply.steps.len() < last.reply.steps.len());
    assert_eq!(
        cut.reply.steps[..],
        last.reply.steps[..cut.reply.steps.len()]
    );

    // An over-limit request fails as capacity and keeps the caches: the turn still resumes.
    let mut huge = last_req.clone();
    huge.s2s.max_new_tokens = 8192;
    let err = cached.s2s(&huge).unwrap_err();
    assert!(matches!(err, EngineError::Capacity(_)), "{err}");
    // The same error a fresh session gives: caches never change what a request is told.
    let fresh_err = Session::new(e.clone(), SessionOptions::default())
        .s2s(&huge)
        .unwrap_err();
    assert_eq!(err.to_string(), fresh_err.to_string());
    assert!(err.to_string().contains("oldest turns"), "{err}");
    same(&cached.s2s(last_req).unwrap(), last);
    assert!(cached.resumed_prefill_steps() > head_len);

    // Rejections, before anything runs, each an invalid request (or capacity) naming the problem;
    // none of them disturbs the caches.
    let invalid = |cached: &mut Session, req: &S2sRequest, what: &str| match cached.s2s(req) {
        Err(EngineError::InvalidRequest(msg)) => println!("{what}: {msg}"),
        other => panic!("{what}: expected an invalid request, got {other:?}"),
    };
    let mut bad = last_req.clone();
    bad.history[1]
        .meta
        .insert("codebooks".into(), serde_json::json!(7));
    invalid(&mut cached, &bad, "reply of another checkpoint");
    let mut bad = last_req.clone();
    bad.history[0].id = "lfm2_audio.unknown".into();
    invalid(&mut cached, &bad, "unknown artifact id");
    let mut bad = last_req.clone();
    bad.history.truncate(1);
    invalid(&mut cached, &bad, "question without its reply");
    let mut bad = last_req.clone();
    bad.history.swap(0, 1);
    invalid(&mut cached, &bad, "turns out of order");
    let mut bad = last_req.clone();
    bad.history[0].payload = b"RIFF, but not a WAV".to_vec();
    invalid(&mut cached, &bad, "unreadable question");
    let mut bad = last_req.clone();
    bad.history[1]
        .meta
        .insert("steps".into(), serde_json::json!(9000));
    assert!(matches!(cached.s2s(&bad), Err(EngineError::Capacity(_))));
    same(&cached.s2s(last_req).unwrap(), last);
    // This prompt ran before: every block comes back, the last with its outputs.
    assert_eq!(cached.resumed_prefill_steps(), last_len);
}

/// The long protocol: ten turns (short replies, so the tiny model's context holds
/// them). Every turn equals a session without caches and, from turn 2 on, restores all of the
/// previous prompt, the previous reply and its closing markup, so it prefills only its new
/// question (one position per 80 ms of audio) and the markup around it. The tenth turn in a
/// fresh session gives the same bytes too.
#[test]
fn ten_turns_each_prefill_only_their_new_question_without_changing_bytes() {
    let e = engine(Quant::F32);
    let mut cached = Session::new(e.clone(), SessionOptions::default());
    let mut plain = uncached_session(&e);
    let mut history: Vec<Artifact> = Vec::new();
    let mut prev: Option<(usize, usize)> = None;
    let mut closing = None;
    let mut fresh_per_turn = Vec::new();
    let mut last = None;
    for i in 0..10 {
        let mut req = request(i, &history);
        req.s2s.max_new_tokens = 24;
        let a = cached.s2s(&req).unwrap();
        same(&a, &plain.s2s(&req).unwrap());
        let len = a.reply.prompt_positions;
        let resumed = a.reply.resumed_prefill_steps;
        assert_eq!(plain.resumed_prefill_steps(), 0);
        assert_eq!(cached.reused_questions(), i);
        if let Some((prev_len, prev_steps)) = prev {
            let bg = a.background.clone().expect("the reply was prefilled ahead");
            assert!(!bg.stopped && bg.failed.is_none(), "turn {}: {bg:?}", i + 1);
            assert_eq!(bg.restored_positions, prev_len, "turn {}", i + 1);
            let markup = bg.prefilled_positions - prev_steps;
            assert!(markup > 0);
            assert_eq!(*closing.get_or_insert(markup), markup, "turn {}", i + 1);
            assert_eq!(resumed, prev_len + prev_steps + markup, "turn {}", i + 1);
            // 16 kHz audio, 10 ms mel frames subsampled 8x: 1280 samples per position.
            let question_positions = (24_000 + 8_000 * i).div_ceil(1280);
            assert!(
                len - resumed <= question_positions + 16,
                "turn {}: {} new positions for a {question_positions}-position question",
                i + 1,
                len - resumed
            );
            fresh_per_turn.push(len - resumed);
        }
        prev = Some((len, a.reply.steps.len()));
        history.push(question_artifact(i));
        history.push(a.artifact.clone().unwrap());
        last = Some((req, a));
    }
    println!("positions prefilled by turns 2-10: {fresh_per_turn:?}");
    let (req, a) = last.unwrap();
    let mut fresh = Session::new(e, SessionOptions::default());
    same(&fresh.s2s(&req).unwrap(), &a);
}

#[test]
fn a_question_one_sample_off_is_encoded_again() {
    let e = engine(Quant::F32);
    let mut session = Session::new(e.clone(), SessionOptions::default());
    let mut opts = s2s();
    opts.max_new_tokens = 8;
    let mut first = request(0, &[]);
    first.s2s = opts.clone();
    let t1 = session.s2s(&first).unwrap();
    let history = vec![question_artifact(0), t1.artifact.unwrap()];
    let mut second = request(1, &history);
    second.s2s = opts.clone();
    session.s2s(&second).unwrap();
    assert_eq!(session.reused_questions(), 1);
    // The same history with the earlier question's last sample changed by one step.
    let mut changed = second.clone();
    let wav = &mut changed.history[0].payload;
    let last = wav.len() - 2;
    wav[last] = wav[last].wrapping_add(1);
    session.s2s(&changed).unwrap();
    assert_eq!(session.reused_questions(), 0);
}

#[test]
fn another_request_stops_the_prefill_ahead_without_changing_bytes() {
    let e = engine(Quant::F32);
    let mut s = Session::new(e.clone(), SessionOptions::default());
    let mut plain = uncached_session(&e);
    let t1 = s.s2s(&request(0, &[])).unwrap();
    // Another conversation comes first: the worker prefilling the first reply is stopped after
    // its current block (or had finished); the other request's bytes are its own.
    let other = request(3, &[]);
    let o = s.s2s(&other).unwrap();
    same(&o, &plain.s2s(&other).unwrap());
    let bg = o
        .background
        .expect("the first reply was being prefilled ahead");
    println!("stopped by another conversation: {bg:?}");
    assert!(bg.failed.is_none(), "{bg:?}");
    // The first conversation goes on, in the same bytes as without caches.
    let history = vec![question_artifact(0), t1.artifact.clone().unwrap()];
    let second = request(1, &history);
    same(&s.s2s(&second).unwrap(), &plain.s2s(&second).unwrap());
    // Waiting reports the second reply's prefill, run to its end.
    let w = s.wait_background().cloned().unwrap();
    assert!(
        !w.stopped && w.failed.is_none() && w.prefilled_positions > 0,
        "{w:?}"
    );
    assert_eq!(s.background_work(), Some(&w));
    // ASR and TTS between turns stop the worker too, and the next turn's bytes still hold.
    let mut third_history = history.clone();
    third_history.push(question_artifact(1));
    let t2 = s.s2s(&second).unwrap();
    third_history.push(t2.artifact.unwrap());
    s.tts("hello", &Default::default()).unwrap();
    let third = request(2, &third_history);
    same(&s.s2s(&third).unwrap(), &plain.s2s(&third).unwrap());
    // A session dropped while its worker runs stops it (the drop returns).
    let mut d = Session::new(e.clone(), SessionOptions::default());
    d.s2s(&request(2, &[])).unwrap();
    drop(d);
}

/// A session encodes in the encoder buffer it keeps between questions: longer and shorter
/// inputs in turn give exactly the bits a fresh encode gives.
#[test]
fn a_session_encodes_in_its_kept_buffer_with_the_same_bits() {
    let e = engine(Quant::F32);
    let signal = audio_tooling::synthetic::tiny_input_signal();
    let mut session = Session::new(e.clone(), SessionOptions::default());
    let n = signal.len();
    for len in [n, n / 4, n / 2, n, 3 * n / 4] {
        let x = &signal[..len];
        let (rows, kept) = session.encode_audio(x).unwrap();
        let (fresh_rows, fresh) = e.encode_audio(x).unwrap();
        assert_eq!(rows, fresh_rows, "{len} samples");
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&kept), bits(&fresh), "{len} samples");
    }
}
