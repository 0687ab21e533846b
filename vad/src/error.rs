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
    /// The end-of-turn model's weight file is not installed (it is converted from the
    /// pipecat-ai wheel on PyPI, not shipped in the crate).
    #[error(
        "the smart-turn weights are not at {path} ({reason}): make them with \
         scripts/smart_turn_weights.sh (it downloads the pipecat-ai wheel from PyPI and converts \
         its smart-turn-v3.2-cpu.onnx), or point VAD_SMART_TURN_WEIGHTS at the file"
    )]
    TurnWeightsMissing {
        /// Where the file was looked for.
        path: std::path::PathBuf,
        /// Why it could not be read.
        reason: String,
    },
    /// An end-of-turn policy whose checks are not positive, growing and shorter than its
    /// longest wait.
    #[error("end-of-turn checks at {checks_ms:?} ms of silence must be positive, growing and shorter than the longest wait {max_silence_ms} ms")]
    InvalidPolicy {
        /// The silences at which the model is asked.
        checks_ms: [u32; 2],
        /// The silence after which the turn ends anyway.
        max_silence_ms: u32,
    },
    /// Features of the wrong length were given to the end-of-turn model.
    #[error("end-of-turn features: {got} values, expected {expected}")]
    InvalidFeatures {
        /// How many were given.
        got: usize,
        /// `MELS * FRAMES`.
        expected: usize,
    },
}
