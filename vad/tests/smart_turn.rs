//! The Rust smart-turn against onnxruntime running pipecat's `smart-turn-v3.2-cpu.onnx` on the
//! reference clips (vad/tests/reference, made by `scripts/smart_turn_weights.sh --fixture`).
//!
//! Needs the converted weights (`scripts/smart_turn_weights.sh`): without them the tests skip
//! with the `ci-skip` marker, and fail in CI.

mod common;

use std::sync::Arc;
use std::time::Instant;

use voice_activity::{SmartTurn, SmartTurnWeights, VadError, FRAMES, MELS};

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/reference/smart_turn_reference.safetensors"
);

/// The model, or `None` (a `ci-skip` skip; a failure in CI) where the weights are not installed.
fn model() -> Option<SmartTurn> {
    common::smart_turn()
}

/// A tensor of the reference file as raw little-endian bytes, with its dtype.
fn raw<'a>(bytes: &'a [u8], name: &str) -> (String, &'a [u8]) {
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let info = &header[name];
    let (s, e) = (
        info["data_offsets"][0].as_u64().unwrap() as usize,
        info["data_offsets"][1].as_u64().unwrap() as usize,
    );
    (
        info["dtype"].as_str().unwrap().to_string(),
        &bytes[8 + len + s..8 + len + e],
    )
}

fn f32s(bytes: &[u8], name: &str) -> Vec<f32> {
    let (dtype, b) = raw(bytes, name);
    assert_eq!(dtype, "F32");
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The reference clips (16 kHz, as the script stored them) and onnxruntime's probabilities.
fn reference() -> (Vec<Vec<f32>>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let bytes = std::fs::read(REFERENCE).unwrap();
    let (dtype, pcm) = raw(&bytes, "pcm");
    assert_eq!(dtype, "I16");
    let pcm: Vec<f32> = pcm
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect();
    let (dtype, lengths) = raw(&bytes, "lengths");
    assert_eq!(dtype, "I32");
    let mut clips = Vec::new();
    let mut at = 0;
    for l in lengths.chunks_exact(4) {
        let n = i32::from_le_bytes(l.try_into().unwrap()) as usize;
        clips.push(pcm[at..at + n].to_vec());
        at += n;
    }
    assert_eq!(at, pcm.len());
    (
        clips,
        f32s(&bytes, "probability"),
        f32s(&bytes, "features0"),
        f32s(&bytes, "probability_unoptimized"),
    )
}

#[test]
fn features_match_pipecats() {
    let Some(model) = model() else { return };
    let (clips, _, features0, _) = reference();
    let ours = model.features(&clips[0]);
    assert_eq!(ours.len(), MELS * FRAMES);
    let worst = ours
        .iter()
        .zip(&features0)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    eprintln!("features: max |ours - pipecat's| = {worst:e}");
    // Measured 1e-6 order (f64 FFT here, numpy's f64 there; both rounded to f32).
    assert!(worst < 1e-4, "max |diff| {worst}");
}

#[test]
fn probabilities_match_onnxruntime() {
    let Some(model) = model() else { return };
    let (clips, onnx, features0, unoptimized) = reference();
    let started = Instant::now();
    let ours: Vec<f32> = clips.iter().map(|c| model.probability(c)).collect();
    let per_clip = started.elapsed().as_secs_f64() * 1000.0 / clips.len() as f64;
    let stats = |a: &[f32], b: &[f32]| {
        let diffs: Vec<f32> = a.iter().zip(b).map(|(x, y)| (x - y).abs()).collect();
        let mean = diffs.iter().sum::<f32>() / diffs.len() as f32;
        let max = diffs.iter().copied().fold(0.0, f32::max);
        let agree = a
            .iter()
            .zip(b)
            .filter(|(x, y)| (**x >= 0.5) == (**y >= 0.5))
            .count();
        (mean, max, agree)
    };
    let (mean, max, agree) = stats(&ours, &onnx);
    let (mean_ort, max_ort, agree_ort) = stats(&unoptimized, &onnx);
    eprintln!(
        "ours {ours:?}\nonnxruntime {onnx:?}\nours vs onnxruntime: mean |diff| {mean:.4}, max {max:.4}, \
         same side of 0.5 {agree}/{n}; onnxruntime unoptimized vs optimized: mean {mean_ort:.4}, \
         max {max_ort:.4}, same side {agree_ort}/{n}; {per_clip:.0} ms per clip",
        n = ours.len()
    );
    // The quantized model rounds 78 activations to 8 bits, so any difference in arithmetic
    // (summation order, erf, a feature 1e-6 apart) moves some values to the next grid step and
    // the output by up to ~0.4: onnxruntime's own two graph levels differ by a mean of 0.08 and
    // up to 0.37 on these clips (scripts/smart_turn_weights.py prints it). The bounds are that
    // spread with some room; a wrong layer gives differences near 0.5 everywhere.
    assert!(mean <= 0.12, "mean |diff| {mean}");
    assert!(max <= 0.45, "max |diff| {max}");
    assert!(
        agree + 3 >= ours.len(),
        "same side of 0.5 for {agree}/{}",
        ours.len()
    );
    // pipecat's features give what ours give, within the same spread.
    let from_features = model.probability_of_features(&features0).unwrap();
    assert!((from_features - onnx[0]).abs() <= 0.45);
    // Deterministic.
    assert_eq!(model.probability(&clips[1]), ours[1]);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let missing = std::env::temp_dir().join("no-such-dir-smart-turn/weights.safetensors");
    match SmartTurn::load(&missing) {
        Err(e @ VadError::TurnWeightsMissing { .. }) => {
            assert!(
                e.to_string().contains("scripts/smart_turn_weights.sh"),
                "{e}"
            )
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("loaded a missing file"),
    }
    for broken in [
        &b""[..],
        &b"\x10\0\0\0\0\0\0\0{}"[..],
        &b"\x02\0\0\0\0\0\0\0{}"[..],
    ] {
        assert!(matches!(
            SmartTurnWeights::from_safetensors(broken),
            Err(VadError::InvalidWeights(_))
        ));
    }
    let Some(model) = model() else { return };
    assert!(matches!(
        model.probability_of_features(&[0.0; 10]),
        Err(VadError::InvalidFeatures { .. })
    ));
    // Silence, short audio, NaN-free extremes: a probability, never a panic.
    for audio in [
        vec![],
        vec![0.0; 100],
        vec![1.0; 200_000],
        vec![-1.0; 16_000],
    ] {
        let p = model.probability(&audio);
        assert!((0.0..=1.0).contains(&p), "{p}");
    }
    // A truncated weight file is an error, not a panic.
    let bytes = std::fs::read(SmartTurn::default_weights_path()).unwrap();
    for cut in [bytes.len() / 2, 1000] {
        assert!(SmartTurnWeights::from_safetensors(&bytes[..cut]).is_err());
    }
    let _ = Arc::new(model);
}
