//! WAV bytes -> mono at the file's rate -> 16 kHz: the engine's only audio input path (ASR
//! input, S2S questions, earlier questions in a history). Any bytes must give a typed
//! `AudioError` or audio that is non-empty, finite and within the length limit.
#![no_main]

use audio_engine::lfm2_audio::internals::audio::{decode_wav_bytes, load_wav_bytes_16k, ReadOptions};
use lfm2_engine_fuzz::{tone, wav_bytes, write_seeds_if_asked};
use libfuzzer_sys::fuzz_target;

/// why: a small limit keeps every input cheap (the header's length is judged before decoding)
/// and still lets the fuzzer reach the limit's boundary.
const MAX_SECONDS: f64 = 0.5;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let t = tone(800);
    vec![
        (
            "pcm16_mono_16k.wav".into(),
            wav_bytes(&t, 16_000, 1, 16, false),
        ),
        (
            "pcm16_stereo_44k.wav".into(),
            wav_bytes(&t, 44_100, 2, 16, false),
        ),
        (
            "pcm8_mono_8k.wav".into(),
            wav_bytes(&t[..200], 8_000, 1, 8, false),
        ),
        (
            "pcm24_mono_48k.wav".into(),
            wav_bytes(&t[..300], 48_000, 1, 24, false),
        ),
        (
            "f32_mono_24k.wav".into(),
            wav_bytes(&t[..400], 24_000, 1, 32, true),
        ),
        (
            "pcm32_3ch_22k.wav".into(),
            wav_bytes(&t[..300], 22_050, 3, 32, false),
        ),
    ]
}

fuzz_target!(
    init: { write_seeds_if_asked(seeds) },
    |data: &[u8]| {
        let opts = ReadOptions { max_seconds: MAX_SECONDS };
        if let Ok(a) = decode_wav_bytes(data, &opts) {
            assert!(!a.samples.is_empty(), "decoded audio is empty");
            assert!(a.duration_seconds() <= MAX_SECONDS + 1e-9, "longer than the limit");
        }
        if let Ok(s) = load_wav_bytes_16k(data, &opts) {
            assert!(!s.is_empty(), "resampled audio is empty");
            assert!(s.iter().all(|x| x.is_finite()), "non-finite sample after resampling");
        }
    }
);
