//! 44.1 kHz and 48 kHz stereo WAVs against liquid-audio 1.3.0: the mono downmix, the resampled
//! 16 kHz signal (torchaudio's `resample`, which liquid-audio's `ChatState.add_audio` calls),
//! the log-mel features of it and greedy ASR on the tiny synthetic checkpoint, plus torchaudio's
//! output-length rule.
//!
//! The fixture `tests/fixtures/lfm2_tiny/resample_reference.safetensors` comes from
//! `tests/reference/make_resample_reference.py` (its header says how to rerun it and what each
//! tensor is); the stereo signals are regenerated here from the same integer formula and fed
//! through the engine's WAV reader as 32-bit float WAVs, as the script fed liquid-audio's loader.

mod common;

use std::io::Cursor;

use audio_engine::lfm2_audio::internals::audio::{decode_wav_bytes, resample, ReadOptions};
use audio_engine::lfm2_audio::internals::features::log_mel;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrOptions, StopReason};
use audio_tooling::safetensors::{Dtype, SafeTensors};

use common::lfm2_tiny::reference;
use common::package::engine;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/lfm2_tiny/resample_reference.safetensors"
);

const RATES: [u32; 2] = [44_100, 48_000];
const SECONDS: i64 = 2;

/// `stereo_signal(rate)` of make_resample_reference.py: (left, right) 16-bit samples.
fn stereo_signal(rate: u32) -> (Vec<i16>, Vec<i16>) {
    let rate = i64::from(rate);
    let n = SECONDS * rate;
    let quarter = rate / 4;
    let triangle = |phase: i64| {
        if phase < 32768 {
            phase - 16384
        } else {
            49152 - phase
        }
    };
    let mut lcg: u64 = 0x2545_F491_4F6C_DD1D;
    let (mut phase_l, mut phase_r, mut phase_h) = (0i64, 0i64, 0i64);
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for i in 0..n {
        phase_l = (phase_l + (200 + 1200 * i / n) * 65536 / rate) % 65536;
        let period = if (i / quarter) % 2 == 0 {
            rate / 400
        } else {
            rate / 640
        };
        let sq = if i % period < period / 2 { 3000 } else { -3000 };
        phase_r = (phase_r + (2000 + 5600 * i / n) * 65536 / rate) % 65536;
        let hf = if i % 4 < 2 { 1500 } else { -1500 };
        phase_h = (phase_h + 60 * 65536 / rate) % 65536;
        let dip = if (5 * n / 12..7 * n / 12).contains(&i) {
            600
        } else {
            0
        };
        let env = (i * 1024 / quarter).min(1024) - dip;
        lcg = lcg
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let noise_l = ((lcg >> 33) % 2001) as i64 - 1000;
        let noise_r = ((lcg >> 11) % 4001) as i64 - 2000;
        // Rust's `/` truncates toward zero: the script's trunc_div.
        let hum = triangle(phase_h) / 4;
        let lv = (triangle(phase_l) + sq + hum) * env / 1024 + noise_l;
        let rv = triangle(phase_r) * env / 2048 + hf + noise_r;
        left.push(lv.clamp(-32768, 32767) as i16);
        right.push(rv.clamp(-32768, 32767) as i16);
    }
    (left, right)
}

/// The script's SIGNAL_SPOTS: (index, left, right).
fn spots(rate: u32) -> [(usize, i16, i16); 4] {
    match rate {
        44_100 => [
            (0, 408, 2269),
            (1, -721, 1152),
            (30_000, 2932, -4640),
            (88_199, 6544, -863),
        ],
        48_000 => [
            (0, 408, 2269),
            (1, -721, 1152),
            (30_000, 6742, 5926),
            (95_999, -17, -3435),
        ],
        _ => unreachable!(),
    }
}

/// A 32-bit float stereo WAV of the signal (sample / 32768, exact), as the script wrote it.
fn float_wav(rate: u32, left: &[i16], right: &[i16]) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut cursor = Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut cursor, spec).unwrap();
    for (&l, &r) in left.iter().zip(right) {
        w.write_sample(f32::from(l) / 32768.0).unwrap();
        w.write_sample(f32::from(r) / 32768.0).unwrap();
    }
    w.finalize().unwrap();
    cursor.into_inner()
}

