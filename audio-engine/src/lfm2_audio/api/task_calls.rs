//! The per-task calls under the doors (feature `testkit`), for this workspace's tests and
//! benches only: they pin the bytes of each task's path (ASR, TTS, one-shot and multi-turn S2S,
//! the encoder) apart from the one request model. Applications use the doors instead:
//! [`Lfm2Audio::run`], [`Session::run`] / [`Session::run_cancellable`] and
//! [`Session::prepare_turn`].

use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::{ReplyEvent, ReplyResult, ReplyStream};
use crate::lfm2_audio::session::{S2sRequest, Session, TurnResult, TurnStream};
use crate::lfm2_audio::tasks::asr::{AsrOptions, AsrResult};
use crate::lfm2_audio::tasks::s2s::S2sOptions;
use crate::lfm2_audio::tasks::tts::TtsOptions;

/// The loaded model's per-task calls, each on a backend of its own (see the module docs).
pub trait ModelTasks {
    /// Transcribes a WAV file's bytes.
    fn asr_wav(&self, wav: &[u8], opts: &AsrOptions) -> Result<AsrResult, EngineError>;
    /// Transcribes 16 kHz mono samples.
    fn asr(&self, samples: &[f32], opts: &AsrOptions) -> Result<AsrResult, EngineError>;
    /// [`ModelTasks::asr`], handing each piece of text to `sink` (false stops decoding).
    fn asr_with(
        &self,
        samples: &[f32],
        opts: &AsrOptions,
        sink: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AsrResult, EngineError>;
    /// Speaks `text`.
    fn tts(&self, text: &str, opts: &TtsOptions) -> Result<ReplyResult, EngineError>;
    /// Starts a streamed TTS.
    fn tts_stream(&self, text: &str, opts: &TtsOptions) -> Result<ReplyStream, EngineError>;
    /// Answers a spoken question (16 kHz mono samples) with text and speech, one turn without
    /// a session.
    fn s2s(&self, samples: &[f32], opts: &S2sOptions) -> Result<ReplyResult, EngineError>;
    /// [`ModelTasks::s2s`] of a WAV file's bytes.
    fn s2s_wav(&self, wav: &[u8], opts: &S2sOptions) -> Result<ReplyResult, EngineError>;
    /// Starts a streamed [`ModelTasks::s2s`].
    fn s2s_stream(&self, samples: Vec<f32>, opts: &S2sOptions) -> Result<ReplyStream, EngineError>;
    /// The audio-in embeddings of 16 kHz mono samples, `rows x hidden` row-major.
    fn encode_audio(&self, samples: &[f32]) -> Result<(usize, Vec<f32>), EngineError>;
}

impl ModelTasks for Lfm2Audio {
    fn asr_wav(&self, wav: &[u8], opts: &AsrOptions) -> Result<AsrResult, EngineError> {
        Lfm2Audio::asr_wav(self, wav, opts)
    }
    fn asr(&self, samples: &[f32], opts: &AsrOptions) -> Result<AsrResult, EngineError> {
        Lfm2Audio::asr(self, samples, opts)
    }
    fn asr_with(
        &self,
        samples: &[f32],
        opts: &AsrOptions,
        sink: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AsrResult, EngineError> {
        Lfm2Audio::asr_with(self, samples, opts, sink)
    }
    fn tts(&self, text: &str, opts: &TtsOptions) -> Result<ReplyResult, EngineError> {
        Lfm2Audio::tts(self, text, opts)
    }
    fn tts_stream(&self, text: &str, opts: &TtsOptions) -> Result<ReplyStream, EngineError> {
        Lfm2Audio::tts_stream(self, text, opts)
    }
    fn s2s(&self, samples: &[f32], opts: &S2sOptions) -> Result<ReplyResult, EngineError> {
        Lfm2Audio::s2s(self, samples, opts)
    }
    fn s2s_wav(&self, wav: &[u8], opts: &S2sOptions) -> Result<ReplyResult, EngineError> {
        Lfm2Audio::s2s_wav(self, wav, opts)
    }
    fn s2s_stream(&self, samples: Vec<f32>, opts: &S2sOptions) -> Result<ReplyStream, EngineError> {
        Lfm2Audio::s2s_stream(self, samples, opts)
    }
    fn encode_audio(&self, samples: &[f32]) -> Result<(usize, Vec<f32>), EngineError> {
        Lfm2Audio::encode_audio(self, samples)
    }
}

/// A session's per-task calls (see the module docs): S2S turns through its caches, ASR, TTS and
/// encoding on its backend.
pub trait SessionTasks: Sized {
    /// Runs one turn offline.
    fn s2s(&mut self, request: &S2sRequest) -> Result<TurnResult, EngineError>;
    /// Runs one turn, handing each event to `sink` (false cuts the reply).
    fn s2s_with(
        &mut self,
        request: &S2sRequest,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<TurnResult, EngineError>;
    /// Streams one turn on a worker thread that gives the session back.
    fn s2s_stream(self, request: &S2sRequest) -> Result<TurnStream, Box<(Session, EngineError)>>;
    /// Transcribes 16 kHz mono samples on the session's backend.
    fn asr(&mut self, samples: &[f32], opts: &AsrOptions) -> Result<AsrResult, EngineError>;
    /// [`SessionTasks::asr`], handing each piece of text to `sink`.
    fn asr_with(
        &mut self,
        samples: &[f32],
        opts: &AsrOptions,
        sink: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AsrResult, EngineError>;
    /// Speaks `text` on the session's backend.
    fn tts(&mut self, text: &str, opts: &TtsOptions) -> Result<ReplyResult, EngineError>;
    /// [`SessionTasks::tts`], handing each event to `sink`.
    fn tts_with(
        &mut self,
        text: &str,
        opts: &TtsOptions,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<ReplyResult, EngineError>;
    /// The audio-in embeddings of 16 kHz mono samples, in the session's kept encoder buffer.
    fn encode_audio(&mut self, samples: &[f32]) -> Result<(usize, Vec<f32>), EngineError>;
}

impl SessionTasks for Session {
    fn s2s(&mut self, request: &S2sRequest) -> Result<TurnResult, EngineError> {
        Session::s2s(self, request)
    }
    fn s2s_with(
        &mut self,
        request: &S2sRequest,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<TurnResult, EngineError> {
        Session::s2s_with(self, request, sink)
    }
    fn s2s_stream(self, request: &S2sRequest) -> Result<TurnStream, Box<(Session, EngineError)>> {
        Session::s2s_stream(self, request)
    }
    fn asr(&mut self, samples: &[f32], opts: &AsrOptions) -> Result<AsrResult, EngineError> {
        Session::asr(self, samples, opts)
    }
    fn asr_with(
        &mut self,
        samples: &[f32],
        opts: &AsrOptions,
        sink: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AsrResult, EngineError> {
        Session::asr_with(self, samples, opts, sink)
    }
    fn tts(&mut self, text: &str, opts: &TtsOptions) -> Result<ReplyResult, EngineError> {
        Session::tts(self, text, opts)
    }
    fn tts_with(
        &mut self,
        text: &str,
        opts: &TtsOptions,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<ReplyResult, EngineError> {
        Session::tts_with(self, text, opts, sink)
    }
    fn encode_audio(&mut self, samples: &[f32]) -> Result<(usize, Vec<f32>), EngineError> {
        Session::encode_audio(self, samples)
    }
}
