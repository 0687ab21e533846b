//! Generating a reply: text tokens and audio frames on one schedule, the frames decoded to
//! 24 kHz audio as they come, delivered as events (streaming) and as a whole (offline).
//!
//! Offline and streamed replies run the same code: the offline call collects the events a
//! stream would deliver, so for a fixed seed both give the same text, audio and steps, bit for
//! bit.

use std::time::{Duration, Instant};

use super::frame_threads::FrameThreads;
use super::schedule::{Modality, Schedule, ScheduleTokens, TextOutcome};
use super::worker::EventStream;
use crate::ggml::StreamGuard;
use crate::lfm2_audio::engine::{prefill_blocks, Generating, Lfm2Audio};
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::model::backbone::scheduler::{OwnedPosition, StepFailed, StepIntent};
use crate::lfm2_audio::model::backbone::{Backbone, DecodeCache, ForwardOutput, Position};
use crate::lfm2_audio::model::backbone::{BatchCompute, Rows};
use crate::lfm2_audio::model::depthformer::scheduler::FrameIntent;
use crate::lfm2_audio::model::depthformer::{FrameJob, FrameRows};
use crate::lfm2_audio::model::sampling::{AudioSampler, SamplerConfig};
use crate::lfm2_audio::text::prompt::Prompt;
use crate::lfm2_audio::text::tools::{TOOL_CALL_END, TOOL_CALL_START};

/// Generation settings of one reply.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplyOptions {
    /// Most steps (text tokens and frames) to generate, the ending `<|im_end|>` included.
    pub max_new_tokens: usize,
    /// Text sampling (default greedy).
    pub text: SamplerConfig,
    /// Audio sampling.
    pub audio: SamplerConfig,
    /// Whether the tool-call markers (`<|tool_call_start|>`, `<|tool_call_end|>`, control
    /// tokens otherwise left out) are streamed as text: on when the prompt's system turn lists
    /// tools, so that a front end can split the reply's calls from what it says.
    pub call_markers: bool,
}

/// Something a reply produced, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyEvent {
    /// Text became available (whole UTF-8 characters; control tokens are left out, but for the
    /// tool-call markers of a reply whose system turn lists tools).
    Text(String),
    /// 24 kHz mono samples became final.
    Audio(Vec<f32>),
}

/// Per-stage timings of a reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplyTimings {
    /// Features, encoder and adapter of the input audio.
    pub encode: Duration,
    /// Prompt prefill.
    pub prefill: Duration,
    /// From the request's start to the first audio samples.
    pub first_audio: Option<Duration>,
    /// Generation (backbone steps, depthformer, detokenizer).
    pub generate: Duration,
    /// The whole request.
    pub total: Duration,
    /// Each generation step's parts (what `generate` is made of).
    pub steps: StepTimings,
}

/// Per-step timings of a reply's generation, in the order the steps ran.
///
/// why: a benchmark compares a text step against a plain LLM's decode step and a frame's
/// backbone and depthformer parts against their own floors; totals hide which part is slow, and
/// medians need the single steps. Timing reads the clock only, so outputs do not change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepTimings {
    /// Text steps: sampling the token and the backbone forward of it (a step that ends the
    /// reply, or the last one `max_new_tokens` allows, runs no forward and is left out).
    pub text: Vec<Duration>,
    /// Audio frames: the depthformer (one step per codebook, sampling included).
    pub depthformer: Vec<Duration>,
    /// Audio frames: the backbone forward of the frame.
    pub frame_backbone: Vec<Duration>,
    /// Audio frames: the detokenizer (codes to 24 kHz samples; end-of-audio frames run none).
    pub detokenizer: Vec<Duration>,
}

/// One step of a reply as the generator yielded it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReplyStep {
    /// A text token id (`<|text_end|>` included; `<|im_end|>` never, as it ends the reply).
    Text(u32),
    /// An audio frame: one code per codebook (all `audio_vocab_size - 1` for end of audio).
    Frame(Vec<u32>),
}

