//! Speech-to-speech and TTS end to end on the tiny synthetic checkpoint: greedy interleaved
//! generation against liquid-audio 1.3.0 (`s2s_steps` of the reference fixture), streamed
//! replies equal offline ones bit for bit, seeded sampling is reproducible, early finishes cut
//! the reply, and TTS speaks.

mod common;

use audio_engine::lfm2_audio::conversation::artifact::ReplyStep;
use audio_engine::lfm2_audio::internals::detokenizer::SAMPLES_PER_FRAME;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::sampling::SamplerConfig;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{EngineError, ReplyEvent, S2sOptions, TtsOptions, Voice};

use common::lfm2_tiny::{input_signal, reference, Step};
use common::package::engine;

fn fixture_steps() -> Vec<ReplyStep> {
    to_reply(reference().s2s_steps())
}

fn to_reply(steps: Vec<Step>) -> Vec<ReplyStep> {
    steps
        .into_iter()
        .map(|s| match s {
            Step::Text(t) => ReplyStep::Text(t),
            Step::Audio(c) => ReplyStep::Frame(c.to_vec()),
        })
        .collect()
}

fn greedy(max: usize) -> S2sOptions {
    S2sOptions {
        max_new_tokens: max,
        text: SamplerConfig::GREEDY,
        audio: SamplerConfig::GREEDY,
        ..Default::default()
    }
}

fn frames(steps: &[ReplyStep]) -> usize {
    steps
        .iter()
        .filter(|s| matches!(s, ReplyStep::Frame(c) if !c.contains(&2048)))
        .count()
}

#[test]
fn greedy_interleaved_reply_matches_liquid_audio() {
    let want = fixture_steps();
    assert_eq!(reference().meta("s2s_stop"), "max_steps");
    let e = engine(Quant::F32);
    let r = e.s2s(&input_signal(), &greedy(want.len())).unwrap();
    let n_same = r
        .steps
        .iter()
        .zip(&want)
        .take_while(|(a, b)| a == b)
        .count();
    println!(
        "{} of {} steps identical; {} prompt positions",
        n_same,
        want.len(),
        r.prompt_positions
    );
    assert_eq!(r.steps, want);
    assert_eq!(r.prompt_positions, reference().prompt("s2s").len());
    assert!(!r.ended, "cut by max_new_tokens");
    // Audio: one frame's worth of samples per non-end frame.
    assert_eq!(r.audio.len(), frames(&r.steps) * SAMPLES_PER_FRAME);
    assert!(r.audio.iter().all(|v| v.is_finite()));
    assert!(r.timings.first_audio.is_some());
}

#[test]
fn streamed_reply_equals_offline_bit_for_bit() {
    let e = engine(Quant::F32);
    let opts = S2sOptions {
        max_new_tokens: 40,
        audio: SamplerConfig::s2s_audio(1234),
        ..Default::default()
    };
    let offline = e.s2s(&input_signal(), &opts).unwrap();
    let again = e.s2s(&input_signal(), &opts).unwrap();
    assert_eq!(offline, with_timings_of(again, &offline));

    let mut stream = e.s2s_stream(input_signal(), &opts).unwrap();
    let (mut text, mut audio, mut n_audio_events) = (String::new(), Vec::new(), 0);
    while let Some(ev) = stream.next_event() {
        match ev {
            ReplyEvent::Text(t) => text.push_str(&t),
            ReplyEvent::Audio(a) => {
                n_audio_events += 1;
                audio.extend(a)
            }
        }
    }
    let streamed = stream.wait().unwrap();
    assert!(n_audio_events > 1, "audio arrives in pieces");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&audio), bits(&offline.audio));
    assert_eq!(text, offline.text);
    assert_eq!(bits(&streamed.audio), bits(&offline.audio));
    assert_eq!(streamed.steps, offline.steps);
    assert_eq!(streamed.ended, offline.ended);

    // Another seed samples other codes.
    let other = e
        .s2s(
            &input_signal(),
            &S2sOptions {
                audio: SamplerConfig::s2s_audio(99),
                ..opts.clone()
            },
        )
        .unwrap();
    assert_ne!(other.steps, offline.steps);
}

/// `r` with `like`'s timings, so results compare without them.
fn with_timings_of(
    mut r: audio_engine::lfm2_audio::ReplyResult,
    like: &audio_engine::lfm2_audio::ReplyResult,
) -> audio_engine::lfm2_audio::ReplyResult {
    r.timings = like.timings.clone();
    r
}

#[test]
fn an_early_finish_cuts_the_reply_and_bad_input_fails_at_start() {
    let e = engine(Quant::F32);
    let opts = greedy(100);
    let mut stream = e.s2s_stream(input_signal(), &opts).unwrap();
    let first = stream.next_event();
    assert!(first.is_some());
    let cut = stream.finish().unwrap();
    assert!(!cut.ended);
    let full = e.s2s(&input_signal(), &opts).unwrap();
    assert!(cut.steps.len() < full.steps.len());
    assert_eq!(&full.steps[..cut.steps.len()], &cut.steps[..]);

    assert!(matches!(
        e.s2s_stream(Vec::new(), &opts),
        Err(EngineError::Audio(_))
    ));
    assert!(matches!(
        e.s2s_stream(input_signal(), &greedy(0)),
        Err(EngineError::InvalidRequest(_))
    ));
    assert!(matches!(
        e.s2s(&input_signal(), &greedy(100_000)),
        Err(EngineError::Capacity(_))
    ));
}

#[test]
fn tts_speaks_with_each_voice_and_streams_the_same_bytes() {
    let e = engine(Quant::F32);
    let opts = TtsOptions {
        max_new_tokens: 48,
        voice: Voice::UkMale,
        audio: SamplerConfig::tts_audio(5),
        ..Default::default()
    };
    let r = e
        .tts("Hello there, numbers 2024 and voices.", &opts)
        .unwrap();
    assert!(!r.steps.is_empty());
    let mut s = e
        .tts_stream("Hello there, numbers 2024 and voices.", &opts)
        .unwrap();
    while s.next_event().is_some() {}
    let streamed = s.wait().unwrap();
    assert_eq!(streamed.steps, r.steps);
    assert_eq!(streamed.audio, r.audio);
    assert_eq!(r.audio.len(), frames(&r.steps) * SAMPLES_PER_FRAME);
    // Another voice is another prompt.
    let us = e
        .tts(
            "Hello there, numbers 2024 and voices.",
            &TtsOptions {
                voice: Voice::UsFemale,
                ..opts.clone()
            },
        )
        .unwrap();
    assert_ne!(us.prompt_positions, 0);
    assert!(matches!(
        e.tts("   ", &opts),
        Err(EngineError::InvalidRequest(_))
    ));
}

#[test]
fn greedy_sequential_tts_matches_liquid_audio() {
    let r = reference();
    let want = to_reply(r.tts_steps());
    assert_eq!(r.meta("tts_stop"), "max_steps");
    assert_eq!(r.meta("tts_system"), Voice::UsFemale.system_prompt());
    let e = engine(Quant::F32);
    let opts = TtsOptions {
        voice: Voice::UsFemale,
        max_new_tokens: want.len(),
        text: SamplerConfig::GREEDY,
        audio: SamplerConfig::GREEDY,
        ..Default::default()
    };
    let got = e.tts(r.meta("tts_prompt"), &opts).unwrap();
    assert_eq!(got.prompt_positions, r.prompt("tts").len());
    assert_eq!(got.steps, want);
    assert!(!got.ended);
    assert_eq!(got.audio.len(), frames(&got.steps) * SAMPLES_PER_FRAME);
}
