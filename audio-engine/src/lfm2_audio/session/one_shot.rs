//! One-shot tasks on a session's backend (its threads and kept encoder buffer): encoding audio,
//! ASR and TTS, which leave the conversation caches alone.

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::{ReplyEvent, ReplyResult};
use crate::lfm2_audio::tasks::asr::{AsrOptions, AsrResult};
use crate::lfm2_audio::tasks::tts::TtsOptions;

use super::Session;

impl Session {
    /// The audio-in embeddings of 16 kHz mono samples (as [`Lfm2Audio::encode_audio`](crate::lfm2_audio::Lfm2Audio::encode_audio)), on the
    /// session's backend and in its kept encoder buffer; the kept questions are neither used
    /// nor changed.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn encode_audio(
        &mut self,
        samples: &[f32],
    ) -> Result<(usize, Vec<f32>), EngineError> {
        self.settle(false);
        let backend = self.backend()?;
        self.model
            .encode_audio_on(&backend, self.encoder_alloc.as_ref(), samples)
    }

    /// Transcribes 16 kHz mono samples on the session's backend (as [`Lfm2Audio::asr`](crate::lfm2_audio::Lfm2Audio::asr); the
    /// conversation caches are not involved).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn asr(
        &mut self,
        samples: &[f32],
        opts: &AsrOptions,
    ) -> Result<AsrResult, EngineError> {
        self.settle(false);
        let backend = self.backend()?;
        self.model.asr_on(&backend, samples, opts)
    }

    /// [`Session::asr`], handing each piece of text to `sink` (see [`Lfm2Audio::asr_with`](crate::lfm2_audio::Lfm2Audio::asr_with)).
    pub(crate) fn asr_with(
        &mut self,
        samples: &[f32],
        opts: &AsrOptions,
        sink: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AsrResult, EngineError> {
        self.settle(false);
        let backend = self.backend()?;
        self.model.asr_on_with(&backend, samples, opts, sink)
    }

    /// Speaks `text` on the session's backend (as [`Lfm2Audio::tts`](crate::lfm2_audio::Lfm2Audio::tts); the conversation caches
    /// are not involved).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn tts(
        &mut self,
        text: &str,
        opts: &TtsOptions,
    ) -> Result<ReplyResult, EngineError> {
        self.tts_with(text, opts, &mut |_| true)
    }

    /// [`Session::tts`], handing each event to `sink` as it is produced (return false to stop:
    /// the result then holds what was produced so far, `ended` false).
    pub(crate) fn tts_with(
        &mut self,
        text: &str,
        opts: &TtsOptions,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<ReplyResult, EngineError> {
        self.settle(false);
        let backend = self.backend()?;
        self.model.tts_on(&backend, text, opts, sink)
    }
}
