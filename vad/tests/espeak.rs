//! Real speech: espeak-ng utterances with pauses give one turn each, at sane times.

mod common;

use voice_activity::{
    EarshotClassifier, Resampler, Segmenter, SileroClassifier, VadConfig, VadEvent,
};

const UTTERANCES: [(&str, &str); 3] = [
    ("en-us", "What is the weather like in Paris today?"),
    ("en-gb", "Please book a table for two at eight o'clock."),
    ("en-us+f3", "Thank you, that will be all for now."),
];

#[test]
fn one_turn_per_utterance() {
    let config = VadConfig::default();
    for rate in [16_000u32, 24_000] {
        let mut audio = common::silence(rate as usize * 7 / 10);
        let mut labels = Vec::new();
        for (voice, text) in UTTERANCES {
            let Some((speech, speech_rate)) = common::espeak(text, voice) else {
                eprintln!("espeak-ng not on PATH: skipping the real-speech test");
                return;
            };
            let mut at_rate = Vec::new();
            Resampler::new(speech_rate, rate)
                .unwrap()
                .process(&speech, &mut at_rate);
            let (first, end) = common::speech_extent(&at_rate);
            let ms = |i: usize| ((audio.len() + i) as u64 * 1000 / u64::from(rate)) as i64;
            labels.push((ms(first), ms(end)));
            audio.extend_from_slice(&at_rate);
            // Pauses well over silence_duration_ms (500 ms).
            audio.extend(common::silence(rate as usize * 13 / 10));
        }
        let mut segmenter = Segmenter::new(config, rate).unwrap();
        let events: Vec<VadEvent> = audio
            .chunks(rate as usize / 50)
            .flat_map(|c| segmenter.push(c))
            .collect();
        eprintln!("{rate} Hz: labels {labels:?}, events {events:?}");
        assert_eq!(
            events.len(),
            2 * labels.len(),
            "one start and one stop per utterance: {events:?}"
        );
        for (pair, (onset, end)) in events.chunks(2).zip(&labels) {
            let (
                VadEvent::SpeechStarted { audio_start_ms },
                VadEvent::SpeechStopped { audio_end_ms },
            ) = (pair[0], pair[1])
            else {
                panic!("expected a start then a stop: {pair:?}");
            };
            // The detected onset (start + padding) within 100 ms of the labelled onset.
            let detected_onset = audio_start_ms as i64 + i64::from(config.prefix_padding_ms);
            assert!(
                (detected_onset - onset).abs() <= 100,
                "onset {detected_onset} ms vs labelled {onset} ms"
            );
            // The end within 250 ms of the labelled end (the last phoneme may be quiet).
            assert!(
                (audio_end_ms as i64 - end).abs() <= 250,
                "end {audio_end_ms} ms vs labelled {end} ms"
            );
        }
        assert!(!segmenter.in_speech());
    }
}

/// Each real classifier, not only the default, finds one espeak-ng utterance as one turn.
#[test]
fn each_classifier_finds_an_utterance() {
    let Some((speech, rate)) = common::espeak("Could you turn the lights off, please?", "en-gb+f3")
    else {
        eprintln!("espeak-ng not on PATH: skipping the real-speech test");
        return;
    };
    let mut audio = common::silence(rate as usize / 2);
    audio.extend_from_slice(&speech);
    audio.extend(common::silence(rate as usize));
    let config = VadConfig::default();
    let runs = [
        (
            "earshot",
            Segmenter::with_classifier(config, rate, EarshotClassifier::new())
                .unwrap()
                .push(&audio),
        ),
        (
            "silero",
            Segmenter::with_classifier(config, rate, SileroClassifier::default())
                .unwrap()
                .push(&audio),
        ),
    ];
    for (name, events) in runs {
        assert!(
            matches!(
                events[..],
                [
                    VadEvent::SpeechStarted { .. },
                    VadEvent::SpeechStopped { .. }
                ]
            ),
            "{name}: {events:?}"
        );
    }
}