/// make_reference.py's `file_digest` of the samples' little-endian f32 bytes.
fn samples_digest(samples: &[f32]) -> String {
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    let mut sum = 0u64;
    for (i, c) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        let k = (i as u64).wrapping_mul(2).wrapping_add(1);
        sum = sum.wrapping_add(u64::from_le_bytes(w).wrapping_mul(k));
    }
    format!("{sum:016x}")
}

fn fixture() -> SafeTensors {
    SafeTensors::open(FIXTURE).expect("open the resample reference fixture")
}

fn meta<'a>(f: &'a SafeTensors, key: &str) -> &'a str {
    f.metadata()
        .get(key)
        .unwrap_or_else(|| panic!("fixture metadata has no '{key}'"))
}

fn i64s(f: &SafeTensors, name: &str) -> Vec<i64> {
    let t = f.tensor(name).unwrap();
    assert_eq!(t.dtype, Dtype::I64, "{name}");
    t.data
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// tests/features.rs's metric: `max |ours - reference| / max |reference|`, in f64.
fn relative_error(ours: &[f32], reference: &[f32]) -> f64 {
    assert_eq!(ours.len(), reference.len());
    let scale = reference
        .iter()
        .fold(0.0f64, |m, &v| m.max(f64::from(v).abs()));
    max_abs_diff(ours, reference) / scale
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0f64, |m, (&x, &y)| {
        m.max((f64::from(x) - f64::from(y)).abs())
    })
}

/// The engine's 16 kHz input for the regenerated signal at `rate`, after checking the signal
/// and the mono downmix against the script's.
fn our_16k(f: &SafeTensors, rate: u32) -> Vec<f32> {
    let (left, right) = stereo_signal(rate);
    assert_eq!(left.len(), SECONDS as usize * rate as usize);
    for (i, l, r) in spots(rate) {
        assert_eq!((left[i], right[i]), (l, r), "{rate} Hz: signal[{i}]");
    }
    let wav = float_wav(rate, &left, &right);
    let mono = decode_wav_bytes(&wav, &ReadOptions::default()).unwrap();
    assert_eq!(mono.sample_rate, rate);
    // liquid-audio's loader averages in float32; for two channels that rounds the same.
    assert_eq!(
        samples_digest(&mono.samples),
        meta(f, &format!("r{rate}_digest_mono")),
        "{rate} Hz: mono downmix differs from liquid-audio's"
    );
    let e = engine(Quant::F32);
    let ours = e.read_wav(&wav).unwrap();
    assert_eq!(ours, resample(&mono.samples, rate, 16_000).unwrap());
    ours
}

#[test]
fn fixture_is_for_the_tiny_checkpoint() {
    let f = fixture();
    for key in ["digest_model", "digest_detokenizer", "digest_tokenizer"] {
        assert_eq!(meta(&f, key), reference().meta(key), "{key}");
    }
    assert_eq!(meta(&f, "liquid_audio_version"), "1.3.0");
}