/// A prompt's prefill that restores what earlier requests already ran (the session layer's
/// prefill-block cache implements it): the reply loop needs only this, not the cache.
pub(crate) trait KeptPrefill {
    /// Clears `cache` and prefills `positions` (partitioned into `blocks`) from position 0,
    /// restoring the blocks it kept and running the rest; returns the last position's outputs
    /// and the positions restored instead of run.
    fn prefill_kept(
        &mut self,
        backbone: &Backbone,
        cache: &mut DecodeCache,
        positions: &[Position<'_>],
        blocks: &[std::ops::Range<usize>],
    ) -> Result<(ForwardOutput, usize), EngineError>;
}

/// A finished reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplyResult {
    /// The reply's text (control tokens left out).
    pub text: String,
    /// 24 kHz mono samples.
    pub audio: Vec<f32>,
    /// Every step generated, as the generator yielded it (text ids, frames incl. end of audio).
    pub steps: Vec<ReplyStep>,
    /// False when the reply was cut (max_new_tokens, an early stream finish).
    pub ended: bool,
    /// Prompt positions.
    pub prompt_positions: usize,
    /// Positions the prefill restored from kept blocks instead of running them.
    pub resumed_prefill_steps: usize,
    /// Timings.
    pub timings: ReplyTimings,
}

/// A prepared reply request.
#[derive(Debug)]
pub(crate) struct ReplyRequest {
    pub prompt: Prompt,
    /// Audio-in rows of the prompt's questions, `hidden` values each.
    pub rows: Vec<f32>,
    pub schedule: Schedule,
    pub opts: ReplyOptions,
    pub started: Instant,
    pub encode: Duration,
}

/// Text bytes waiting for the rest of a UTF-8 character.
///
/// The pieces it returns, joined, equal `String::from_utf8_lossy` of all bytes pushed (each
/// invalid sequence one U+FFFD, as the tokenizer's `decode` gives), however the bytes were
/// split: only an incomplete character at the end waits for more.
#[derive(Default)]
pub(crate) struct Utf8Pending(Vec<u8>);

impl Utf8Pending {
    /// Appends bytes and returns the text that is final: complete characters, and U+FFFD for
    /// each invalid sequence.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.0.extend_from_slice(bytes);
        let mut out = String::new();
        let mut done = 0;
        loop {
            match std::str::from_utf8(&self.0[done..]) {
                Ok(s) => {
                    out.push_str(s);
                    done = self.0.len();
                    break;
                }
                Err(e) => {
                    let valid = done + e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.0[done..valid]));
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            done = valid + n;
                        }
                        None => {
                            // why: the tail may be the start of a character the next token ends.
                            done = valid;
                            break;
                        }
                    }
                }
            }
        }
        self.0.drain(..done);
        out
    }

    fn flush(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.0).into_owned();
        self.0.clear();
        out
    }
}

/// The one check of a request's step limit: a reply of no steps is a bad request. The reply
/// loop every task runs makes it; so do the two places where a request must fail before any
/// work starts: a turn's preparation (a turn started early fails as its run would) and a
/// stream's start.
pub(crate) fn check_max_new_tokens(max_new_tokens: usize) -> Result<(), EngineError> {
    if max_new_tokens == 0 {
        return Err(EngineError::InvalidRequest(
            "max_new_tokens must be positive".into(),
        ));
    }
    Ok(())
}

impl Lfm2Audio {
    pub(crate) fn schedule_tokens(&self) -> ScheduleTokens {
        let s = self.special_tokens();
        ScheduleTokens {
            im_end: s.im_end,
            audio_start: s.audio_start,
            text_end: s.text_end,
            end_of_audio: s.end_of_audio,
        }
    }

