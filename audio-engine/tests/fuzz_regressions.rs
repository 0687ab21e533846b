//! Inputs the fuzz targets (`fuzz/`) found, kept as fixtures under `tests/fixtures/fuzz/`
//! (GGUF ones as `.bin`: the repository ignores `*.gguf`): each must give its typed error.

use audio_engine::ggml::gguf::GgufFile;
use audio_engine::lfm2_audio::internals::audio::{
    decode_wav_bytes, load_wav_bytes_16k, resample, AudioError, ReadOptions,
};
use audio_engine::lfm2_audio::internals::backbone_config::{Lfm2Config, MAX_LAYERS};

fn fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// fuzz target wav: a 24 kHz float WAV (WAVE_FORMAT_EXTENSIBLE) holding finite samples up to
/// 3.4e38. They decode, but the resampler's sinc overshoot carried them past f32::MAX, so
/// `load_wav_bytes_16k` returned infinite samples.
#[test]
fn samples_too_large_to_resample_are_out_of_range() {
    let bytes = fixture("wav-resample-overflow.wav");
    let opts = ReadOptions { max_seconds: 0.5 };
    let mono = decode_wav_bytes(&bytes, &opts).unwrap();
    assert_eq!(mono.sample_rate, 24_000);
    assert!(mono.samples.iter().all(|s| s.is_finite()));
    match load_wav_bytes_16k(&bytes, &opts) {
        Err(AudioError::OutOfRange { index }) => assert!(index < mono.samples.len()),
        other => panic!("expected OutOfRange, got {other:?}"),
    }
    // The same through `resample` on the decoded samples; at 16 kHz they pass through
    // untouched (the features refuse non-finite values themselves).
    assert!(matches!(
        resample(&mono.samples, 24_000, 16_000),
        Err(AudioError::OutOfRange { .. })
    ));
    assert_eq!(
        resample(&mono.samples, 16_000, 16_000).unwrap(),
        mono.samples
    );
    let fine: Vec<f32> = (0..64).map(|i| (i as f32 * 0.1).sin()).collect();
    assert!(resample(&fine, 24_000, 16_000).is_ok());
}

/// fuzz target gguf: a backbone whose `lfm2.block_count` is near u32::MAX with a scalar
/// `lfm2.attention.head_count`; broadcasting it to one entry per layer allocated 16 GiB.
#[test]
fn a_layer_count_past_llamas_limit_is_refused_before_any_allocation() {
    let file = GgufFile::from_bytes(fixture("gguf-layer-count.bin")).unwrap();
    let layers = file.get_integer::<u64>("lfm2.block_count").unwrap();
    assert!(layers > u64::from(MAX_LAYERS), "{layers}");
    let err = Lfm2Config::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("lfm2.block_count"), "{err}");
    assert!(err.contains("512"), "{err}");
}
