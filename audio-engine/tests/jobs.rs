//! The one request model: a `Job` run through `Session::run` or `Lfm2Audio::run` gives the bytes
//! of the task calls it stands for (ASR, TTS, S2S with history), its events add up to its
//! outcome, a cancel keeps exactly what the sink accepted, and PCM handed in as samples is read
//! exactly as the same samples in a float WAV (no WAV is written for it).

mod common;

use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    AsrJob, AsrOptions, AudioInput, EngineError, Job, ReplyEvent, S2sOptions, S2sRequest,
    SamplerConfig, TtsJob, TtsOptions, Voice,
};

use common::lfm2_tiny::input_signal;
use common::package::{engine, uncached_session};
use common::wav::{float_interleaved, question, question_artifact};

/// Interleaved stereo float PCM at 44.1 kHz: a deterministic waveform, left and right apart.
fn stereo_44k() -> Vec<f32> {
    (0..2 * 44_100)
        .map(|i| {
            let t = (i / 2) as f32;
            let side = if i % 2 == 0 { 1.0 } else { -0.5 };
            0.3 * side * ((t * 0.013).sin() + 0.5 * (t * 0.0021).sin())
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// why this voice: on the tiny model it starts audio for this text within 48 steps (the
/// others do not), so the comparison below covers audio, not only text steps.
fn tts_options() -> TtsOptions {
    TtsOptions {
        max_new_tokens: 48,
        voice: Voice::UkFemale,
        audio: SamplerConfig::tts_audio(5),
        ..Default::default()
    }
}

fn s2s_request(turn: usize, history: Vec<audio_engine::lfm2_audio::Artifact>) -> S2sRequest {
    S2sRequest {
        question: question(turn).into(),
        history,
        return_codes: true,
        s2s: S2sOptions {
            max_new_tokens: 64,
            text: SamplerConfig::GREEDY,
            audio: SamplerConfig::s2s_audio(9),
            ..Default::default()
        },
    }
}

/// Runs `job`, collecting its events' text and audio.
fn run_collect(
    e: &audio_engine::lfm2_audio::Lfm2Audio,
    job: &Job,
) -> (audio_engine::lfm2_audio::Outcome, String, Vec<f32>) {
    let (mut text, mut audio) = (String::new(), Vec::new());
    let o = e
        .run(job, &mut |ev| {
            match ev {
                ReplyEvent::Text(t) => text.push_str(&t),
                ReplyEvent::Audio(a) => audio.extend(a),
            }
            true
        })
        .unwrap();
    (o, text, audio)
}

#[test]
fn jobs_give_the_bytes_of_the_task_calls() {
    let e = engine(Quant::F32);
    // ASR: a WAV, then the same samples as PCM.
    let samples = input_signal();
    let opts = AsrOptions {
        max_new_tokens: 24,
        ..Default::default()
    };
    let want = e.asr(&samples, &opts).unwrap();
    let job = Job::Asr(AsrJob {
        audio: AudioInput::mono_16k(samples.clone()),
        options: opts.clone(),
        chunk_seconds: None,
    });
    let (o, text, audio) = run_collect(&e, &job);
    assert_eq!(o.tokens, want.tokens);
    assert_eq!(o.text, want.text);
    assert_eq!(text, want.text, "the events spell the transcript");
    assert!(audio.is_empty() && o.audio.is_empty());
    assert_eq!(
        (o.steps, o.prompt_positions),
        (want.tokens.len(), want.prompt_positions)
    );
    assert!((o.input_seconds - samples.len() as f64 / 16_000.0).abs() < 1e-12);
    assert!(!o.cancelled);

    // TTS.
    let want = e
        .tts("Hello there, numbers 2024 and voices.", &tts_options())
        .unwrap();
    let job = Job::Tts(TtsJob {
        text: "Hello there, numbers 2024 and voices.".into(),
        options: tts_options(),
    });
    let (o, _, audio) = run_collect(&e, &job);
    assert!(!want.audio.is_empty(), "the TTS under test speaks");
    assert!(bits(&o.audio) == bits(&want.audio), "tts audio differs");
    assert!(bits(&audio) == bits(&want.audio), "tts events differ");
    assert_eq!((o.steps, o.ended), (want.steps.len(), want.ended));

    // S2S: two turns on a session, the second carrying the first as history.
    let mut direct = uncached_session(&e);
    let mut by_job = uncached_session(&e);
    let mut history = Vec::new();
    for turn in 0..2 {
        let req = s2s_request(turn, history.clone());
        let want = direct.s2s(&req).unwrap();
        let mut events = Vec::new();
        let o = by_job
            .run(&Job::S2s(req), &mut |ev| {
                if let ReplyEvent::Audio(a) = ev {
                    events.extend(a);
                }
                true
            })
            .unwrap();
        assert_eq!(o.text, want.reply.text, "turn {turn}");
        assert!(
            bits(&o.audio) == bits(&want.reply.audio),
            "turn {turn} audio"
        );
        assert!(
            bits(&events) == bits(&want.reply.audio),
            "turn {turn} events"
        );
        assert_eq!(o.artifact, want.artifact, "turn {turn} artifact");
        assert_eq!(o.steps, want.reply.steps.len());
        history.push(question_artifact(turn));
        history.push(o.artifact.clone().unwrap());
    }
}

#[test]
fn pcm_reads_as_the_same_samples_in_a_float_wav() {
    let pcm = stereo_44k();
    let opts = audio_engine::lfm2_audio::ReadOptions::default();
    let from_pcm = AudioInput::Pcm {
        samples: pcm.clone(),
        sample_rate: 44_100,
        channels: 2,
    }
    .samples_16k(&opts)
    .unwrap();
    let from_wav = AudioInput::Wav(float_interleaved(44_100, 2, &pcm))
        .samples_16k(&opts)
        .unwrap();
    assert!(!from_pcm.is_empty());
    assert!(bits(&from_pcm) == bits(&from_wav));
    // Bad PCM is a typed error, not a panic.
    for (samples, rate, channels) in [
        (vec![0.1; 3], 16_000, 2),
        (vec![0.1; 4], 16_000, 0),
        (vec![0.1; 4], 10, 1),
        (vec![], 16_000, 1),
        (vec![0.1, f32::NAN], 16_000, 1),
    ] {
        let r = AudioInput::Pcm {
            samples,
            sample_rate: rate,
            channels,
        }
        .samples_16k(&opts);
        assert!(r.is_err());
    }
}

#[test]
fn a_cancel_keeps_what_the_sink_accepted_and_chunked_asr_joins_its_pieces() {
    let e = engine(Quant::F32);
    let req = s2s_request(0, Vec::new());
    let full = e.run(&Job::S2s(req.clone()), &mut |_| true).unwrap();
    // Accept two audio events, refuse the third.
    let (mut seen, mut accepted) = (0, Vec::new());
    let o = e
        .run(&Job::S2s(req), &mut |ev| {
            let ReplyEvent::Audio(a) = ev else {
                return true;
            };
            seen += 1;
            if seen > 2 {
                return false;
            }
            accepted.extend(a);
            true
        })
        .unwrap();
    assert_eq!(seen, 3, "events after the refusal were delivered");
    assert!(o.cancelled && !o.ended);
    assert!(bits(&o.audio) == bits(&accepted));
    assert!(!accepted.is_empty() && accepted.len() < full.audio.len());
    assert!(bits(&full.audio[..accepted.len()]) == bits(&accepted));

    // ASR in pieces of 0.5 s: each piece transcribed alone, the texts trimmed and joined.
    let samples = input_signal();
    let opts = AsrOptions {
        max_new_tokens: 8,
        ..Default::default()
    };
    let pieces: Vec<String> = samples
        .chunks(8_000)
        .map(|p| e.asr(p, &opts).unwrap().text.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    let job = |chunk_seconds| {
        Job::Asr(AsrJob {
            audio: AudioInput::mono_16k(samples.clone()),
            options: opts.clone(),
            chunk_seconds,
        })
    };
    let (o, _, _) = run_collect(&e, &job(Some(0.5)));
    assert_eq!(o.text, pieces.join(" "));
    for bad in [0.0, -1.0, f64::NAN] {
        assert!(matches!(
            e.run(&job(Some(bad)), &mut |_| true),
            Err(EngineError::InvalidRequest(_))
        ));
    }
}

#[test]
fn the_cancel_check_is_asked_before_each_asr_piece_and_stops_there() {
    let e = engine(Quant::F32);
    let samples = input_signal();
    assert!(
        samples.len() > 8_000,
        "the signal has a second piece of 0.5 s"
    );
    let opts = AsrOptions {
        max_new_tokens: 8,
        ..Default::default()
    };
    let job = |chunk_seconds| {
        Job::Asr(AsrJob {
            audio: AudioInput::mono_16k(samples.clone()),
            options: opts.clone(),
            chunk_seconds,
        })
    };
    // A check that says no at once: nothing runs, in one pass or in pieces.
    for chunk_seconds in [None, Some(0.5)] {
        let mut events = 0;
        let o = e
            .run_cancellable(&job(chunk_seconds), &|| false, &mut |_| {
                events += 1;
                true
            })
            .unwrap();
        assert!(o.cancelled && !o.ended && o.tokens.is_empty() && events == 0);
    }
    // The first piece alone, and the events it hands over (each asks the check once).
    let mut first_events = 0;
    let first = e
        .asr_with(&samples[..8_000], &opts, &mut |_| {
            first_events += 1;
            true
        })
        .unwrap();
    // A check that says yes before the first piece and at each of its events, then no: the
    // sink never refuses, so only the check before the second piece can stop the run there.
    let asked = std::cell::Cell::new(0usize);
    let keep_going = || {
        asked.set(asked.get() + 1);
        asked.get() <= 1 + first_events
    };
    let o = e
        .run_cancellable(&job(Some(0.5)), &keep_going, &mut |_| true)
        .unwrap();
    assert_eq!(
        asked.get(),
        first_events + 2,
        "asked once more, before piece two"
    );
    assert!(o.cancelled && !o.ended);
    assert_eq!(o.tokens, first.tokens, "the second piece decoded nothing");
    assert_eq!(o.text, first.text.trim());
}

/// A typed question (issue #37's text turns): sent as the request's text it runs as the
/// history's pending question, and a later spoken turn that carries it and its reply gives the
/// same bytes in the session that answered it and in a fresh one, and other bytes than the
/// spoken question asked alone (so the typed turn is really in the prompt).
#[test]
fn a_typed_question_is_a_turn_of_the_conversation() {
    use audio_engine::lfm2_audio::{
        Artifact, ArtifactKind, Request, RequestContext, Session, SessionOptions, Task, QUESTION_ID,
    };
    let e = engine(Quant::F32);
    let ctx = RequestContext::new("en", 60.0);
    let typed = "What is the weather like today?";
    let first = Request {
        text: Some(typed.into()),
        ..Request::new(Task::S2s)
    }
    .option("max_tokens", "40")
    .resolve(&ctx)
    .unwrap()
    .job;
    let mut session = Session::new(e.clone(), SessionOptions::default());
    let o1 = session.run(&first, &mut |_| true).unwrap();
    assert!(o1.steps > 0);
    let reply = o1.artifact.clone().expect("return_codes defaults to true");
    // A typed question in the history: kind text, its UTF-8 as the payload.
    let history = vec![
        Artifact {
            id: QUESTION_ID.into(),
            kind: ArtifactKind::Text,
            payload: typed.as_bytes().to_vec(),
            meta: Default::default(),
        },
        reply,
    ];
    let second = Job::S2s(s2s_request(1, history));
    let cached = session.run(&second, &mut |_| true).unwrap();
    let fresh = uncached_session(&e).run(&second, &mut |_| true).unwrap();
    assert_eq!(cached.text, fresh.text);
    assert_eq!(bits(&cached.audio), bits(&fresh.audio));
    assert_eq!(cached.artifact, fresh.artifact);
    let alone = uncached_session(&e)
        .run(&Job::S2s(s2s_request(1, Vec::new())), &mut |_| true)
        .unwrap();
    assert!(
        cached.prompt_positions > alone.prompt_positions,
        "the typed turn is not in the prompt"
    );
    // Both a typed and a spoken new question is refused, by the one validator.
    let both = Request {
        text: Some(typed.into()),
        audio: Some(AudioInput::Wav(question(0))),
        ..Request::new(Task::S2s)
    };
    assert!(matches!(
        both.resolve(&ctx),
        Err(EngineError::InvalidRequest(_))
    ));
}

#[test]
fn a_tool_result_is_answered_as_the_next_turn() {
    use audio_engine::lfm2_audio::tools::{tool_system_prompt, write_calls, ToolCall};
    use audio_engine::lfm2_audio::{Artifact, ArtifactKind, Session, SessionOptions, QUESTION_ID};
    use serde_json::json;
    let e = engine(Quant::F32);
    let tools = [json!({"type": "function", "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}})];
    let with_tools = |mut r: S2sRequest| {
        r.s2s.system_prompt = tool_system_prompt(&r.s2s.system_prompt, &tools);
        r
    };
    let mut session = Session::new(e.clone(), SessionOptions::default());
    let first = Job::S2s(with_tools(s2s_request(0, Vec::new())));
    let o1 = session.run(&first, &mut |_| true).unwrap();
    // The client ran a call (the tiny model makes none of its own): its history holds the
    // question, a reply, and the tool's result, asked as the next turn.
    let text = |id: &str, s: &str, role: Option<&str>| Artifact {
        id: id.into(),
        kind: ArtifactKind::Text,
        payload: s.as_bytes().to_vec(),
        meta: role
            .map(|r| [("role".to_owned(), json!(r))].into_iter().collect())
            .unwrap_or_default(),
    };
    let call = write_calls(&[ToolCall {
        name: "get_weather".into(),
        arguments: json!({"city": "Paris"}).as_object().unwrap().clone(),
    }]);
    for reply in [
        o1.artifact.clone().unwrap(),
        text(audio_engine::lfm2_audio::REPLY_ID, &call, None),
    ] {
        let history = vec![
            question_artifact(0),
            reply,
            text(QUESTION_ID, r#"{"temperature": 21}"#, Some("tool")),
        ];
        let mut req = with_tools(s2s_request(0, history));
        req.question = AudioInput::default();
        let job = Job::S2s(req);
        let cached = session.run(&job, &mut |_| true).unwrap();
        let fresh = uncached_session(&e).run(&job, &mut |_| true).unwrap();
        assert_eq!(cached.text, fresh.text);
        assert_eq!(bits(&cached.audio), bits(&fresh.audio));
        assert_eq!(cached.artifact, fresh.artifact);
        assert!(cached.steps > 0);
    }
    // The tool's text is in the prompt: a longer output, a longer prompt.
    let positions = |output: &str| {
        let history = vec![
            question_artifact(0),
            o1.artifact.clone().unwrap(),
            text(QUESTION_ID, output, Some("tool")),
        ];
        let mut req = with_tools(s2s_request(0, history));
        req.question = AudioInput::default();
        req.s2s.max_new_tokens = 1;
        uncached_session(&e)
            .run(&Job::S2s(req), &mut |_| true)
            .unwrap()
            .prompt_positions
    };
    assert!(positions("21 degrees and sunny all day") > positions("21"));
}
