//! The segmenter's contract: chunking does not change events, silence gives none, bad settings
//! are typed errors.

mod common;

use voice_activity::{EnergyClassifier, Segmenter, VadConfig, VadError, VadEvent};

/// Pushes `audio` in chunks of `chunk` samples (all at once when 0) and collects the events.
fn events_in_chunks(
    mut segmenter: Segmenter<impl voice_activity::Classifier>,
    audio: &[f32],
    chunk: usize,
) -> Vec<VadEvent> {
    if chunk == 0 {
        return segmenter.push(audio);
    }
    let events: Vec<VadEvent> = audio
        .chunks(chunk)
        .flat_map(|c| segmenter.push(c))
        .collect();
    assert_eq!(segmenter.samples_seen(), audio.len() as u64);
    events
}

/// Tone bursts with gaps: loud enough for the energy classifier, whatever earshot makes of them.
fn bursts(rate: u32) -> Vec<f32> {
    let mut out = Vec::new();
    for (i, (on_ms, off_ms)) in [(400, 900), (250, 700), (800, 1200)]
        .into_iter()
        .enumerate()
    {
        let on = rate as usize * on_ms / 1000;
        let hz = 200.0 + 100.0 * i as f32;
        out.extend(
            (0..on).map(|n| 0.3 * (2.0 * std::f32::consts::PI * hz * n as f32 / rate as f32).sin()),
        );
        out.extend(common::silence(rate as usize * off_ms / 1000));
    }
    out
}

#[test]
fn chunking_does_not_change_events() {
    let config = VadConfig::default();
    for rate in [16_000, 24_000] {
        // The energy classifier on tone bursts: events guaranteed.
        let audio = bursts(rate);
        let whole = events_in_chunks(
            Segmenter::with_classifier(config, rate, EnergyClassifier).unwrap(),
            &audio,
            0,
        );
        assert_eq!(
            whole.len(),
            6,
            "{rate} Hz: three bursts, three turns: {whole:?}"
        );
        for chunk in [1, 160, 2400] {
            let chunked = events_in_chunks(
                Segmenter::with_classifier(config, rate, EnergyClassifier).unwrap(),
                &audio,
                chunk,
            );
            assert_eq!(chunked, whole, "{rate} Hz, chunks of {chunk}");
        }
    }
    // The default classifier on real speech where espeak-ng is installed (else on the bursts),
    // at the Realtime API's 24 kHz: the resampled path, where chunking could matter.
    let rate = 24_000;
    let (speech, real) = match common::espeak("Chunks must not matter.", "en-us") {
        Some((speech, speech_rate)) => {
            let mut at_rate = common::silence(rate as usize * 3 / 10);
            voice_activity::Resampler::new(speech_rate, rate)
                .unwrap()
                .process(&speech, &mut at_rate);
            at_rate.extend(common::silence(rate as usize * 8 / 10));
            (at_rate, true)
        }
        None => {
            eprintln!("espeak-ng not on PATH: the default classifier's chunking runs on tones");
            (bursts(rate), false)
        }
    };
    let whole = events_in_chunks(Segmenter::new(config, rate).unwrap(), &speech, 0);
    // Speech gives a turn to compare (tones may give none).
    assert!(!real || whole.len() == 2, "{whole:?}");
    for chunk in [1, 160, 2400] {
        let chunked = events_in_chunks(Segmenter::new(config, rate).unwrap(), &speech, chunk);
        assert_eq!(
            chunked, whole,
            "default classifier, {rate} Hz, chunks of {chunk}"
        );
    }
}

#[test]
fn silence_gives_no_events() {
    for rate in [16_000, 24_000, 48_000] {
        let mut segmenter = Segmenter::new(VadConfig::default(), rate).unwrap();
        // Two seconds of digital silence, then of very quiet (-70 dBFS) seeded noise.
        assert_eq!(segmenter.push(&common::silence(2 * rate as usize)), vec![]);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let hiss: Vec<f32> = (0..2 * rate as usize)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * 5.5e-4
            })
            .collect();
        assert_eq!(segmenter.push(&hiss), vec![]);
        assert!(!segmenter.in_speech());
        assert_eq!(segmenter.samples_seen(), 4 * rate as u64);
    }
}

#[test]
fn reset_starts_the_timeline_again() {
    let audio = bursts(16_000);
    let mut segmenter =
        Segmenter::with_classifier(VadConfig::default(), 16_000, EnergyClassifier).unwrap();
    let first = segmenter.push(&audio);
    segmenter.push(&audio[..8_000]);
    assert!(segmenter.in_speech(), "half a second into the first burst");
    segmenter.reset();
    assert!(!segmenter.in_speech());
    assert_eq!(segmenter.samples_seen(), 0);
    assert_eq!(segmenter.push(&audio), first);
}

#[test]
fn non_finite_and_loud_input_is_tolerated() {
    let mut segmenter = Segmenter::new(VadConfig::default(), 24_000).unwrap();
    let mut audio = vec![f32::NAN; 4800];
    audio.extend(vec![f32::INFINITY; 4800]);
    audio.extend(vec![-7.0; 4800]);
    // Whatever the classifier decides, this must not panic and must keep count.
    segmenter.push(&audio);
    assert_eq!(segmenter.samples_seen(), audio.len() as u64);
}

#[test]
fn bad_settings_are_typed_errors() {
    for threshold in [-0.1, 1.01, f32::NAN] {
        let config = VadConfig {
            threshold,
            ..VadConfig::default()
        };
        assert!(
            matches!(
                Segmenter::new(config, 16_000),
                Err(VadError::InvalidThreshold(_))
            ),
            "{threshold}"
        );
    }
    for rate in [0, 1, 7_999, 16_001, 1_000_000] {
        assert!(
            matches!(
                Segmenter::new(VadConfig::default(), rate),
                Err(VadError::UnsupportedSampleRate { .. })
            ),
            "{rate} Hz"
        );
    }
    for rate in [8_000, 16_000, 22_050, 24_000, 44_100, 48_000] {
        assert!(
            Segmenter::new(VadConfig::default(), rate).is_ok(),
            "{rate} Hz"
        );
    }
    for threshold in [0.0, 1.0] {
        assert!(Segmenter::new(
            VadConfig {
                threshold,
                ..VadConfig::default()
            },
            16_000
        )
        .is_ok());
    }
}
