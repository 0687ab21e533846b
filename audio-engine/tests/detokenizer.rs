//! The LFM2.5-Audio detokenizer (codes -> 24 kHz waveform) on the tiny synthetic checkpoint,
//! against liquid-audio 1.3.0's `LFM2AudioDetokenizer` on the same weights
//! (`tests/fixtures/lfm2_tiny/reference.safetensors`: `detok_codes`, `detok_spec`,
//! `detok_waveform`); streaming against offline; segmented (bounded-memory) decoding against one
//! pass; typed errors.

mod common;

use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use audio_engine::ggml::Backend;
use audio_engine::lfm2_audio::internals::detokenizer::{
    Detokenizer, DetokenizerError, DetokenizerOptions, SAMPLES_PER_FRAME, UPSAMPLE,
};
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::package::{ModelPackage, PackagePaths};
use audio_tooling::convert::{convert, Progress};

use common::lfm2_tiny::{checkpoint_dir, reference};

struct Quiet;
impl Progress for Quiet {
    fn tensor(&mut self, _: &Path, _: &str, _: usize, _: usize) {}
}

/// The checkpoint converted at `ty`, once per test process.
fn package(ty: Quant) -> PackagePaths {
    static DIRS: OnceLock<Mutex<Vec<(Quant, PackagePaths)>>> = OnceLock::new();
    let mut d = DIRS.get_or_init(Default::default).lock().unwrap();
    if let Some((_, p)) = d.iter().find(|(t, _)| *t == ty) {
        return p.clone();
    }
    let out = common::scratch::dir(&format!("lfm2-detok-{ty:?}"));
    let p = convert(checkpoint_dir(), &out, "Tiny", ty, &mut Quiet).unwrap();
    d.push((ty, p.clone()));
    p
}

fn detokenizer_at(ty: Quant) -> Detokenizer {
    let pkg = ModelPackage::open_paths(package(ty)).unwrap();
    let be = Backend::cpu().unwrap();
    // why: tests run two at a time on two cores; ggml's spinning barriers punish oversubscription.
    be.set_n_threads(1).unwrap();
    Detokenizer::load(pkg.detokenizer, &pkg.vocoder, &be).unwrap()
}

fn detokenizer() -> Detokenizer {
    detokenizer_at(Quant::F32)
}

/// max |a - b| / max |b|.
fn rel(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let m = b.iter().fold(0f32, |m, v| m.max(v.abs()));
    a.iter().zip(b).fold(0f32, |e, (x, y)| e.max((x - y).abs())) / m
}

/// The fixture's frames: `detok_codes` is [8 codebooks, T frames], codebook-major.
fn fixture_frames() -> Vec<[u32; 8]> {
    let r = reference();
    let shape = r.shape("detok_codes");
    assert_eq!(shape[0], 8);
    let codes = r.i64("detok_codes");
    (0..shape[1])
        .map(|f| std::array::from_fn(|cb| codes[cb * shape[1] + f] as u32))
        .collect()
}

/// `n` pseudo-random frames of valid codes.
fn random_frames(n: usize, seed: u64) -> Vec<[u32; 8]> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            std::array::from_fn(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) % 2048) as u32
            })
        })
        .collect()
}

#[test]
fn matches_liquid_audio() {
    let det = detokenizer();
    let r = reference();
    let frames = fixture_frames();
    assert_eq!(frames.len(), 8);
    let want_spec = r.f32("detok_spec");
    let want_wav = r.f32("detok_waveform");
    assert_eq!(
        want_spec.len(),
        frames.len() * UPSAMPLE * det.spectrum_width()
    );
    assert_eq!(want_wav.len(), frames.len() * SAMPLES_PER_FRAME);

    let spec = det.spectrogram(&frames).unwrap();
    let spec_one = det.spectrogram_unchunked(&frames).unwrap();
    let wav = det.decode(&frames).unwrap();
    let wav_one = det.decode_unchunked(&frames).unwrap();
    let (e_spec, e_spec_one) = (rel(&spec, &want_spec), rel(&spec_one, &want_spec));
    let (e_wav, e_wav_one) = (rel(&wav, &want_wav), rel(&wav_one, &want_wav));
    eprintln!(
        "head output rel err: per-frame {e_spec:.2e}, one pass {e_spec_one:.2e}; \
         waveform rel err: per-frame {e_wav:.2e}, one pass {e_wav_one:.2e}"
    );
    assert!(e_spec < 1e-3 && e_spec_one < 1e-3, "{e_spec} {e_spec_one}");
    assert!(e_wav < 1e-4 && e_wav_one < 1e-4, "{e_wav} {e_wav_one}");
}

#[test]
fn quantized_packages_decode() {
    let r = reference();
    let frames = fixture_frames();
    let want_spec = r.f32("detok_spec");
    let want_wav = r.f32("detok_waveform");
    let mut report = Vec::new();
    // Measured: F16 1.2e-3 / 9.4e-4, Q8_0 3.1e-2 / 1.8e-2, Q4_0 2.6e-1 / 2.2e-1 (random weights
    // make the log-magnitudes sensitive; the bounds leave about 2x margin).
    for (ty, bound) in [(Quant::F16, 5e-3), (Quant::Q8_0, 8e-2), (Quant::Q4_0, 0.5)] {
        let det = detokenizer_at(ty);
        let e_spec = rel(&det.spectrogram(&frames).unwrap(), &want_spec);
        let e_wav = rel(&det.decode(&frames).unwrap(), &want_wav);
        report.push(format!("{ty:?}: head {e_spec:.2e}, waveform {e_wav:.2e}"));
        assert!(e_spec < bound && e_wav < bound, "{ty:?}: {e_spec} {e_wav}");
    }
    eprintln!("against liquid-audio F32: {}", report.join("; "));
}

