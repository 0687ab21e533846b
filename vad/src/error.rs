//! The crate's typed errors.

/// Why a [`crate::Segmenter`] (or a [`crate::Resampler`]) could not be made.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum VadError {
    /// `threshold` must lie in `0..=1` (a speech probability); NaN is rejected too.
    #[error("VAD threshold {0} is outside 0..=1")]
    InvalidThreshold(f32),
    /// The input sample rate cannot be resampled to the classifier's 16 kHz.
    #[error("unsupported sample rate {rate} Hz: {reason}")]
    UnsupportedSampleRate {
        /// The rate that was asked for.
        rate: u32,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A classifier's weight file is not what it expects.
    #[error("invalid VAD weights: {0}")]
    InvalidWeights(String),
}
