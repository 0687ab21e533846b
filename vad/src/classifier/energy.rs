//! An energy threshold: the baseline the issue asks to beat, kept for the evaluation.

use super::Classifier;

/// 10 ms at 16 kHz.
const FRAME: usize = 160;
/// The level that maps to probability 0 and the span that maps to 0..1: -60 dBFS is 0, -20 dBFS
/// is 1, so the default threshold 0.5 means -40 dBFS.
const FLOOR_DB: f32 = -60.0;
const SPAN_DB: f32 = 40.0;

/// Frame RMS level mapped linearly from dBFS to `0..=1`. Not a voice detector: any sound loud
/// enough is "speech". It is the reference the real classifiers are measured against.
#[derive(Debug, Default, Clone)]
pub struct EnergyClassifier;

impl Classifier for EnergyClassifier {
    fn name(&self) -> &'static str {
        "energy"
    }

    fn frame_len(&self) -> usize {
        FRAME
    }

    fn speech_probability(&mut self, frame: &[f32]) -> f32 {
        let power = frame.iter().map(|s| s * s).sum::<f32>() / frame.len().max(1) as f32;
        let db = 10.0 * (power + 1e-12).log10();
        ((db - FLOOR_DB) / SPAN_DB).clamp(0.0, 1.0)
    }

    fn reset(&mut self) {}
}
