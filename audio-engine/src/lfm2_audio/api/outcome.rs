//! What a finished job produced.

use crate::lfm2_audio::generation::reply::ReplyTimings;
use crate::lfm2_audio::session::conversation::{Artifact, Task};
use crate::lfm2_audio::tasks::asr::{AsrTimings, StopReason};

/// The result of a [`Job`](super::Job), the same shape for every task. Two outcomes are equal
/// when everything but their [`timings`](Outcome::timings) is.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Outcome {
    /// The task that ran.
    pub task: Task,
    /// The transcript (ASR) or the reply's text (S2S; TTS: the text steps before the audio).
    pub text: String,
    /// 24 kHz mono samples (TTS, S2S; empty for ASR). After a cancel, the audio of the events
    /// the sink accepted.
    pub audio: Vec<f32>,
    /// The reply artifact the next turn sends back (S2S with `return_codes`).
    pub artifact: Option<Artifact>,
    /// ASR's generated token ids (every piece's, in order).
    pub tokens: Vec<u32>,
    /// Steps generated (text tokens and audio frames).
    pub steps: usize,
    /// Prompt positions (of the last piece for chunked ASR).
    pub prompt_positions: usize,
    /// Prompt positions restored from the session's prefill blocks instead of run (S2S).
    pub resumed_prefill_positions: usize,
    /// Earlier questions whose encoder output was reused (S2S).
    pub reused_questions: usize,
    /// Whether generation ended on its own (an end token), not at the step limit or a cancel.
    pub ended: bool,
    /// Whether the sink asked to stop.
    pub cancelled: bool,
    /// Seconds of input audio (ASR).
    pub input_seconds: f64,
    /// Where the time went (ASR: `encode`, `prefill`, and its decode as `generate`; summed
    /// over the pieces of chunked ASR).
    pub timings: ReplyTimings,
}

impl PartialEq for Outcome {
    // why: timings are the clock's, not the job's: two runs of one job are equal.
    fn eq(&self, other: &Outcome) -> bool {
        let Outcome {
            task,
            text,
            audio,
            artifact,
            tokens,
            steps,
            prompt_positions,
            resumed_prefill_positions,
            reused_questions,
            ended,
            cancelled,
            input_seconds,
            timings: _,
        } = self;
        (
            task,
            text,
            audio,
            artifact,
            tokens,
            steps,
            prompt_positions,
            resumed_prefill_positions,
            reused_questions,
            ended,
            cancelled,
            input_seconds,
        ) == (
            &other.task,
            &other.text,
            &other.audio,
            &other.artifact,
            &other.tokens,
            &other.steps,
            &other.prompt_positions,
            &other.resumed_prefill_positions,
            &other.reused_questions,
            &other.ended,
            &other.cancelled,
            &other.input_seconds,
        )
    }
}

impl Outcome {
    pub(crate) fn new(task: Task) -> Outcome {
        Outcome {
            task,
            text: String::new(),
            audio: Vec::new(),
            artifact: None,
            tokens: Vec::new(),
            steps: 0,
            prompt_positions: 0,
            resumed_prefill_positions: 0,
            reused_questions: 0,
            ended: false,
            cancelled: false,
            input_seconds: 0.0,
            timings: ReplyTimings::default(),
        }
    }

    /// Adds one ASR pass's timings.
    pub(crate) fn add_asr_timings(&mut self, t: &AsrTimings) {
        self.timings.encode += t.encode;
        self.timings.prefill += t.prefill;
        self.timings.generate += t.decode;
        self.timings.total += t.encode + t.prefill + t.decode;
    }

    /// Whether an ASR stop reason means the text ended on its own.
    pub(crate) fn asr_ended(stop: StopReason) -> bool {
        matches!(stop, StopReason::ImEnd | StopReason::AudioStart)
    }
}
