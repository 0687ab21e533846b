//! Speech recognition: WAV in, text out (system prompt `Perform ASR.`, greedy decoding).

use std::time::{Duration, Instant};

use crate::ggml::Backend;

use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::ReplyStep;
use crate::lfm2_audio::generation::reply::{ReplyEvent, ReplyOptions, ReplyRequest};
use crate::lfm2_audio::generation::schedule::Schedule;
use crate::lfm2_audio::limits::check_system_prompt;
use crate::lfm2_audio::model::sampling::SamplerConfig;
use crate::lfm2_audio::text::prompt::{PromptBuilder, SYSTEM_ASR};

/// ASR options.
#[derive(Debug, Clone, PartialEq)]
pub struct AsrOptions {
    /// Most text tokens to generate.
    pub max_new_tokens: usize,
    /// System prompt.
    pub system_prompt: String,
}

impl Default for AsrOptions {
    fn default() -> Self {
        AsrOptions {
            max_new_tokens: 512,
            system_prompt: SYSTEM_ASR.to_owned(),
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The model produced `<|im_end|>`.
    ImEnd,
    /// The model produced `<|audio_start|>` (it wanted to speak; ASR stops there).
    AudioStart,
    /// `max_new_tokens` was reached.
    MaxTokens,
    /// The caller's sink asked to stop (a [`Session::run`](crate::lfm2_audio::Session::run) sink returned false); the text is what was decoded
    /// until then.
    Stopped,
}

/// Per-stage timings.
#[derive(Debug, Clone, Copy, Default)]
pub struct AsrTimings {
    /// Features, encoder and adapter.
    pub encode: Duration,
    /// Prompt prefill.
    pub prefill: Duration,
    /// Decode steps.
    pub decode: Duration,
}

/// A transcription.
#[derive(Debug, Clone)]
pub struct AsrResult {
    /// The text: the generated tokens before the stop token, control tokens left out, decoded.
    pub text: String,
    /// Generated token ids, the stop token included when there is one.
    pub tokens: Vec<u32>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Prompt length in positions.
    pub prompt_positions: usize,
    /// Timings.
    pub timings: AsrTimings,
}

impl Lfm2Audio {
    /// Transcribes a WAV file's bytes.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn asr_wav(&self, wav: &[u8], opts: &AsrOptions) -> Result<AsrResult, EngineError> {
        let samples = self.read_wav(wav)?;
        self.asr(&samples, opts)
    }

    /// Transcribes 16 kHz mono samples.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn asr(&self, samples: &[f32], opts: &AsrOptions) -> Result<AsrResult, EngineError> {
        // why: the call computes on a backend of its own, so it never waits for other calls.
        let backend = self.run_backend(None)?;
        self.asr_on(&backend, samples, opts)
    }

    /// [`Lfm2Audio::asr`], handing each piece of text to `sink` as it is decoded (whole UTF-8
    /// characters, control tokens left out). When `sink` returns false, decoding stops after
    /// that step: the result holds the text so far and [`StopReason::Stopped`]. A caller that
    /// wants to cancel from another thread checks its flag in `sink`, so the cancel takes effect
    /// between decode steps instead of after the whole transcription.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn asr_with(
        &self,
        samples: &[f32],
        opts: &AsrOptions,
        sink: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AsrResult, EngineError> {
        let backend = self.run_backend(None)?;
        self.asr_on_with(&backend, samples, opts, sink)
    }

    /// [`Lfm2Audio::asr`] computing on `backend`.
    pub(crate) fn asr_on(
        &self,
        backend: &Backend,
        samples: &[f32],
        opts: &AsrOptions,
    ) -> Result<AsrResult, EngineError> {
        self.asr_on_with(backend, samples, opts, &mut |_| true)
    }

    /// [`Lfm2Audio::asr_with`] computing on `backend`: the reply loop every task runs, on a
    /// text-only schedule with greedy sampling.
    pub(crate) fn asr_on_with(
        &self,
        backend: &Backend,
        samples: &[f32],
        opts: &AsrOptions,
        sink: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AsrResult, EngineError> {
        check_system_prompt(&opts.system_prompt)?;
        let started = Instant::now();
        let (rows, audio) = self.encode_audio_on(backend, None, samples)?;
        let encode = started.elapsed();
        let mut b = PromptBuilder::new(self.tokenizer());
        b.system(&opts.system_prompt).audio(rows).assistant_turn();
        let req = ReplyRequest {
            prompt: b.finish(),
            rows: audio,
            schedule: Schedule::text_only(self.schedule_tokens()),
            opts: ReplyOptions {
                max_new_tokens: opts.max_new_tokens,
                text: SamplerConfig::GREEDY,
                // why: a text-only schedule draws no frame.
                audio: SamplerConfig::GREEDY,
                call_markers: false,
            },
            started,
            encode,
        };
        // why: the reply loop hands over a piece at every step that completes a character
        // (control tokens give none), so a sink checking a cancel flag is asked at nearly every
        // decode step.
        let mut stopped = false;
        let reply = self.run_reply(backend, req, None, &mut |ev| {
            let ReplyEvent::Text(t) = &ev else {
                return true;
            };
            // why: the loop's closing text flush still arrives after a stop; once the caller
            // said stop it hears nothing more.
            if stopped {
                return false;
            }
            stopped = !sink(t);
            !stopped
        })?;
        let tokens: Vec<u32> = reply
            .steps
            .iter()
            .map(|s| match s {
                ReplyStep::Text(t) => Ok(*t),
                ReplyStep::Frame(_) => Err(EngineError::Invariant(
                    "a text-only reply holds a frame".into(),
                )),
            })
            .collect::<Result<_, _>>()?;
        let sp = self.special_tokens();
        let stop = match tokens.last() {
            Some(&t) if reply.ended && t == sp.im_end => StopReason::ImEnd,
            Some(&t) if reply.ended && t == sp.audio_start => StopReason::AudioStart,
            _ if stopped => StopReason::Stopped,
            _ => StopReason::MaxTokens,
        };
        Ok(AsrResult {
            // why: control tokens (reserved ids, chat markup, the stop token) are left out of
            // the reply's text, which is the transcript.
            text: reply.text,
            tokens,
            stop,
            prompt_positions: reply.prompt_positions,
            timings: AsrTimings {
                encode: reply.timings.encode,
                prefill: reply.timings.prefill,
                decode: reply.timings.generate,
            },
        })
    }
}
