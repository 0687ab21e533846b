//! Log-mel features against liquid-audio's preprocessor, the frame-count rule, and WAV
//! reading, resampling and writing.
//!
//! The fixtures in `tests/fixtures/features/` come from `tests/reference/make_features_reference.py`
//! (see there for the format and the liquid-audio class and parameters); the test signals are
//! regenerated here from the same formulas.

use std::f64::consts::PI;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use audio_engine::lfm2_audio::internals::audio::{
    self, decode_wav_bytes, encode_wav_24k, load_wav_bytes_16k, load_wav_file_16k, resample,
    write_wav_file_24k, AudioError, ReadOptions, INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE,
};
use audio_engine::lfm2_audio::internals::features::{
    frame_count, log_mel, valid_frame_count, FeatureError, LogMelFeatures, MelExtractor, N_MELS,
};

// ---------------------------------------------------------------------------------------------
// Test signals: the formulas of make_features_reference.py, evaluated in the same order in f64
// and rounded to f32.
// ---------------------------------------------------------------------------------------------

const SR: f64 = 16000.0;

/// 64-bit LCG (Knuth MMIX constants); 24-bit outputs mapped exactly onto [-1, 1).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 40) as f64 / 8388608.0 - 1.0
    }
}

fn chirp_noise() -> Vec<f32> {
    let n = 21920;
    let dur = n as f64 / SR;
    let mut rng = Lcg(1);
    (0..n)
        .map(|i| {
            let t = i as f64 / SR;
            let phase = 2.0 * PI * (100.0 * t + (7000.0 - 100.0) * t * t / (2.0 * dur));
            let hum = 0.05 * (2.0 * PI * 60.0 * t).sin();
            (0.5 * phase.sin() + hum + 0.05 * rng.next()) as f32
        })
        .collect()
}

fn tone440() -> Vec<f32> {
    let mut rng = Lcg(2);
    (0..8000)
        .map(|i| (0.3 * (2.0 * PI * 440.0 * i as f64 / SR).sin() + 0.01 * rng.next()) as f32)
        .collect()
}

fn odd_length() -> Vec<f32> {
    let mut rng = Lcg(3);
    (0..12345)
        .map(|i| {
            let t = i as f64 / SR;
            let env = 0.5 + 0.5 * (2.0 * PI * 1.5 * t).sin();
            let mut v =
                env * (0.2 * (2.0 * PI * 300.0 * t).sin() + 0.1 * (2.0 * PI * 2500.0 * t).sin());
            if i % 1000 == 0 {
                v += 0.8;
            }
            (v + 0.02 * rng.next()) as f32
        })
        .collect()
}

fn short() -> Vec<f32> {
    let mut rng = Lcg(4);
    (0..479)
        .map(|i| (0.1 * (2.0 * PI * 1000.0 * i as f64 / SR).sin() + 0.05 * rng.next()) as f32)
        .collect()
}

