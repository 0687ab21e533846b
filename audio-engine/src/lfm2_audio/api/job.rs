//! What a request asks the engine to do.

use crate::lfm2_audio::io::audio::AudioInput;
use crate::lfm2_audio::session::conversation::Task;
use crate::lfm2_audio::session::S2sRequest;
use crate::lfm2_audio::tasks::asr::AsrOptions;
use crate::lfm2_audio::tasks::tts::TtsOptions;

/// A transcription.
#[derive(Debug, Clone, PartialEq)]
pub struct AsrJob {
    /// The speech (WAV bytes or PCM samples).
    pub audio: AudioInput,
    /// Decoding settings.
    pub options: AsrOptions,
    /// Transcribe the audio in pieces of this many seconds, each on its own (their texts,
    /// trimmed, joined by a space): audio.cpp's fixed-size chunking. The whole audio then has
    /// no length limit, only each piece. `None`: the whole audio in one pass.
    pub chunk_seconds: Option<f64>,
}

/// A text to speak.
#[derive(Debug, Clone, PartialEq)]
pub struct TtsJob {
    /// What to say.
    pub text: String,
    /// Voice and sampling settings.
    pub options: TtsOptions,
}

/// One request to the engine.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Job {
    /// Speech recognition.
    Asr(AsrJob),
    /// Speech synthesis.
    Tts(TtsJob),
    /// One speech-to-speech turn, its earlier turns carried as artifacts.
    S2s(S2sRequest),
}

impl Job {
    /// The task the job runs.
    pub fn task(&self) -> Task {
        match self {
            Job::Asr(_) => Task::Asr,
            Job::Tts(_) => Task::Tts,
            Job::S2s(_) => Task::S2s,
        }
    }
}
