//! The errors the LFM2-Audio tasks return: invalid request vs capacity vs load vs internal.

use super::audio::AudioError;
use super::backbone::BackboneError;
use super::encoder::EncodeError;
use super::features::FeatureError;
use super::load_error::LoadError;
use super::tokenizer::TokenizerError;

/// Why a task failed. The variants separate what the caller did wrong (invalid request), what
/// does not fit (capacity), a model that does not load, and engine failures (internal).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request is malformed: unreadable, empty, non-finite or over-long audio, bad options.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The input audio is unusable (a kind of invalid request, kept typed for callers).
    #[error("invalid request: {0}")]
    Audio(#[from] AudioError),
    /// The request does not fit the context.
    #[error("capacity exceeded: {0}")]
    Capacity(String),
    /// The model files could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The tokenizer metadata is unusable.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// A compute stage failed.
    #[error("internal error: {0}")]
    Internal(String),
}

impl EngineError {
    /// Whether the caller's request was at fault (as opposed to capacity or the engine).
    pub fn is_invalid_request(&self) -> bool {
        matches!(self, EngineError::InvalidRequest(_) | EngineError::Audio(_))
    }
}

impl From<BackboneError> for EngineError {
    fn from(e: BackboneError) -> Self {
        match e {
            BackboneError::Capacity { .. } => EngineError::Capacity(e.to_string()),
            other => EngineError::Internal(format!("backbone: {other}")),
        }
    }
}

impl From<EncodeError> for EngineError {
    fn from(e: EncodeError) -> Self {
        EngineError::Internal(format!("encoder: {e}"))
    }
}

impl From<FeatureError> for EngineError {
    fn from(e: FeatureError) -> Self {
        EngineError::InvalidRequest(format!("features: {e}"))
    }
}