/// The resampled signal sample for sample, and its features, against liquid-audio's.
#[test]
fn resampled_signal_and_features_match_liquid_audio() {
    let f = fixture();
    for rate in RATES {
        let want = f.f32(&format!("r{rate}_resampled")).unwrap();
        let ours = our_16k(&f, rate);
        assert_eq!(ours.len(), want.len(), "{rate} Hz: resampled length");
        let diff = max_abs_diff(&ours, &want);
        let peak = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        // torchaudio sums the convolution in float32, we in f64 with the same float32 taps:
        // ~1.5e-7 apart (full scale 1). The previous Kaiser resampler (64 zero crossings) was
        // 3.2e-2 off on these signals and its features 0.56 (relative) off.
        assert!(diff < 5e-7, "{rate} Hz: resampled signal off by {diff:.3e}");

        assert_eq!(f.tensor(&format!("r{rate}_mel")).unwrap().shape, [128, 201]);
        let mel = log_mel(&ours).unwrap();
        assert_eq!((mel.n_mels(), mel.n_frames()), (128, 201));
        // liquid-audio's preprocessor as it runs (float32): its own rounding is ~1e-5 of the
        // largest feature, so also measured from liquid-audio's resampled signal for scale.
        let want_mel = f.f32(&format!("r{rate}_mel")).unwrap();
        let rel32 = relative_error(mel.data(), &want_mel);
        let own32 = relative_error(log_mel(&want).unwrap().data(), &want_mel);
        // The same preprocessor in float64 on liquid-audio's resampled signal: what is left is
        // the resampler's difference (and the final f32 rounding).
        let want64 = f.f32(&format!("r{rate}_mel_f64")).unwrap();
        let rel64 = relative_error(mel.data(), &want64);
        let own64 = relative_error(log_mel(&want).unwrap().data(), &want64);
        println!(
            "{rate} Hz: resampled max |diff| {diff:.3e} (peak {peak:.4}); features relative \
             error vs float32 liquid-audio {rel32:.3e} (from its resampled signal {own32:.3e}), \
             vs float64 liquid-audio {rel64:.3e} (from its resampled signal {own64:.3e})"
        );
        assert!(
            rel64 <= 1e-5,
            "{rate} Hz: features vs float64 reference {rel64:.3e}"
        );
        // Against the float32 reference the floor is its own rounding (measured 1.3e-5 and
        // 9.5e-6 from liquid-audio's own resampled signal).
        assert!(
            rel32 <= 2e-5,
            "{rate} Hz: features vs float32 reference {rel32:.3e}"
        );
    }
}

/// Greedy ASR from the stereo WAV: liquid-audio's tokens, all of them.
#[test]
fn greedy_asr_from_stereo_wav_matches_liquid_audio() {
    let f = fixture();
    let e = engine(Quant::F32);
    for rate in RATES {
        let want: Vec<u32> = i64s(&f, &format!("r{rate}_asr_tokens"))
            .iter()
            .map(|&t| t as u32)
            .collect();
        assert_eq!(meta(&f, &format!("r{rate}_asr_stop")), "max_steps");
        let opts = AsrOptions {
            max_new_tokens: want.len(),
            ..Default::default()
        };
        let samples = our_16k(&f, rate);
        let got = e.asr(&samples, &opts).unwrap();
        let agree = got
            .tokens
            .iter()
            .zip(&want)
            .take_while(|(a, b)| a == b)
            .count();
        println!(
            "{rate} Hz: {agree} of {} greedy tokens agree (smallest liquid-audio margin {})",
            want.len(),
            meta(&f, &format!("r{rate}_asr_min_margin"))
        );
        assert_eq!(got.tokens, want, "{rate} Hz: greedy tokens");
        assert_eq!(got.stop, StopReason::MaxTokens);
        // Straight from the WAV bytes: the same.
        let wav = {
            let (l, r) = stereo_signal(rate);
            float_wav(rate, &l, &r)
        };
        assert_eq!(e.asr_wav(&wav, &opts).unwrap().tokens, want);
    }
}

/// torchaudio's output length, `ceil(16000 n / rate)` with the ratio rounded to float32, on the
/// script's cases (some where that is one sample less than the exact ceiling).
#[test]
fn output_length_is_torchaudios() {
    let f = fixture();
    let cases: Vec<[u64; 4]> = serde_json::from_str(meta(&f, "length_cases")).unwrap();
    assert!(
        cases.iter().any(|c| c[2] < c[3]),
        "the cases should include a float32 rounding one"
    );
    for [rate, n, want, exact] in cases {
        let got = resample(&vec![0.0; n as usize], rate as u32, 16_000)
            .unwrap()
            .len();
        println!("{rate} Hz, {n} samples: {got} (torchaudio {want}, exact ceiling {exact})");
        assert_eq!(got as u64, want, "{rate} Hz, {n} samples");
    }
}
