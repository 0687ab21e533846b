//! The model's input side: a request's audio read (WAV bytes or PCM, any rate and channel
//! count) as mono 16 kHz within the one-pass limit, then log-mel features, encoder and adapter
//! into the backbone's input rows.

use crate::ggml::{Backend, GraphAllocator};
use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::io::audio::{self, ReadOptions};
use crate::lfm2_audio::model::features;

/// An encoded question: its rows and their embeddings, `rows x hidden` row-major.
pub(crate) type Encoded = (usize, Vec<f32>);

impl Lfm2Audio {
    /// Reads a WAV (any rate, any channel count) as mono 16 kHz, within the one-pass limit.
    pub fn read_wav(&self, wav: &[u8]) -> Result<Vec<f32>, EngineError> {
        let opts = ReadOptions {
            max_seconds: self.options().max_audio_seconds,
        };
        Ok(audio::load_wav_bytes_16k(wav, &opts)?)
    }

    /// Reads a request's audio (WAV bytes or PCM) as mono 16 kHz, within the one-pass limit.
    pub fn read_audio(&self, audio: &audio::AudioInput) -> Result<Vec<f32>, EngineError> {
        let opts = ReadOptions {
            max_seconds: self.options().max_audio_seconds,
        };
        Ok(audio.samples_16k(&opts)?)
    }

    /// Checks 16 kHz mono samples handed in directly.
    pub fn check_samples(&self, samples: &[f32]) -> Result<(), EngineError> {
        let opts = ReadOptions {
            max_seconds: self.options().max_audio_seconds,
        };
        Ok(audio::validate_samples(samples, 16_000, &opts)?)
    }

    /// Reads a request's audio and encodes it: its 16 kHz samples, then the rows of
    /// [`Lfm2Audio::encode_audio_on`], or those `encoded` already has for these samples.
    pub(crate) fn hear_on(
        &self,
        backend: &Backend,
        alloc: Option<&GraphAllocator>,
        input: &audio::AudioInput,
        encoded: &mut dyn FnMut(&[f32]) -> Option<Encoded>,
    ) -> Result<(Vec<f32>, usize, Vec<f32>), EngineError> {
        let samples = self.read_audio(input)?;
        let (rows, embeddings) = match encoded(&samples) {
            Some(done) => done,
            None => self.encode_audio_on(backend, alloc, &samples)?,
        };
        Ok((samples, rows, embeddings))
    }

    /// Log-mel features, encoder and adapter: the audio-in embeddings of 16 kHz mono samples,
    /// `rows x hidden` row-major.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn encode_audio(&self, samples: &[f32]) -> Result<(usize, Vec<f32>), EngineError> {
        let backend = self.run_backend(None)?;
        self.encode_audio_on(&backend, None, samples)
    }

    /// [`Lfm2Audio::encode_audio`] computing on `backend`, in `alloc`'s buffer when given (an
    /// allocator for `backend` the caller keeps between encodes), else in a fresh one.
    pub(crate) fn encode_audio_on(
        &self,
        backend: &Backend,
        alloc: Option<&GraphAllocator>,
        samples: &[f32],
    ) -> Result<(usize, Vec<f32>), EngineError> {
        self.check_samples(samples)?;
        let mel = features::log_mel(samples)?;
        let encoder = self.encoder();
        let out = match alloc {
            Some(a) => encoder.encode_in(backend, a, mel.data(), mel.n_frames())?,
            None => encoder.encode(backend, mel.data(), mel.n_frames())?,
        };
        Ok((out.n_frames, out.adapter))
    }
}
