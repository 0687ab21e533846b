//! The errors the LFM2-Audio tasks return: invalid request vs capacity vs load vs a failing
//! stage, each keeping the error it came from as its [`source`](std::error::Error::source).

use crate::ggml::GgmlError;

use crate::lfm2_audio::io::audio::AudioError;
use crate::lfm2_audio::model::backbone::BackboneError;
use crate::lfm2_audio::model::depthformer::DepthError;
use crate::lfm2_audio::model::detokenizer::DetokenizerError;
use crate::lfm2_audio::model::encoder::EncodeError;
use crate::lfm2_audio::model::features::FeatureError;
use crate::lfm2_audio::model::load_error::LoadError;
use crate::lfm2_audio::model::sampling::SampleError;
use crate::lfm2_audio::text::prompt::MissingAudioRows;
use crate::lfm2_audio::text::tokenizer::TokenizerError;

/// Why a task failed. The variants separate what the caller did wrong (invalid request), what
/// does not fit (capacity), a model that does not load, and the engine stage that failed; a
/// stage's variant carries that stage's own error as its source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The request is malformed: bad options, artifacts, history, text or lengths.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The input audio is unusable (a kind of invalid request, kept typed for callers).
    #[error("invalid request: {0}")]
    Audio(#[from] AudioError),
    /// The samples cannot be turned into features (a kind of invalid request).
    #[error("invalid request: features: {0}")]
    Features(#[from] FeatureError),
    /// The request does not fit the context.
    #[error("capacity exceeded: {0}")]
    Capacity(String),
    /// The model files could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The tokenizer metadata is unusable.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The backbone failed (a run that does not fit is [`EngineError::Capacity`] instead).
    #[error("backbone")]
    Backbone(#[source] BackboneError),
    /// The audio encoder or adapter failed.
    #[error("encoder")]
    Encoder(#[from] EncodeError),
    /// The depthformer failed.
    #[error("depthformer")]
    Depthformer(#[from] DepthError),
    /// The detokenizer (vocoder) failed.
    #[error("detokenizer")]
    Detokenizer(#[from] DetokenizerError),
    /// Sampling found no usable logit.
    #[error("sampling")]
    Sampling(#[from] SampleError),
    /// The compute backend could not be set up.
    #[error("compute backend")]
    Backend(#[from] GgmlError),
    /// A generated reply step does not fit the checkpoint's reply format, so its artifact
    /// cannot be written (the model produced an id its own vocabulary does not have).
    #[error("reply step {step} cannot be written: {reason}")]
    ReplyStep {
        /// Index of the step in the reply.
        step: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The built-in demo package could not be made.
    #[cfg(feature = "testkit")]
    #[error("demo package: {what}")]
    Demo {
        /// The step that failed.
        what: String,
        /// Its error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The thread generating a streamed reply panicked.
    #[error("the generation thread panicked")]
    WorkerPanicked,
    /// An internal invariant does not hold: a bug in the engine, with no underlying error.
    #[error("internal error: {0}")]
    Invariant(String),
}

impl EngineError {
    /// Whether the caller's request was at fault (as opposed to capacity or the engine).
    pub fn is_invalid_request(&self) -> bool {
        matches!(
            self,
            EngineError::InvalidRequest(_) | EngineError::Audio(_) | EngineError::Features(_)
        )
    }

    /// Whether the request does not fit the context.
    pub fn is_capacity(&self) -> bool {
        matches!(self, EngineError::Capacity(_))
    }

    /// Whether the engine could not get memory for the request: the decode cache's mapping
    /// (`BackboneError::CacheMemory`, which names the bytes and positions) or a ggml
    /// allocation that reported its failure. Nothing of the request is kept, so the same
    /// model and session take the next request as before; it may succeed once memory is
    /// available (a smaller `max_new_tokens` needs a smaller cache). The policy, and the
    /// allocations that are not reported but abort, are in [`limits`](crate::lfm2_audio::limits)
    /// ("Out of memory").
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            EngineError::Backbone(b) | EngineError::Detokenizer(DetokenizerError::Backbone(b)) => {
                b.is_out_of_memory()
            }
            other => other.ggml_error().is_some_and(GgmlError::is_out_of_memory),
        }
    }

    /// The ggml layer's error when that is what a stage failed with (a graph refused, a compute
    /// that failed, a model file that changed under the loaded model).
    pub fn ggml_error(&self) -> Option<&GgmlError> {
        match self {
            EngineError::Backend(g)
            | EngineError::Encoder(EncodeError::Ggml(g))
            | EngineError::Detokenizer(DetokenizerError::Ggml(g)) => Some(g),
            EngineError::Backbone(b) | EngineError::Detokenizer(DetokenizerError::Backbone(b)) => {
                backbone_ggml(b)
            }
            EngineError::Depthformer(d) => depth_ggml(d),
            _ => None,
        }
    }

    /// Whether a file of the loaded model shrank after it was loaded
    /// ([`GgmlError::FileChanged`]): the model cannot run any more and must be loaded again.
    pub fn is_file_changed(&self) -> bool {
        matches!(self.ggml_error(), Some(GgmlError::FileChanged { .. }))
    }

    /// The message with every cause appended (`outer: cause: cause's cause`), for logs and
    /// protocol layers that carry one string.
    pub fn chain(&self) -> String {
        let mut s = self.to_string();
        let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(self);
        while let Some(e) = cur {
            let msg = e.to_string();
            // why: `#[error(transparent)]` layers repeat their source's message.
            if !s.ends_with(&msg) {
                s.push_str(": ");
                s.push_str(&msg);
            }
            cur = e.source();
        }
        s
    }
}

impl From<BackboneError> for EngineError {
    fn from(e: BackboneError) -> Self {
        match e {
            BackboneError::Capacity { .. } => EngineError::Capacity(e.to_string()),
            other => EngineError::Backbone(other),
        }
    }
}

impl From<MissingAudioRows> for EngineError {
    /// A prompt that does not fit its own request's rows is the engine's bug, not the caller's.
    fn from(e: MissingAudioRows) -> Self {
        EngineError::Invariant(e.to_string())
    }
}

/// The ggml error under a backbone error, through the batched tick it may have failed in.
fn backbone_ggml(e: &BackboneError) -> Option<&GgmlError> {
    match e {
        BackboneError::Ggml(g) => Some(g),
        BackboneError::Batch(inner) => backbone_ggml(inner),
        _ => None,
    }
}

/// The ggml error under a depthformer error, through the batched frame it may have failed in.
fn depth_ggml(e: &DepthError) -> Option<&GgmlError> {
    match e {
        DepthError::Ggml(g) => Some(g),
        DepthError::Batch(inner) => depth_ggml(inner),
        DepthError::Backbone(b) => backbone_ggml(b),
        _ => None,
    }
}
