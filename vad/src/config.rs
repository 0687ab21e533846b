//! The turn-detection settings, named as in OpenAI's Realtime `turn_detection: server_vad`.

use crate::VadError;

/// What the server's turn detection is configured with (OpenAI's `server_vad` fields).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VadConfig {
    /// A frame is speech when the classifier's speech probability is `>= threshold`; `0..=1`,
    /// default 0.5. Higher needs louder, clearer speech (fewer false starts in noise).
    pub threshold: f32,
    /// Audio kept before the detected speech onset in `SpeechStarted::audio_start_ms`, so the
    /// committed item does not clip the first phoneme; default 300 ms.
    pub prefix_padding_ms: u32,
    /// Silence needed after the last speech frame before `SpeechStopped`; default 500 ms.
    pub silence_duration_ms: u32,
}

impl Default for VadConfig {
    fn default() -> Self {
        // OpenAI's documented server_vad defaults.
        VadConfig {
            threshold: 0.5,
            prefix_padding_ms: 300,
            silence_duration_ms: 500,
        }
    }
}

impl VadConfig {
    /// Checks the fields: the threshold must be a probability.
    pub fn validate(&self) -> Result<(), VadError> {
        if !(0.0..=1.0).contains(&self.threshold) {
            return Err(VadError::InvalidThreshold(self.threshold));
        }
        Ok(())
    }
}
