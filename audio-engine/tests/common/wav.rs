//! WAV bytes for test inputs.

use std::collections::BTreeMap;

use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};

/// 16-bit mono WAV bytes of `samples` at `rate` Hz.
pub fn mono_i16(rate: u32, samples: impl IntoIterator<Item = i16>) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for s in samples {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

/// A 32-bit float WAV of interleaved `samples` (frames of `channels`) at `rate` Hz.
pub fn float_interleaved(rate: u32, channels: u16, samples: &[f32]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for &s in samples {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

/// Question `i` of the tests' conversations: 1.5 s + 0.5 s per turn of a deterministic 16 kHz
/// integer waveform (no libm), different per question.
pub fn question(i: usize) -> Vec<u8> {
    let n = 24_000 + 8_000 * i;
    mono_i16(
        16_000,
        (0..n).map(|t| ((((t * (7 + 3 * i)) % 400) as i32 - 200) * 60) as i16),
    )
}

/// Question `i` as the history artifact a client sends back with a later turn.
pub fn question_artifact(i: usize) -> Artifact {
    Artifact {
        id: QUESTION_ID.to_owned(),
        kind: ArtifactKind::Custom,
        payload: question(i),
        meta: BTreeMap::new(),
    }
}