fn signal(name: &str) -> Vec<f32> {
    match name {
        "chirp_noise" => chirp_noise(),
        "tone440" => tone440(),
        "odd_length" => odd_length(),
        "short" => short(),
        other => panic!("unknown signal {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

struct Fixture {
    n_samples: usize,
    n_mels: usize,
    n_frames: usize,
    /// Mel-major values.
    data: Vec<f32>,
}

fn fixture_path(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/features")
        .join(file)
}

/// Reads `b"LMF1"`, u32 n_samples, u32 n_mels, u32 n_frames, then f32 values, all little-endian.
fn read_fixture(file: &str) -> Fixture {
    let bytes = std::fs::read(fixture_path(file)).expect("fixture missing");
    assert_eq!(&bytes[..4], b"LMF1", "bad magic in {file}");
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as usize;
    let (n_samples, n_mels, n_frames) = (u32_at(4), u32_at(8), u32_at(12));
    let data: Vec<f32> = bytes[16..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(data.len(), n_mels * n_frames, "bad length in {file}");
    Fixture {
        n_samples,
        n_mels,
        n_frames,
        data,
    }
}

/// The agreement metric: `max |ours - reference| / max |reference|` over all values.
///
/// Relative to the largest value rather than element-wise, because normalised features cross
/// zero, where an element-wise ratio is meaningless.
fn relative_error(ours: &[f32], reference: &[f32]) -> f64 {
    assert_eq!(ours.len(), reference.len());
    let scale = reference
        .iter()
        .fold(0.0f64, |m, &v| m.max(f64::from(v).abs()));
    let worst = ours.iter().zip(reference).fold(0.0f64, |m, (&a, &b)| {
        m.max((f64::from(a) - f64::from(b)).abs())
    });
    worst / scale
}

fn check_against(file: &str, name: &str, tolerance: f64) -> f64 {
    let fixture = read_fixture(file);
    let samples = signal(name);
    assert_eq!(samples.len(), fixture.n_samples, "{name}: signal length");
    let features = log_mel(&samples).unwrap();
    assert_eq!(features.n_mels(), fixture.n_mels, "{name}: n_mels");
    assert_eq!(features.n_frames(), fixture.n_frames, "{name}: n_frames");
    let rel = relative_error(features.data(), &fixture.data);
    println!("{file}: relative error {rel:.3e} (tolerance {tolerance:.0e})");
    assert!(
        rel <= tolerance,
        "{file}: relative error {rel:.3e} > {tolerance:.0e}"
    );
    rel
}

/// liquid-audio's preprocessor as it runs (f32): within 1e-4 relative.
#[test]
fn features_match_liquid_audio_preprocessor() {
    for name in ["chirp_noise", "tone440", "odd_length", "short"] {
        check_against(&format!("{name}.bin"), name, 1e-4);
    }
}

/// The same liquid-audio code run in float64: the algorithm itself matches to f32 rounding of
/// the output, so the 1e-5-level differences above are the reference's own f32 rounding.
#[test]
fn features_match_float64_reference() {
    for name in ["tone440", "odd_length", "short"] {
        check_against(&format!("{name}.f64ref.bin"), name, 1e-6);
    }
}

// ---------------------------------------------------------------------------------------------
// Frame counts, layout and feature errors
// ---------------------------------------------------------------------------------------------

#[test]
fn frame_count_rule() {
    let extractor = MelExtractor::new();
    let mut rng = Lcg(9);
    for n in [
        1usize, 159, 160, 161, 319, 320, 321, 479, 480, 1000, 12345, 16000,
    ] {
        let samples: Vec<f32> = (0..n).map(|_| (0.1 * rng.next()) as f32).collect();
        let f = extractor.compute(&samples).unwrap();
        assert_eq!(f.n_frames(), n / 160 + 1, "n = {n}");
        assert_eq!(f.n_frames(), frame_count(n));
        assert_eq!(f.n_valid_frames(), n / 160);
        assert_eq!(f.n_valid_frames(), valid_frame_count(n));
        assert_eq!(f.n_mels(), N_MELS);
        assert_eq!(f.data().len(), N_MELS * f.n_frames());
        for mel in 0..N_MELS {
            // Frames at or past the valid length are zero.
            assert!(f.mel_row(mel)[f.n_valid_frames()..]
                .iter()
                .all(|&v| v == 0.0));
        }
        if n < 320 {
            // Fewer than two valid frames: NeMo's output is all zero.
            assert!(f.data().iter().all(|&v| v == 0.0), "n = {n}");
        } else {
            // Normalised rows over the valid frames: mean 0, unbiased std ~1.
            let row = &f.mel_row(40)[..f.n_valid_frames()];
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / row.len() as f64;
            assert!(mean.abs() < 1e-5, "n = {n}: mean {mean}");
        }
    }
}

#[test]
fn layout_accessors_agree() {
    let f: LogMelFeatures = log_mel(&tone440()).unwrap();
    let frame_major = f.to_frame_major();
    for mel in [0, 1, 63, 127] {
        for frame in [0, 1, 25, f.n_frames() - 1] {
            let v = f.get(mel, frame);
            assert_eq!(v, f.data()[mel * f.n_frames() + frame]);
            assert_eq!(v, f.mel_row(mel)[frame]);
            assert_eq!(v, f.frame(frame)[mel]);
            assert_eq!(v, frame_major[frame * f.n_mels() + mel]);
        }
    }
    assert_eq!(f.clone().into_data(), f.data());
}

#[test]
fn feature_errors() {
    assert_eq!(log_mel(&[]).unwrap_err(), FeatureError::Empty);
    let mut samples = tone440();
    samples[123] = f32::NAN;
    assert_eq!(
        log_mel(&samples).unwrap_err(),
        FeatureError::NonFinite { index: 123 }
    );
    samples[123] = 0.0;
    samples[7] = f32::INFINITY;
    assert_eq!(
        log_mel(&samples).unwrap_err(),
        FeatureError::NonFinite { index: 7 }
    );
}

// ---------------------------------------------------------------------------------------------
// WAV reading and resampling
// ---------------------------------------------------------------------------------------------

fn wav_bytes<S: hound::Sample + Copy>(spec: hound::WavSpec, samples: &[S]) -> Vec<u8> {
    let mut cursor = Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut cursor, spec).unwrap();
    for &s in samples {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    cursor.into_inner()
}

fn int_spec(channels: u16, sample_rate: u32, bits: u16) -> hound::WavSpec {
    hound::WavSpec {
        channels,
        sample_rate,
        bits_per_sample: bits,
        sample_format: hound::SampleFormat::Int,
    }
}

fn float_spec(channels: u16, sample_rate: u32) -> hound::WavSpec {
    hound::WavSpec {
        channels,
        sample_rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    }
}

/// Largest |a - b| over the middle of the signal (edges see the zero padding of the filter).
fn max_err_middle(ours: &[f32], expected: impl Fn(usize) -> f64, margin: usize) -> f64 {
    (margin..ours.len() - margin)
        .map(|i| (f64::from(ours[i]) - expected(i)).abs())
        .fold(0.0, f64::max)
}

/// 16-bit stereo 44.1 kHz -> mono 16 kHz: channels averaged, length and frequencies preserved.
#[test]
fn stereo_44k1_to_mono_16k() {
    let n_in = 66150; // 1.5 s
    let left = |i: usize| 0.5 * (2.0 * PI * 1000.0 * i as f64 / 44100.0).sin();
    let right = |i: usize| 0.3 * (2.0 * PI * 3000.0 * i as f64 / 44100.0).sin();
    let mut interleaved = Vec::with_capacity(2 * n_in);
    for i in 0..n_in {
        interleaved.push((left(i) * 32767.0).round() as i16);
        interleaved.push((right(i) * 32767.0).round() as i16);
    }
    let bytes = wav_bytes(int_spec(2, 44100, 16), &interleaved);

    let decoded = decode_wav_bytes(&bytes, &ReadOptions::default()).unwrap();
    assert_eq!(decoded.sample_rate, 44100);
    assert_eq!(decoded.samples.len(), n_in);
    assert!((decoded.duration_seconds() - 1.5).abs() < 1e-12);
    assert_eq!(
        decoded.samples[1],
        ((f64::from(interleaved[2]) + f64::from(interleaved[3])) / 2.0 / 32768.0) as f32
    );

    let mono = load_wav_bytes_16k(&bytes, &ReadOptions::default()).unwrap();
    assert_eq!(mono.len(), 24000, "1.5 s at 16 kHz");
    // The mix at 16 kHz, sample for sample (the resampler has no delay).
    let expected = |i: usize| {
        let t = i as f64 / 16000.0;
        (0.5 * (2.0 * PI * 1000.0 * t).sin() + 0.3 * (2.0 * PI * 3000.0 * t).sin()) / 2.0
    };
    let err = max_err_middle(&mono, expected, 200);
    println!("44.1 kHz stereo -> 16 kHz mono: max error {err:.2e}");
    assert!(err < 1e-3, "max error {err}");

    // The dominant frequency, by a DFT scan in 10 Hz steps over the middle second.
    let seg = &mono[4000..20000];
    let power_at = |f: f64| {
        let (mut re, mut im) = (0.0f64, 0.0f64);
        for (i, &s) in seg.iter().enumerate() {
            let a = 2.0 * PI * f * i as f64 / 16000.0;
            re += f64::from(s) * a.cos();
            im += f64::from(s) * a.sin();
        }
        re * re + im * im
    };
    let best = (50..400)
        .map(|k| k as f64 * 10.0)
        .max_by(|a, b| power_at(*a).total_cmp(&power_at(*b)))
        .unwrap();
    assert_eq!(best, 1000.0);
}

#[test]
fn pass_through_at_16k_is_exact() {
    let samples = chirp_noise();
    assert_eq!(resample(&samples, 16000, 16000).unwrap(), samples);

    // A 16 kHz float WAV comes back bit for bit.
    let bytes = wav_bytes(float_spec(1, 16000), &samples);
    assert_eq!(
        load_wav_bytes_16k(&bytes, &ReadOptions::default()).unwrap(),
        samples
    );

    // A 16 kHz 16-bit WAV comes back as exactly i16 / 32768.
    let ints: Vec<i16> = samples
        .iter()
        .map(|&s| (f64::from(s) * 32767.0).round() as i16)
        .collect();
    let bytes = wav_bytes(int_spec(1, 16000, 16), &ints);
    let got = load_wav_bytes_16k(&bytes, &ReadOptions::default()).unwrap();
    assert!(got
        .iter()
        .zip(&ints)
        .all(|(&g, &i)| g == f32::from(i) / 32768.0));
}

#[test]
fn bit_depths_scale_to_unit_range() {
    let opts = ReadOptions::default();
    // 8-bit WAV is unsigned on disk; hound hands it over signed.
    let b8 = wav_bytes(int_spec(1, 16000, 8), &[-128i8, 0, 64, 127]);
    assert_eq!(
        decode_wav_bytes(&b8, &opts).unwrap().samples,
        vec![-1.0, 0.0, 0.5, 127.0 / 128.0]
    );
    let b24 = wav_bytes(int_spec(1, 16000, 24), &[-8388608i32, 4194304, 8388607]);
    assert_eq!(
        decode_wav_bytes(&b24, &opts).unwrap().samples,
        vec![-1.0, 0.5, (8388607.0f64 / 8388608.0) as f32]
    );
    let b32 = wav_bytes(int_spec(1, 16000, 32), &[i32::MIN, 1 << 30]);
    assert_eq!(
        decode_wav_bytes(&b32, &opts).unwrap().samples,
        vec![-1.0, 0.5]
    );
    // Four channels averaged.
    let bf = wav_bytes(
        float_spec(4, 16000),
        &[1.0f32, 0.0, 0.5, 0.5, -1.0, -1.0, -1.0, -1.0],
    );
    assert_eq!(
        decode_wav_bytes(&bf, &opts).unwrap().samples,
        vec![0.5, -1.0]
    );
}

/// Smallest and largest value of `out` away from the edges.
fn middle_range(out: &[f32], margin: usize) -> (f64, f64) {
    out[margin..out.len() - margin]
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(f64::from(v)), hi.max(f64::from(v)))
        })
}

/// The resampler is torchaudio's `resample` at its defaults (what liquid-audio uses): the
/// expected numbers below are torchaudio 2.11's float32 output on the same inputs, measured in
/// Python (`torchaudio.functional.resample(x, from, 16000)` with x built as here); they hold
/// to float32 rounding (torchaudio sums in float32, we in f64). Any other filter misses them:
/// the previous Kaiser resampler had a DC gain of exactly 1 and a residue below 1e-6.
#[test]
fn resampler_properties() {
    // DC: torchaudio's taps are not normalised, so DC comes out 1e-4..9e-4 high, per phase.
    for (from, lo, hi) in [
        (8000u32, 0.250_009_656, 0.250_218_838),
        (22050, 0.250_105_411, 0.250_128_031),
        (44100, 0.250_115_514, 0.250_117_898),
        (48000, 0.250_116_497, 0.250_116_497),
    ] {
        let dc = vec![0.25f32; from as usize];
        let out = resample(&dc, from, 16000).unwrap();
        assert_eq!(out.len(), 16000);
        let (got_lo, got_hi) = middle_range(&out, 400);
        println!("{from} Hz -> 16 kHz, DC 0.25: {got_lo:.9} ..= {got_hi:.9}");
        assert!(
            (got_lo - lo).abs() < 2e-7 && (got_hi - hi).abs() < 2e-7,
            "{from} Hz: DC {got_lo:.9} ..= {got_hi:.9}, torchaudio {lo:.9} ..= {hi:.9}"
        );
    }
    // A tone above the new Nyquist frequency (48 kHz, 12 kHz, amplitude 0.5) folds back to
    // 4 kHz at -55 dB: the Hann-windowed sinc's stop band.
    let tone: Vec<f32> = (0..48000)
        .map(|i| (0.5 * (2.0 * PI * 12000.0 * i as f64 / 48000.0).sin()) as f32)
        .collect();
    let out = resample(&tone, 48000, 16000).unwrap();
    let residue = max_err_middle(&out, |_| 0.0, 400);
    println!("48 kHz -> 16 kHz, 12 kHz tone: residue {residue:.6e} (torchaudio 8.830756e-4)");
    assert!(
        (residue - 8.830_756e-4).abs() < 1e-6,
        "aliased residue {residue:.6e}"
    );
    // Sines in the pass band: the error against the ideal sine is the filter's ripple and
    // band-edge droop (6 kHz: -0.13 dB), the same as torchaudio's. 44 101 Hz has no common
    // factor with 16 kHz: 16 000 phases.
    for (from, f, ripple) in [
        (8000u32, 440.0, 2.403_032e-4),
        (11025, 3000.0, 1.160_979e-3),
        (44101, 440.0, 3.157_557e-4),
        (44101, 6000.0, 7.715_315e-3),
    ] {
        let x: Vec<f32> = (0..from as usize)
            .map(|i| (0.5 * (2.0 * PI * f * i as f64 / f64::from(from)).sin()) as f32)
            .collect();
        let out = resample(&x, from, 16000).unwrap();
        assert_eq!(out.len(), 16000, "1 s in, 1 s out");
        let err = max_err_middle(
            &out,
            |i| 0.5 * (2.0 * PI * f * i as f64 / 16000.0).sin(),
            400,
        );
        println!("{from} Hz -> 16 kHz, {f} Hz sine: max error {err:.6e} (torchaudio {ripple:.6e})");
        assert!(
            (err - ripple).abs() < 1e-6,
            "{from} Hz, {f} Hz: error {err:.6e}"
        );
    }
    // Length: ceil(n * to / from) for lengths that are not whole periods.
    for (from, to, n) in [
        (44100u32, 16000u32, 12345usize),
        (16000, 44100, 777),
        (8000, 16000, 3),
    ] {
        let out = resample(&vec![0.1; n], from, to).unwrap();
        assert_eq!(
            out.len(),
            (n * to as usize).div_ceil(from as usize),
            "{from} -> {to}, {n}"
        );
    }
    // Extreme rate pairs (no common factor, or the largest ratios) run and keep DC.
    for (from, to) in [(192_000u32, 1_000u32), (1_000, 192_000), (191_999, 191_998)] {
        let n = from as usize / 10;
        let out = resample(&vec![0.25; n], from, to).unwrap();
        assert_eq!(out.len(), (n * to as usize).div_ceil(from as usize));
        let (lo, hi) = middle_range(&out, out.len() / 4);
        assert!(
            (lo - 0.25).abs() < 1e-3 && (hi - 0.25).abs() < 1e-3,
            "{from} -> {to}: DC {lo} ..= {hi}"
        );
    }
    // Deterministic.
    let x = chirp_noise();
    assert_eq!(
        resample(&x, 16000, 44100).unwrap(),
        resample(&x, 16000, 44100).unwrap()
    );
    assert!(resample(&[], 44100, 16000).unwrap().is_empty());
    for (from, to) in [(0, 16000), (16000, 0), (400_000, 16000), (16000, 999)] {
        assert!(matches!(
            resample(&x, from, to),
            Err(AudioError::UnsupportedFormat(_))
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// WAV errors
// ---------------------------------------------------------------------------------------------

#[test]
fn empty_wav_is_empty_error() {
    let bytes = wav_bytes::<i16>(int_spec(1, 16000, 16), &[]);
    assert!(matches!(
        load_wav_bytes_16k(&bytes, &ReadOptions::default()),
        Err(AudioError::Empty)
    ));
}

#[test]
fn nan_and_inf_samples_are_refused() {
    let bytes = wav_bytes(float_spec(1, 16000), &[0.0f32, 0.5, f32::NAN, 0.1]);
    assert!(matches!(
        load_wav_bytes_16k(&bytes, &ReadOptions::default()),
        Err(AudioError::NonFinite { index: 2 })
    ));
    // In a stereo file the index is the frame's.
    let bytes = wav_bytes(float_spec(2, 16000), &[0.0f32, 0.5, 0.2, f32::NEG_INFINITY]);
    assert!(matches!(
        load_wav_bytes_16k(&bytes, &ReadOptions::default()),
        Err(AudioError::NonFinite { index: 1 })
    ));
    assert!(matches!(
        audio::validate_samples(&[0.0, f32::NAN], 16000, &ReadOptions::default()),
        Err(AudioError::NonFinite { index: 1 })
    ));
}

#[test]
fn too_long_is_refused_before_decoding() {
    let bytes = wav_bytes(int_spec(1, 8000, 16), &vec![0i16; 16001]);
    let opts = ReadOptions { max_seconds: 2.0 };
    match load_wav_bytes_16k(&bytes, &opts) {
        Err(AudioError::TooLong { seconds, limit }) => {
            assert!((seconds - 16001.0 / 8000.0).abs() < 1e-12);
            assert_eq!(limit, 2.0);
        }
        other => panic!("expected TooLong, got {other:?}"),
    }
    // Exactly at the limit is fine.
    let bytes = wav_bytes(int_spec(1, 8000, 16), &vec![0i16; 16000]);
    assert_eq!(load_wav_bytes_16k(&bytes, &opts).unwrap().len(), 32000);
    assert!(matches!(
        audio::validate_samples(&[0.0; 2001], 1000, &ReadOptions { max_seconds: 2.0 }),
        Err(AudioError::TooLong { .. })
    ));
}

#[test]
fn garbage_and_truncated_bytes_are_unreadable() {
    let opts = ReadOptions::default();
    for garbage in [
        &b""[..],
        &b"hello, this is not a wav file at all"[..],
        &b"RIFF\x10\x00\x00\x00WAVEfmt "[..],
    ] {
        assert!(
            matches!(
                load_wav_bytes_16k(garbage, &opts),
                Err(AudioError::Unreadable(_))
            ),
            "{garbage:?}"
        );
    }
    // Deterministic pseudo-random bytes.
    let mut rng = Lcg(77);
    let noise: Vec<u8> = (0..4096)
        .map(|_| (rng.next() * 127.0) as i8 as u8)
        .collect();
    assert!(matches!(
        load_wav_bytes_16k(&noise, &opts),
        Err(AudioError::Unreadable(_))
    ));
    // A valid file cut in the middle of its data.
    let bytes = wav_bytes(int_spec(2, 44100, 16), &vec![1000i16; 2000]);
    assert!(matches!(
        load_wav_bytes_16k(&bytes[..bytes.len() - 1001], &opts),
        Err(AudioError::Unreadable(_))
    ));
    // Every prefix of a valid file fails cleanly or decodes; none panics.
    let bytes = wav_bytes(float_spec(1, 16000), &[0.1f32; 8]);
    for end in 0..bytes.len() {
        let _ = load_wav_bytes_16k(&bytes[..end], &opts);
    }
}

#[test]
fn unsupported_formats_are_typed() {
    // A well-formed 16 kHz mono A-law (format tag 6) header with one sample.
    let mut alaw = Vec::new();
    alaw.extend_from_slice(b"RIFF");
    alaw.extend_from_slice(&(4u32 + 8 + 16 + 8 + 2).to_le_bytes());
    alaw.extend_from_slice(b"WAVEfmt ");
    alaw.extend_from_slice(&16u32.to_le_bytes());
    alaw.extend_from_slice(&6u16.to_le_bytes()); // A-law
    alaw.extend_from_slice(&1u16.to_le_bytes()); // channels
    alaw.extend_from_slice(&16000u32.to_le_bytes());
    alaw.extend_from_slice(&16000u32.to_le_bytes()); // byte rate
    alaw.extend_from_slice(&1u16.to_le_bytes()); // block align
    alaw.extend_from_slice(&8u16.to_le_bytes()); // bits
    alaw.extend_from_slice(b"data");
    alaw.extend_from_slice(&2u32.to_le_bytes());
    alaw.extend_from_slice(&[0x55, 0xd5]);
    assert!(matches!(
        load_wav_bytes_16k(&alaw, &ReadOptions::default()),
        Err(AudioError::UnsupportedFormat(_))
    ));
    // Absurd sample rates are refused before decoding.
    for rate in [500u32, 400_000] {
        let bytes = wav_bytes(int_spec(1, rate, 16), &[0i16; 16]);
        assert!(matches!(
            load_wav_bytes_16k(&bytes, &ReadOptions::default()),
            Err(AudioError::UnsupportedFormat(_))
        ));
    }
    let missing = Path::new("/nonexistent/dir/audio.wav");
    assert!(matches!(
        load_wav_file_16k(missing, &ReadOptions::default()),
        Err(AudioError::Io { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

#[test]
fn write_24k_round_trips() {
    let samples: Vec<f32> = (0..2400)
        .map(|i| (0.7 * (2.0 * PI * 300.0 * i as f64 / 24000.0).sin()) as f32)
        .collect();
    let bytes = encode_wav_24k(&samples).unwrap();
    let spec = hound::WavReader::new(Cursor::new(&bytes)).unwrap().spec();
    assert_eq!(spec, float_spec(1, OUTPUT_SAMPLE_RATE));
    let back = decode_wav_bytes(&bytes, &ReadOptions::default()).unwrap();
    assert_eq!(back.sample_rate, 24000);
    assert_eq!(back.samples, samples);

    let dir = std::env::temp_dir().join(format!("audio-engine-features-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out.wav");
    write_wav_file_24k(&path, &samples).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    // Read back as model input: 24 kHz -> 16 kHz.
    let as_input = load_wav_file_16k(&path, &ReadOptions::default()).unwrap();
    assert_eq!(as_input.len(), 1600);
    assert_eq!(INPUT_SAMPLE_RATE, 16000);
    std::fs::remove_dir_all(&dir).unwrap();

    assert!(matches!(
        encode_wav_24k(&[0.0, f32::NAN]),
        Err(AudioError::NonFinite { index: 1 })
    ));
    // An empty output is still a valid (empty) WAV.
    let empty = encode_wav_24k(&[]).unwrap();
    assert!(matches!(
        decode_wav_bytes(&empty, &ReadOptions::default()),
        Err(AudioError::Empty)
    ));
}
