//! The Rust Silero VAD against Silero's own ONNX model (onnxruntime), on the fixture's speech.

use voice_activity::{Classifier, SileroClassifier, SileroWeights, VadError};

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/silero_reference.safetensors"
);
const WEIGHTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/weights/silero_vad_16k.safetensors"
);

/// A raw tensor of the fixture: (dtype, bytes).
fn raw_tensor<'a>(bytes: &'a [u8], name: &str) -> (String, &'a [u8]) {
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let info = &header[name];
    let (start, end) = (
        info["data_offsets"][0].as_u64().unwrap() as usize,
        info["data_offsets"][1].as_u64().unwrap() as usize,
    );
    (
        info["dtype"].as_str().unwrap().to_string(),
        &bytes[8 + len + start..8 + len + end],
    )
}

#[test]
fn matches_the_onnx_model() {
    let bytes = std::fs::read(REFERENCE).unwrap();
    let (dtype, pcm) = raw_tensor(&bytes, "input_pcm");
    assert_eq!(dtype, "I16");
    let audio: Vec<f32> = pcm
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect();
    let (dtype, probs) = raw_tensor(&bytes, "probability");
    assert_eq!(dtype, "F32");
    let expected: Vec<f32> = probs
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();

    // The bundled weights are the file's.
    let mut silero = SileroClassifier::default();
    assert_eq!(audio.len(), expected.len() * silero.frame_len());
    let ours: Vec<f32> = audio
        .chunks_exact(silero.frame_len())
        .map(|f| silero.speech_probability(f))
        .collect();
    let worst = ours
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    // The script measured 8.9e-4 for float16 weights in float64 arithmetic.
    assert!(
        worst < 2e-3,
        "max |diff| {worst}\nours {ours:?}\nonnx {expected:?}"
    );
    // The reference has both speech and silence in it, so the comparison means something.
    assert!(expected.iter().any(|&p| p > 0.9) && expected.iter().any(|&p| p < 0.1));

    // After reset, the same audio gives the same probabilities again.
    silero.reset();
    let again: Vec<f32> = audio
        .chunks_exact(silero.frame_len())
        .map(|f| silero.speech_probability(f))
        .collect();
    assert_eq!(again, ours);
}

#[test]
fn bad_weight_files_are_typed_errors() {
    let bytes = std::fs::read(WEIGHTS).unwrap();
    assert!(SileroWeights::from_safetensors(&bytes).is_ok());
    for broken in [
        &b""[..],
        &b"\x10\0\0\0\0\0\0\0{}"[..],
        &bytes[..bytes.len() / 2],
        &bytes[..200],
    ] {
        assert!(matches!(
            SileroWeights::from_safetensors(broken),
            Err(VadError::InvalidWeights(_))
        ));
    }
}
