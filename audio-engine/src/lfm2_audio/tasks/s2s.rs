//! Speech-to-speech: a spoken question in, an interleaved text + speech reply out, offline or
//! streamed (system prompt `Respond with interleaved text and audio.`).

use std::time::Instant;

use crate::ggml::Backend;
use crate::lfm2_audio::text::tools::lists_tools;

use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::{
    check_max_new_tokens, ReplyOptions, ReplyRequest, ReplyResult, ReplyStream,
};
use crate::lfm2_audio::generation::schedule::Schedule;
use crate::lfm2_audio::limits::check_system_prompt;
use crate::lfm2_audio::model::sampling::SamplerConfig;
use crate::lfm2_audio::text::prompt::{PromptBuilder, SYSTEM_S2S};

/// Speech-to-speech options.
#[derive(Debug, Clone, PartialEq)]
pub struct S2sOptions {
    /// Most reply steps (text tokens and frames).
    pub max_new_tokens: usize,
    /// Text sampling (default greedy).
    pub text: SamplerConfig,
    /// Audio sampling (default temperature 1.0, top-k 4, seed 0).
    pub audio: SamplerConfig,
    /// System prompt.
    pub system_prompt: String,
}

impl Default for S2sOptions {
    fn default() -> Self {
        S2sOptions {
            max_new_tokens: 1024,
            text: SamplerConfig::text(),
            audio: SamplerConfig::s2s_audio(0),
            system_prompt: SYSTEM_S2S.to_owned(),
        }
    }
}

impl Lfm2Audio {
    fn s2s_request(
        &self,
        backend: &Backend,
        samples: &[f32],
        opts: &S2sOptions,
    ) -> Result<ReplyRequest, EngineError> {
        check_system_prompt(&opts.system_prompt)?;
        let started = Instant::now();
        let (rows, audio) = self.encode_audio_on(backend, None, samples)?;
        let encode = started.elapsed();
        let mut b = PromptBuilder::new(self.tokenizer());
        b.system(&opts.system_prompt).audio(rows).assistant_turn();
        let (n_text, n_audio) = self.interleave();
        Ok(ReplyRequest {
            prompt: b.finish(),
            rows: audio,
            schedule: Schedule::interleaved(self.schedule_tokens(), n_text, n_audio),
            opts: ReplyOptions {
                max_new_tokens: opts.max_new_tokens,
                text: opts.text,
                audio: opts.audio,
                call_markers: lists_tools(&opts.system_prompt),
            },
            started,
            encode,
        })
    }

    /// Answers a spoken question (16 kHz mono samples) with text and speech.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn s2s(
        &self,
        samples: &[f32],
        opts: &S2sOptions,
    ) -> Result<ReplyResult, EngineError> {
        // why: the call computes on a backend of its own, so it never waits for other calls.
        let backend = self.run_backend(None)?;
        let req = self.s2s_request(&backend, samples, opts)?;
        self.run_reply(&backend, req, None, &mut |_| true)
    }

    /// [`Lfm2Audio::s2s`] of a WAV file's bytes (any rate and channel count).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn s2s_wav(
        &self,
        wav: &[u8],
        opts: &S2sOptions,
    ) -> Result<ReplyResult, EngineError> {
        let samples = self.read_wav(wav)?;
        self.s2s(&samples, opts)
    }

    /// Starts a streamed reply: the question is checked at once (a bad one fails here), then
    /// encoded and answered on a worker thread whose events arrive through the stream.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn s2s_stream(
        &self,
        samples: Vec<f32>,
        opts: &S2sOptions,
    ) -> Result<ReplyStream, EngineError> {
        self.check_samples(&samples)?;
        check_system_prompt(&opts.system_prompt)?;
        // why here too: a stream's request fails at its start, before the worker runs.
        check_max_new_tokens(opts.max_new_tokens)?;
        let model = self.clone();
        let opts = opts.clone();
        ReplyStream::spawn(move |sink| {
            let backend = model.run_backend(None)?;
            let req = model.s2s_request(&backend, &samples, &opts)?;
            model.run_reply(&backend, req, None, sink)
        })
    }
}
