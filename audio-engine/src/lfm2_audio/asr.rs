//! Speech recognition: WAV in, text out (system prompt `Perform ASR.`, greedy decoding).

use std::time::{Duration, Instant};

use crate::ggml::Backend;

use super::engine::Lfm2Audio;
use super::error::EngineError;
use super::prompt::{PromptBuilder, SYSTEM_ASR};

/// ASR options.
#[derive(Debug, Clone)]
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
pub enum StopReason {
    /// The model produced `<|im_end|>`.
    ImEnd,
    /// The model produced `<|audio_start|>` (it wanted to speak; ASR stops there).
    AudioStart,
    /// `max_new_tokens` was reached.
    MaxTokens,
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

/// Index of the largest logit (the first one on ties, as `argmax` does).
pub fn greedy(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

impl Lfm2Audio {
    /// Transcribes a WAV file's bytes.
    pub fn asr_wav(&self, wav: &[u8], opts: &AsrOptions) -> Result<AsrResult, EngineError> {
        let samples = self.read_wav(wav)?;
        self.asr(&samples, opts)
    }

    /// Transcribes 16 kHz mono samples.
    pub fn asr(&self, samples: &[f32], opts: &AsrOptions) -> Result<AsrResult, EngineError> {
        // why: the call computes on a backend of its own, so it never waits for other calls.
        let backend = self.run_backend(None)?;
        self.asr_on(&backend, samples, opts)
    }

    /// [`Lfm2Audio::asr`] computing on `backend`.
    pub(crate) fn asr_on(
        &self,
        backend: &Backend,
        samples: &[f32],
        opts: &AsrOptions,
    ) -> Result<AsrResult, EngineError> {
        if opts.max_new_tokens == 0 {
            return Err(EngineError::InvalidRequest(
                "max_new_tokens must be positive".into(),
            ));
        }
        let t0 = Instant::now();
        let (rows, audio) = self.encode_audio_on(backend, samples)?;
        let t_enc = t0.elapsed();

        let tok = self.tokenizer();
        let mut b = PromptBuilder::new(tok);
        b.system(&opts.system_prompt)
            .audio(rows)
            .end_turn()
            .new_turn("assistant");
        let prompt_positions = b.len();
        let prompt = b.finish();
        let capacity = self.options().context;
        if prompt_positions + opts.max_new_tokens > capacity {
            return Err(EngineError::Capacity(format!(
                "prompt ({prompt_positions} positions) + max_new_tokens ({}) exceed the context \
                 of {capacity}",
                opts.max_new_tokens
            )));
        }
        let mut cache = self.new_cache(backend, prompt_positions + opts.max_new_tokens)?;
        let t1 = Instant::now();
        let out = self.prefill(&mut cache, &prompt, &audio)?;
        let t_prefill = t1.elapsed();
        let mut logits = out
            .logits
            .ok_or_else(|| EngineError::Internal("prefill returned no logits".into()))?;

        let sp = self.special_tokens();
        let t2 = Instant::now();
        let mut tokens = Vec::new();
        let stop = loop {
            let next = greedy(&logits);
            tokens.push(next);
            if next == sp.im_end {
                break StopReason::ImEnd;
            }
            if next == sp.audio_start {
                break StopReason::AudioStart;
            }
            if tokens.len() == opts.max_new_tokens {
                break StopReason::MaxTokens;
            }
            logits = self.step_text(&mut cache, next)?;
        };
        let text_ids: &[u32] = match stop {
            StopReason::MaxTokens => &tokens,
            _ => &tokens[..tokens.len() - 1],
        };
        // why: control tokens (reserved ids, chat markup) are not transcript text.
        let words: Vec<u32> = text_ids
            .iter()
            .copied()
            .filter(|&t| !tok.is_control(t))
            .collect();
        let text = tok.decode(&words)?;
        Ok(AsrResult {
            text,
            tokens,
            stop,
            prompt_positions,
            timings: AsrTimings {
                encode: t_enc,
                prefill: t_prefill,
                decode: t2.elapsed(),
            },
        })
    }
}