    /// Runs a reply: prefill (through `prefill_cache` when given), then the schedule's steps,
    /// each event handed to `sink` (which returns false to stop early).
    pub(crate) fn run_reply(
        &self,
        backend: &crate::ggml::Backend,
        req: ReplyRequest,
        prefill_cache: Option<&mut dyn KeptPrefill>,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<ReplyResult, EngineError> {
        let ReplyRequest {
            prompt,
            rows,
            mut schedule,
            opts,
            started,
            encode,
        } = req;
        check_max_new_tokens(opts.max_new_tokens)?;
        let context = self.options().context;
        let prompt_len = prompt.len();
        if prompt_len + opts.max_new_tokens > context {
            return Err(EngineError::Capacity(format!(
                "prompt ({prompt_len} positions) + max_new_tokens ({}) exceed the context of \
                 {context}",
                opts.max_new_tokens
            )));
        }
        let tok = self.tokenizer();
        // The call markers' ids, when they are streamed (each one token of the vocabulary).
        let markers: Vec<(u32, &str)> = if opts.call_markers {
            [TOOL_CALL_START, TOOL_CALL_END]
                .into_iter()
                .filter_map(|m| match tok.encode(m, true).as_slice() {
                    [id] => Some((*id, m)),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        let backbone = self.backbone();
        let hidden = backbone.config().hidden_size as usize;
        let mut cache = backbone.new_cache_on(backend, prompt_len + opts.max_new_tokens)?;

        // Prefill.
        let t_prefill = Instant::now();
        let positions = prompt.positions(&rows, hidden)?;
        let blocks = prompt.blocks();
        let (mut last, resumed): (ForwardOutput, usize) = match prefill_cache {
            Some(pc) => pc.prefill_kept(backbone, &mut cache, &positions, &blocks)?,
            None => (
                prefill_blocks(backbone, &mut cache, &positions, &blocks)?,
                0,
            ),
        };
        drop(positions);
        let prefill = t_prefill.elapsed();

        // Generation.
        let t_gen = Instant::now();
        let mut text_sampler = AudioSampler::new(opts.text);
        // why: a text-only schedule (ASR) never makes a frame, so it skips the audio state.
        let speaks = schedule.speaks();
        let mut frame_threads = match speaks {
            true => Some(FrameThreads::for_reply(self, backend)?),
            false => None,
        };
        let mut framer = match speaks {
            true => Some(Framer::new(
                self,
                frame_threads.as_ref().map_or(backend, |f| f.backend()),
                AudioSampler::new(opts.audio),
            )?),
            false => None,
        };
        let mut detok = frame_threads
            .as_ref()
            .map(|f| self.detokenizer().stream_on(f.backend()));
        let mut stepper = Stepper::new(self, cache);
        let mut pending = Utf8Pending::default();
        let mut result = ReplyResult {
            prompt_positions: prompt_len,
            resumed_prefill_steps: resumed,
            ..Default::default()
        };
        let mut emit = |ev: ReplyEvent, result: &mut ReplyResult| -> bool {
            match &ev {
                ReplyEvent::Text(t) => result.text.push_str(t),
                ReplyEvent::Audio(a) => {
                    if result.timings.first_audio.is_none() && !a.is_empty() {
                        result.timings.first_audio = Some(started.elapsed());
                    }
                    result.audio.extend_from_slice(a);
                }
            }
            sink(ev)
        };
        let mut iterations = 0;
        'gen: loop {
            if iterations == opts.max_new_tokens {
                break;
            }
            iterations += 1;
            let t_step = Instant::now();
            // why announce now: the ticks then wait for this reply's step (and frame) rather
            // than run without it while it samples or runs its frame.
            let step_intent = stepper.intend();
            let next_input = match schedule.next() {
                Modality::Text => {
                    let logits = last.logits.as_deref().ok_or_else(|| {
                        EngineError::Invariant("no logits for a text step".into())
                    })?;
                    let t = text_sampler.sample(logits)?;
                    match schedule.text(t) {
                        TextOutcome::Stop => {
                            result.ended = true;
                            break 'gen;
                        }
                        outcome => {
                            result.steps.push(ReplyStep::Text(t));
                            let marker = markers.iter().find(|(id, _)| *id == t);
                            if !tok.is_control(t) || marker.is_some() {
                                let bytes = match marker {
                                    Some((_, m)) => m.as_bytes(),
                                    None => tok.token_bytes(t)?,
                                };
                                let piece = pending.push(bytes);
                                if !piece.is_empty() && !emit(ReplyEvent::Text(piece), &mut result)
                                {
                                    break 'gen;
                                }
                            }
                            if outcome == TextOutcome::KeepAndStop {
                                result.ended = true;
                                break 'gen;
                            }
                            OwnedPosition::Text(t)
                        }
                    }
                }
                Modality::Audio => {
                    let (Some(framer), Some(detok), Some(threads)) =
                        (framer.as_mut(), detok.as_mut(), frame_threads.as_mut())
                    else {
                        return Err(EngineError::Invariant(
                            "a text-only schedule asked for a frame".into(),
                        ));
                    };
                    threads.before_frame()?;
                    let t_depth = Instant::now();
                    let intent = framer.intend();
                    let alone = intent.is_none();
                    let codes = framer.frame(intent, &last.hidden)?;
                    // why: batched frames run in the model's frame ticks, on its threads; the
                    // frame policy then times (and sets the threads of) the detokenizer only.
                    let mut graphs = match alone {
                        true => t_depth.elapsed(),
                        false => Duration::ZERO,
                    };
                    result.timings.steps.depthformer.push(t_step.elapsed());
                    let codes = schedule.frame(codes);
                    // why: a frame holding the end-of-audio code carries no audio; in codebook 0
                    // it ends the audio, and in a later codebook (random weights sample it) it
                    // has no detokenizer row (liquid-audio's table would be indexed past its
                    // end for the last codebook). Such frames stay reply steps but are silent.
                    let eoa = codes.contains(&self.special_tokens().end_of_audio);
                    if !eoa {
                        let t_detok = Instant::now();
                        let samples = detok.push(&codes)?;
                        let took = t_detok.elapsed();
                        graphs += took;
                        result.timings.steps.detokenizer.push(took);
                        if !emit(ReplyEvent::Audio(samples), &mut result) {
                            result.steps.push(ReplyStep::Frame(codes));
                            break 'gen;
                        }
                    }
                    threads.after_frame(graphs);
                    result.steps.push(ReplyStep::Frame(codes));
                    // why: the frame goes back into the backbone below; the step borrows it.
                    let ReplyStep::Frame(codes) = result.steps.last().expect("just pushed") else {
                        unreachable!()
                    };
                    let want_logits = schedule.next() == Modality::Text;
                    let t_backbone = Instant::now();
                    let frame = OwnedPosition::Frame(codes.clone());
                    last = stepper.step(step_intent, frame, want_logits)?;
                    result
                        .timings
                        .steps
                        .frame_backbone
                        .push(t_backbone.elapsed());
                    continue 'gen;
                }
            };
            if iterations == opts.max_new_tokens {
                break;
            }
            let want_logits = schedule.next() == Modality::Text;
            last = stepper.step(step_intent, next_input, want_logits)?;
            result.timings.steps.text.push(t_step.elapsed());
        }
        let tail_text = pending.flush();
        if !tail_text.is_empty() {
            emit(ReplyEvent::Text(tail_text), &mut result);
        }
        if let Some(detok) = detok {
            let tail = detok.finish();
            if !tail.is_empty() {
                emit(ReplyEvent::Audio(tail), &mut result);
            }
        }
        result.timings.encode = encode;
        result.timings.prefill = prefill;
        result.timings.generate = t_gen.elapsed();
        result.timings.total = started.elapsed();
        Ok(result)
    }
}

/// The reply's single-position backbone steps. Each iteration decides
/// ([`Lfm2Audio::batching_now`]): batched, the decode cache is lent to the model's step
/// scheduler for the step, and the reply streams (prefills elsewhere leave it half the
/// threads); alone, the step computes on the cache's own backend, beside the other replies'
/// (the thread budget shares the cores). The bytes are the same either way.
struct Stepper<'m> {
    model: &'m Lfm2Audio,
    cache: Option<DecodeCache>,
    /// Held while the reply batches.
    stream: Option<StreamGuard>,
    _generating: Generating,
}

impl<'m> Stepper<'m> {
    fn new(model: &'m Lfm2Audio, cache: DecodeCache) -> Stepper<'m> {
        Stepper {
            model,
            cache: Some(cache),
            stream: None,
            _generating: model.generating(),
        }
    }

    /// Announces the step this iteration will run when it batches (dropped unused when the
    /// reply ends first); `None`: the step computes alone.
    fn intend(&mut self) -> Option<StepIntent> {
        let batch = self.model.batching_now();
        if batch != self.stream.is_some() {
            self.stream = if batch {
                self.model.stream_guard()
            } else {
                None
            };
        }
        batch.then(|| self.model.step_scheduler().intend())
    }

    /// Runs `position` at the end of the cache: in a tick of the step scheduler when
    /// [`Stepper::intend`] announced it, else alone.
    fn step(
        &mut self,
        intent: Option<StepIntent>,
        position: OwnedPosition,
        logits: bool,
    ) -> Result<ForwardOutput, EngineError> {
        let backbone = self.model.backbone();
        let Some(intent) = intent else {
            let cache = self.cache.as_mut().ok_or_else(lost_cache)?;
            let p = [position.as_position()];
            return Ok(backbone.forward(cache, &p, Rows::Last, logits)?);
        };
        let intent = Some(intent);
        let cache = self.cache.take().ok_or_else(lost_cache)?;
        let scheduler = self.model.step_scheduler();
        match scheduler.step(intent, backbone, cache, position, logits) {
            Ok((cache, out)) => {
                self.cache = Some(cache);
                Ok(out)
            }
            Err(failed) => {
                let StepFailed { cache, error } = *failed;
                self.cache = cache;
                Err(error.into())
            }
        }
    }
}

fn lost_cache() -> EngineError {
    EngineError::Invariant("the decode cache was lost by a failed step".into())
}

/// The reply's depthformer state (its frame rows and audio sampler). Each frame decides, as
/// the [`Stepper`] does: batched, the state is lent to the model's frame scheduler; alone, the
/// frame computes on the reply's frame backend.
struct Framer<'m> {
    model: &'m Lfm2Audio,
    state: Option<(FrameRows, AudioSampler)>,
    /// The backend of this reply's frames when they compute alone.
    backend: crate::ggml::Backend,
    /// The graph memory of this reply's frames computed alone (made on the first one).
    alone: Option<BatchCompute>,
}

impl<'m> Framer<'m> {
    fn new(
        model: &'m Lfm2Audio,
        frame_backend: &crate::ggml::Backend,
        sampler: AudioSampler,
    ) -> Result<Framer<'m>, EngineError> {
        let rows = model.depthformer().new_frame_rows(frame_backend)?;
        Ok(Framer {
            model,
            state: Some((rows, sampler)),
            backend: frame_backend.clone(),
            alone: None,
        })
    }

    /// Announces the frame this iteration will run when it batches; `None`: it computes alone.
    fn intend(&self) -> Option<FrameIntent> {
        self.model
            .batching_now()
            .then(|| self.model.frame_scheduler().intend())
    }

    /// The frame of the backbone's final-norm `hidden` state: in a tick of the frame scheduler
    /// when [`Framer::intend`] announced it, else alone.
    fn frame(
        &mut self,
        intent: Option<FrameIntent>,
        hidden: &[f32],
    ) -> Result<Vec<u32>, EngineError> {
        let depth = self.model.depthformer();
        if intent.is_none() {
            let compute = match &mut self.alone {
                Some(c) => c,
                slot => slot.insert(BatchCompute::new(self.backend.clone(), "depthformer")?),
            };
            let (rows, sampler) = self.state.as_mut().ok_or_else(lost_frame)?;
            let mut job = [FrameJob {
                rows,
                hidden,
                sampler,
            }];
            let mut out = depth.frames(compute, &mut job);
            return Ok(out.pop().ok_or_else(lost_frame)??);
        }
        let (rows, sampler) = self.state.take().ok_or_else(lost_frame)?;
        let done =
            self.model
                .frame_scheduler()
                .frame(intent, depth, rows, hidden.to_vec(), sampler);
        self.state = Some((done.rows, done.sampler));
        Ok(done.codes?)
    }
}

fn lost_frame() -> EngineError {
    EngineError::Invariant("the frame state was lost by a failed frame".into())
}

/// A reply being generated on a worker thread; events arrive as they are produced.
pub struct ReplyStream {
    inner: EventStream<ReplyEvent, Result<ReplyResult, EngineError>>,
}

impl std::fmt::Debug for ReplyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyStream").finish_non_exhaustive()
    }
}

impl ReplyStream {
    /// Starts `job` on a worker thread ([`Worker`](super::worker::Worker)); it reports events
    /// through the sink it is given.
    pub(crate) fn spawn(
        job: impl FnOnce(&mut dyn FnMut(ReplyEvent) -> bool) -> Result<ReplyResult, EngineError>
            + Send
            + 'static,
    ) -> Result<ReplyStream, EngineError> {
        Ok(ReplyStream {
            inner: EventStream::spawn("lfm2e-reply", move |sink, _| job(sink))?,
        })
    }

    /// The next event, waiting for it; `None` once the reply is over.
    pub fn next_event(&mut self) -> Option<ReplyEvent> {
        self.inner.next_event()
    }

    /// Stops generation if it is still running (the reply is then cut: `ended` is false) and
    /// returns the whole result: everything generated, including events not yet pulled.
    pub fn finish(self) -> Result<ReplyResult, EngineError> {
        self.inner.finish()?
    }

    /// Waits for the reply to end on its own and returns the whole result.
    pub fn wait(self) -> Result<ReplyResult, EngineError> {
        self.inner.wait()?
    }
}