#[test]
fn streaming_equals_offline_bitwise() {
    let mut det = detokenizer();
    // A short segment so the 40 frames cross several restarts.
    let segment = det.warmup_frames() + 3;
    det.set_options(DetokenizerOptions {
        segment_frames: segment,
    })
    .unwrap();
    let frames = random_frames(40, 7);
    let offline = det.decode(&frames).unwrap();
    assert_eq!(offline.len(), frames.len() * SAMPLES_PER_FRAME);

    // Frame by frame: each push returns exactly the samples that became final.
    let mut s = det.stream();
    let mut streamed = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let got = s.push(f).unwrap();
        let pad = 480;
        let want = if i == 0 {
            SAMPLES_PER_FRAME - pad
        } else {
            SAMPLES_PER_FRAME
        };
        assert_eq!(got.len(), want, "push {i}");
        streamed.extend(got);
    }
    assert_eq!(s.frames(), frames.len());
    let tail = s.finish();
    assert_eq!(tail.len(), 480);
    streamed.extend(tail);
    assert!(
        streamed
            .iter()
            .zip(&offline)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "frame-by-frame stream differs from decode"
    );

    // Other chunkings of the pushes.
    for chunk in [2usize, 3, 7, 40] {
        let mut s = det.stream();
        let mut out = Vec::new();
        for c in frames.chunks(chunk) {
            out.extend(s.push_frames(c).unwrap());
        }
        out.extend(s.finish());
        assert_eq!(out.len(), offline.len());
        assert!(
            out.iter()
                .zip(&offline)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "chunks of {chunk} differ from decode"
        );
    }
}

#[test]
fn long_input_segmented_matches_one_pass() {
    let mut det = detokenizer();
    let frames = random_frames(200, 11);
    let spec_one = det.spectrogram_unchunked(&frames).unwrap();
    let wav_one = det.decode_unchunked(&frames).unwrap();

    // The waveform with the default segments (128 frames: one restart in 200 frames).
    let t = Instant::now();
    let wav = det.decode(&frames).unwrap();
    let per_frame = t.elapsed().as_secs_f64() * 1e3 / frames.len() as f64;
    assert_eq!(wav.len(), wav_one.len());
    let e_wav = rel(&wav, &wav_one);
    let mut report = vec![format!(
        "default segment {}: waveform {e_wav:.2e}, {per_frame:.1} ms/frame",
        det.options().segment_frames
    )];
    // Rounding only: the restarts rerun the whole receptive field.
    assert!(e_wav < 1e-5, "waveform {e_wav}");

    // The head output with a restart every frame, every 10 frames, and none.
    for segment in [det.warmup_frames() + 1, 16, 256] {
        det.set_options(DetokenizerOptions {
            segment_frames: segment,
        })
        .unwrap();
        let e = rel(&det.spectrogram(&frames).unwrap(), &spec_one);
        report.push(format!("segment {segment}: head {e:.2e}"));
        assert!(e < 1e-5, "segment {segment}: head {e}");
    }
    eprintln!(
        "200 frames, warm-up {} frames, against one pass: {}",
        det.warmup_frames(),
        report.join("; ")
    );
}

#[test]
fn typed_errors() {
    let mut det = detokenizer();
    let none: [[u32; 8]; 0] = [];
    assert!(matches!(det.decode(&none), Err(DetokenizerError::Empty)));
    assert!(matches!(
        det.decode_unchunked(&none),
        Err(DetokenizerError::Empty)
    ));

    let short = vec![vec![1u32; 7]];
    assert!(matches!(
        det.decode(&short),
        Err(DetokenizerError::Codebooks {
            frame: 0,
            found: 7,
            expected: 8
        })
    ));
    let mut frames = random_frames(3, 1);
    frames[2][5] = 2048; // end of audio is not a detokenizer input
    assert!(matches!(
        det.decode(&frames),
        Err(DetokenizerError::CodeOutOfRange {
            frame: 2,
            codebook: 5,
            code: 2048,
            limit: 2048
        })
    ));
    assert!(matches!(
        det.spectrogram(&frames),
        Err(DetokenizerError::CodeOutOfRange { frame: 2, .. })
    ));

    // A failed push changes nothing: the stream goes on as if it never happened.
    let good = random_frames(4, 3);
    let want = det.decode(&good).unwrap();
    let mut s = det.stream();
    let mut got = s.push(&good[0]).unwrap();
    assert!(matches!(
        s.push(&[0, 1, 2]),
        Err(DetokenizerError::Codebooks { frame: 1, .. })
    ));
    assert!(matches!(
        s.push_frames(&[good[1], [u32::MAX; 8]]),
        Err(DetokenizerError::CodeOutOfRange { frame: 2, .. })
    ));
    got.extend(s.push_frames(&good[1..]).unwrap());
    got.extend(s.finish());
    assert_eq!(got, want);

    // A stream that never got a frame ends with no samples.
    assert!(det.stream().finish().is_empty());

    let w = det.warmup_frames();
    for segment in [0, w, usize::MAX] {
        assert!(matches!(
            det.set_options(DetokenizerOptions {
                segment_frames: segment
            }),
            Err(DetokenizerError::Segment { .. })
        ));
    }
    assert!(det
        .set_options(DetokenizerOptions {
            segment_frames: w + 1
        })
        .is_ok());
}
