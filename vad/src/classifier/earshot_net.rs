//! The default classifier: `earshot`, a small neural VAD in pure Rust.

use super::Classifier;

/// Frame of earshot's detector: 256 samples (16 ms) at 16 kHz.
const FRAME: usize = 256;

/// [`earshot`]'s detector (log-mel features over three frames into a small network); gives a
/// probability, so `VadConfig::threshold` applies as is.
pub struct EarshotClassifier {
    // why boxed: the detector keeps ~8 KiB of state inline; a segmenter moves between tasks.
    detector: Box<earshot::Detector>,
}

impl EarshotClassifier {
    /// A fresh detector.
    pub fn new() -> EarshotClassifier {
        EarshotClassifier {
            detector: earshot::Detector::default_boxed(),
        }
    }
}

impl Default for EarshotClassifier {
    fn default() -> Self {
        EarshotClassifier::new()
    }
}

impl Classifier for EarshotClassifier {
    fn name(&self) -> &'static str {
        "earshot"
    }

    fn frame_len(&self) -> usize {
        FRAME
    }

    fn speech_probability(&mut self, frame: &[f32]) -> f32 {
        debug_assert_eq!(frame.len(), FRAME);
        self.detector.predict_f32(frame).clamp(0.0, 1.0)
    }

    fn reset(&mut self) {
        self.detector.reset();
    }
}
