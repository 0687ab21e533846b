//! semantic_vad's detector: the policy's timing with fixed verdicts (needs espeak-ng), and
//! smart-turn on a small espeak-ng turn corpus (needs espeak-ng and the smart-turn weights,
//! scripts/smart_turn_weights.sh). Without them the tests skip with the `ci-skip` marker, and
//! fail in CI.

mod common;
#[path = "../examples/common/turn.rs"]
mod turn;

use std::sync::Arc;

use voice_activity::{
    Check, Eagerness, EndOfTurn, EndOfTurnPolicy, Resampler, TurnDetector, VadConfig, VadError,
    VadEvent,
};

/// A model that always says the same.
struct Fixed(f32);

impl EndOfTurn for Fixed {
    fn probability(&self, _: &[f32]) -> f32 {
        self.0
    }
}

/// The times (ms of audio fed) at which `SpeechStopped`s came out, fed 10 ms at a time.
fn stops<M: EndOfTurn>(d: &mut TurnDetector<M>, audio: &[f32], rate: u32) -> Vec<(u64, VadEvent)> {
    let mut fed = 0usize;
    let mut out = Vec::new();
    for chunk in audio.chunks(rate as usize / 100) {
        fed += chunk.len();
        for e in d.push(chunk) {
            out.push(((fed as u64 * 1000) / u64::from(rate), e));
        }
    }
    out
}

#[test]
fn the_policy_ends_a_turn_at_the_pause_or_at_the_longest_wait() {
    let Some((speech, rate)) = common::espeak("Could you turn the lights off, please?", "en-gb")
    else {
        return;
    };
    let policy = EndOfTurnPolicy {
        checks: [
            Check {
                silence_ms: 200,
                threshold: 0.95,
            },
            Check {
                silence_ms: 600,
                threshold: 0.5,
            },
        ],
        max_silence_ms: 1500,
    };
    for input_rate in [16_000u32, 24_000] {
        let mut at_rate = Vec::new();
        Resampler::new(rate, input_rate)
            .unwrap()
            .process(&speech, &mut at_rate);
        let (_, end) = common::speech_extent(&at_rate);
        let mut audio = common::silence(input_rate as usize / 2);
        let end_ms = ((audio.len() + end) as u64 * 1000) / u64::from(input_rate);
        audio.extend_from_slice(&at_rate);
        audio.extend(common::silence(input_rate as usize * 5 / 2));
        let vad = VadConfig::default();
        // Nearly sure: the first check; fairly sure: the second; unsure: the longest wait.
        for (verdict, wait) in [
            (0.99, policy.checks[0].silence_ms),
            (0.7, policy.checks[1].silence_ms),
            (0.1, policy.max_silence_ms),
        ] {
            let mut d =
                TurnDetector::new(Arc::new(Fixed(verdict)), policy, vad, input_rate).unwrap();
            let events = stops(&mut d, &audio, input_rate);
            let [(_, VadEvent::SpeechStarted { .. }), (at, VadEvent::SpeechStopped { audio_end_ms })] =
                events[..]
            else {
                panic!("{input_rate} Hz, P {verdict}: {events:?}");
            };
            // Out `wait` after the last speech (plus a 32 ms frame, the classifier's lag and
            // espeak-ng's quiet last phoneme).
            let delay = at as i64 - end_ms as i64;
            assert!(
                delay >= i64::from(wait) - 100 && delay <= i64::from(wait) + 150,
                "{input_rate} Hz, P {verdict}: stop {delay} ms after the speech, expected ~{wait}"
            );
            assert!((audio_end_ms as i64 - end_ms as i64).abs() <= 150);
            assert_eq!(d.last_probability(), Some(verdict));
            assert!(!d.in_speech());
            // The detector goes on: the same speech again is a second turn.
            let again = stops(&mut d, &audio, input_rate);
            assert_eq!(again.len(), 2, "{again:?}");
            d.reset();
            assert_eq!(d.last_probability(), None);
        }
    }
}

