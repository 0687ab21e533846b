//! Frame classifiers: each turns one frame of 16 kHz audio into a speech probability.

#[cfg(feature = "earshot")]
mod earshot_net;
mod energy;
mod silero;

#[cfg(feature = "earshot")]
pub use earshot_net::EarshotClassifier;
pub use energy::EnergyClassifier;
pub use silero::{SileroClassifier, SileroWeights};

/// A voice-activity classifier over fixed frames of 16 kHz mono audio.
///
/// The [`crate::Segmenter`] feeds it consecutive frames of [`Classifier::frame_len`] samples in
/// `[-1, 1]` and compares what it returns with `VadConfig::threshold`. A classifier that only
/// says yes or no returns 1.0 or 0.0 and takes the threshold at construction instead (see its
/// documentation for the mapping).
pub trait Classifier {
    /// A short name for reports ("earshot", "energy", ...).
    fn name(&self) -> &'static str;
    /// Samples per frame at [`crate::CLASSIFIER_RATE`].
    fn frame_len(&self) -> usize;
    /// The speech probability (`0..=1`) of the next frame; `frame.len() == frame_len()`.
    fn speech_probability(&mut self, frame: &[f32]) -> f32;
    /// Forgets the stream (a classifier may keep context across frames).
    fn reset(&mut self);
}