#[test]
fn bad_policies_are_typed_errors() {
    let vad = VadConfig::default();
    for (first_ms, second_ms, threshold, max_silence_ms) in [
        (0, 500, 0.5, 1000),
        (500, 500, 0.5, 1000),
        (200, 1000, 0.5, 1000),
        (200, 500, 1.5, 1000),
        (200, 500, f32::NAN, 1000),
    ] {
        let check = |silence_ms| Check {
            silence_ms,
            threshold,
        };
        let policy = EndOfTurnPolicy {
            checks: [check(first_ms), check(second_ms)],
            max_silence_ms,
        };
        let err = TurnDetector::new(Arc::new(Fixed(1.0)), policy, vad, 16_000).err();
        assert!(
            matches!(
                err,
                Some(VadError::InvalidPolicy { .. } | VadError::InvalidThreshold(_))
            ),
            "{err:?}"
        );
    }
    for e in [
        Eagerness::Low,
        Eagerness::Medium,
        Eagerness::High,
        Eagerness::Auto,
    ] {
        assert_eq!(Eagerness::parse(e.as_str()), Some(e));
        assert!(TurnDetector::new(Arc::new(Fixed(1.0)), e.policy(), vad, 24_000).is_ok());
    }
    assert_eq!(Eagerness::parse("eager"), None);
    assert_eq!(Eagerness::default(), Eagerness::Auto);
    assert_eq!(Eagerness::Auto.policy(), Eagerness::Medium.policy());
}

/// semantic_vad at `auto` and `low` on a few questions of the turn corpus (6 with 8
/// mid-sentence pauses of 300-900 ms, 4 clean). The bounds are the measured behaviour with
/// room, not the targets: smart-turn v3.2 barely tells espeak-ng's mid-sentence pauses
/// from its ends (examples/turn_eval on the whole corpus: P >= 0.5 at 54 % of pauses and 60 % of
/// ends after 200 ms; onnxruntime running pipecat's model gives 60 % and 60 % on the same
/// windows, scripts/smart_turn_check.py). Measured here: `auto` p50 782 ms, p95 1078 ms, 1/8
/// pauses ended (whole corpus: 18.8 %); `low` ends none of the 8 (whole corpus: 2.1 %). A
/// detector that leaves every turn to the longest wait (p50 ~ the wait) fails, and so does one
/// that ends turns at the pauses.
#[test]
fn auto_and_low_eagerness_on_the_turn_corpus() {
    if !common::have_espeak() {
        return;
    }
    let Some(model) = common::smart_turn() else {
        return;
    };
    let model = Arc::new(model);
    let items = turn::corpus(6, 4, 1).unwrap();
    let auto = Eagerness::Auto.policy();
    let low = Eagerness::Low.policy();
    // `auto`: half the questions end by the second check, on the model's word, not the timer's;
    // `low` leaves most to its longest wait (measured p50 1241 ms).
    for (eagerness, false_end_bound, p50_bound) in [
        (Eagerness::Auto, 0.25, auto.checks[1].silence_ms + 150),
        (Eagerness::Low, 0.125, low.max_silence_ms + 150),
    ] {
        let policy = eagerness.policy();
        let outcomes: Vec<turn::Outcome> = items
            .iter()
            .map(|item| {
                let mut d =
                    TurnDetector::new(model.clone(), policy, VadConfig::default(), 16_000).unwrap();
                let stops_ms = stops(&mut d, &item.audio, 16_000)
                    .into_iter()
                    .filter(|(_, e)| matches!(e, VadEvent::SpeechStopped { .. }))
                    .map(|(t, _)| t)
                    .collect();
                turn::Outcome { stops_ms }
            })
            .collect();
        let s = turn::score(&items, &outcomes);
        let p50 = turn::percentile(&s.delays, 50.0).unwrap();
        let p95 = turn::percentile(&s.delays, 95.0).unwrap();
        let name = eagerness.as_str();
        eprintln!(
            "{name} {policy:?}: {} questions, delay p50 {p50} ms, p95 {p95} ms, false ends \
             {}/{} pauses, other early ends {}, never ended {}",
            items.len(),
            s.false_ends,
            s.pauses,
            s.early_other,
            s.no_end
        );
        assert_eq!(s.no_end, 0, "{name}");
        assert!(s.pauses >= 6);
        assert!(
            p95 <= policy.max_silence_ms as i64 + 150,
            "{name}: p95 {p95}"
        );
        assert!(
            p50 >= policy.checks[0].silence_ms as i64 - 100,
            "{name}: p50 {p50}"
        );
        assert!(p50 <= i64::from(p50_bound), "{name}: p50 {p50}");
        assert!(
            s.false_ends as f64 <= false_end_bound * s.pauses as f64,
            "{name}: {}/{} mid-sentence pauses ended the turn",
            s.false_ends,
            s.pauses
        );
        assert_eq!(s.early_other, 0, "{name}");
    }
}

/// The deferred API (the server runs the model off its async threads): an ask per check, each
/// with the turn's audio; an answer ends the turn only if it is the outstanding ask of the
/// current silence and reaches its check's bar; stale answers do nothing.
#[test]
fn deferred_asks_and_stale_answers() {
    let Some((speech, rate)) = common::espeak("What is the capital of Australia?", "en-us") else {
        return;
    };
    // Only the voiced part: espeak-ng's own trailing silence would count as the pauses' own.
    let (first, last) = common::speech_extent(&speech);
    let speech = speech[first..last].to_vec();
    let policy = Eagerness::Medium.policy();
    let mut d = TurnDetector::new(Arc::new(Fixed(0.0)), policy, VadConfig::default(), rate)
        .expect("a valid policy");
    let mut audio = common::silence(rate as usize / 2);
    audio.extend_from_slice(&speech);
    audio.extend(common::silence(rate as usize * 2));
    let step = rate as usize / 100;
    let mut asks = Vec::new();
    let mut events = Vec::new();
    for (i, chunk) in audio.chunks(step).enumerate() {
        let (e, ask) = d.push_deferred(chunk);
        events.extend(e);
        if let Some(ask) = ask {
            // Below the first check's bar: the turn goes on, and the next check is asked later.
            let (e, next) = d.answer(ask.id, 0.5);
            assert!(e.is_empty() && next.is_none(), "{e:?} {next:?}");
            assert_eq!(d.answer(ask.id, 1.0).0, vec![], "an answered ask is stale");
            asks.push((i * 10, ask));
        }
    }
    // Both checks were asked, in order (then the longest wait ended the turn), each with the
    // turn's 16 kHz audio, the second holding the silence between the checks more.
    assert_eq!(
        asks.len(),
        2,
        "{:?}",
        asks.iter().map(|a| a.0).collect::<Vec<_>>()
    );
    assert_eq!(asks[0].1.silence_ms, policy.checks[0].silence_ms);
    assert_eq!(asks[1].1.silence_ms, policy.checks[1].silence_ms);
    let gap_ms = (asks[1].0 - asks[0].0) as i64;
    let expected = i64::from(policy.checks[1].silence_ms - policy.checks[0].silence_ms);
    assert!((gap_ms - expected).abs() <= 40, "asks {gap_ms} ms apart");
    let more = asks[1].1.audio.len() as i64 - asks[0].1.audio.len() as i64;
    assert!(
        (more - expected * 16).abs() <= 40 * 16,
        "{more} samples more"
    );
    assert_eq!(asks[0].1.audio_end_ms, asks[1].1.audio_end_ms);
    assert!(matches!(
        events[..],
        [
            VadEvent::SpeechStarted { .. },
            VadEvent::SpeechStopped { .. }
        ]
    ));

    // An answer that comes after speech came back is stale; one that reaches the bar in time
    // ends the turn where the speech ended.
    d.reset();
    let lead = rate as usize / 2 + speech.len();
    let mut pending = None;
    let mut stopped = None;
    for chunk in audio[..lead + rate as usize / 4].chunks(step) {
        if let (_, Some(ask)) = d.push_deferred(chunk) {
            pending = Some(ask);
        }
    }
    let ask = pending.expect("the first check was asked within 250 ms of silence");
    // The same question again: speech came back (asks at its word gaps go unanswered: speech
    // comes back after each, which makes them stale too).
    for chunk in speech.chunks(step) {
        let (e, _) = d.push_deferred(chunk);
        assert!(!e
            .iter()
            .any(|e| matches!(e, VadEvent::SpeechStopped { .. })));
    }
    assert_eq!(d.answer(ask.id, 1.0).0, vec![], "speech came back");
    for chunk in common::silence(rate as usize / 4).chunks(step) {
        if let (_, Some(ask)) = d.push_deferred(chunk) {
            let (e, _) = d.answer(ask.id, 0.99);
            stopped = e.into_iter().next();
        }
    }
    let Some(VadEvent::SpeechStopped { audio_end_ms }) = stopped else {
        panic!("no end at the first check: {stopped:?}");
    };
    let spoken_ms = ((lead + rate as usize / 4 + speech.len()) as u64 * 1000) / u64::from(rate);
    // Within a frame and the classifier's lag of the last voiced sample.
    assert!(
        (audio_end_ms as i64 - spoken_ms as i64).abs() <= 150,
        "ended at {audio_end_ms} ms, speech ended at {spoken_ms} ms"
    );
    assert!(!d.in_speech());
}
