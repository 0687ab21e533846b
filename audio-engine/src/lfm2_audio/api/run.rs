//! Runs a [`Job`] on a session or on the loaded model: the doors every front end goes through.

use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::ReplyEvent;
use crate::lfm2_audio::io::audio::{ReadOptions, INPUT_SAMPLE_RATE};
use crate::lfm2_audio::session::{Session, SessionOptions};
use crate::lfm2_audio::tasks::asr::StopReason;

use super::job::{AsrJob, Job};
use super::outcome::Outcome;

/// A sink that remembers a stop: once it or the caller's cancel check said no, later events (a
/// vocoder's tail after a cancel) are not delivered.
struct Guarded<'a> {
    sink: &'a mut dyn FnMut(ReplyEvent) -> bool,
    keep_going: &'a dyn Fn() -> bool,
    stopped: bool,
    /// Samples of the audio events the sink accepted: the result's audio is their
    /// concatenation, so after a cancel it is cut to this length.
    accepted_audio: usize,
}

impl Guarded<'_> {
    /// Whether to go on: false once the sink said no or the cancel check says so.
    fn keep_going(&mut self) -> bool {
        if !self.stopped && !(self.keep_going)() {
            self.stopped = true;
        }
        !self.stopped
    }

    fn offer(&mut self, ev: ReplyEvent) -> bool {
        if !self.keep_going() {
            return false;
        }
        let samples = match &ev {
            ReplyEvent::Audio(a) => a.len(),
            ReplyEvent::Text(_) => 0,
        };
        self.stopped = !(self.sink)(ev);
        if !self.stopped {
            self.accepted_audio += samples;
        }
        !self.stopped
    }
}

impl Lfm2Audio {
    /// Runs `job` in a session of its own that keeps nothing (no prefill blocks, no encoder
    /// outputs, no work ahead), as [`Session::run`] does; for one-shot calls that should leave
    /// every other session's caches and background work alone.
    pub fn run(
        &self,
        job: &Job,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<Outcome, EngineError> {
        self.run_cancellable(job, &|| true, sink)
    }

    /// [`Lfm2Audio::run`] with a cancel check, as [`Session::run_cancellable`] takes it.
    pub fn run_cancellable(
        &self,
        job: &Job,
        keep_going: &dyn Fn() -> bool,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<Outcome, EngineError> {
        let mut s = Session::new(
            self.clone(),
            SessionOptions {
                prefill_slots: 0,
                kept_questions: 0,
                n_threads: None,
                prefill_ahead: false,
                prefill_head: false,
            },
        );
        s.run_cancellable(job, keep_going, sink)
    }
}

impl Session {
    /// Runs `job`, handing each event to `sink` as it is produced: ASR's text pieces, TTS's
    /// and S2S's text and audio. When `sink` returns false generation stops at the next step
    /// and the outcome says `cancelled` (its audio is what the sink accepted). A bad request
    /// fails before any event. S2S turns use the session's caches; ASR and TTS its backend
    /// only.
    ///
    /// This and [`Session::run_cancellable`], [`Session::prepare_turn`], [`Lfm2Audio::run`]
    /// and [`Lfm2Audio::run_cancellable`] are the engine's only task entry points.
    pub fn run(
        &mut self,
        job: &Job,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<Outcome, EngineError> {
        self.run_cancellable(job, &|| true, sink)
    }

    /// [`Session::run`] with the caller's cancel check: `keep_going` is asked before every
    /// event and before each stretch of work that hands over no event first (the ASR pass,
    /// each ASR piece), and a no stops the run as the sink's does. A cancel raised from
    /// another thread is so noticed between decode steps and before each piece, also in a
    /// piece that decodes no text; a sink alone is only asked when an event comes.
    pub fn run_cancellable(
        &mut self,
        job: &Job,
        keep_going: &dyn Fn() -> bool,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<Outcome, EngineError> {
        let mut g = Guarded {
            sink,
            keep_going,
            stopped: false,
            accepted_audio: 0,
        };
        let mut o = Outcome::new(job.task());
        match job {
            Job::Asr(j) => self.run_asr(j, &mut g, &mut o)?,
            Job::Tts(j) => {
                let r = self.tts_with(&j.text, &j.options, &mut |ev| g.offer(ev))?;
                o.text = r.text;
                o.audio = r.audio;
                o.steps = r.steps.len();
                o.prompt_positions = r.prompt_positions;
                o.ended = r.ended;
                o.timings = r.timings;
            }
            Job::S2s(req) => {
                let t = self.s2s_with(req, &mut |ev| g.offer(ev))?;
                o.text = t.reply.text;
                o.audio = t.reply.audio;
                o.artifact = t.artifact;
                o.steps = t.reply.steps.len();
                o.prompt_positions = t.reply.prompt_positions;
                o.resumed_prefill_positions = t.reply.resumed_prefill_steps;
                o.reused_questions = t.reused_questions;
                o.ended = t.reply.ended;
                o.timings = t.reply.timings;
            }
        }
        if g.stopped {
            o.cancelled = true;
            o.ended = false;
            o.audio.truncate(g.accepted_audio);
        }
        Ok(o)
    }

    fn run_asr(
        &mut self,
        j: &AsrJob,
        g: &mut Guarded<'_>,
        o: &mut Outcome,
    ) -> Result<(), EngineError> {
        let Some(seconds) = j.chunk_seconds else {
            if !g.keep_going() {
                return Ok(());
            }
            let samples = self.model().read_audio(&j.audio)?;
            o.input_seconds = samples.len() as f64 / f64::from(INPUT_SAMPLE_RATE);
            let r = self.asr_with(&samples, &j.options, &mut |t| {
                g.offer(ReplyEvent::Text(t.to_owned()))
            })?;
            o.text = r.text;
            o.steps = r.tokens.len();
            o.tokens = r.tokens;
            o.prompt_positions = r.prompt_positions;
            o.ended = Outcome::asr_ended(r.stop);
            o.add_asr_timings(&r.timings);
            return Ok(());
        };
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(EngineError::InvalidRequest(format!(
                "ASR chunks of {seconds} s: the length must be a positive number of seconds"
            )));
        }
        // why no limit: the one-pass limit is on what the encoder takes at once, and each
        // piece is one pass.
        let unlimited = ReadOptions {
            max_seconds: f64::INFINITY,
        };
        let samples = j.audio.samples_16k(&unlimited)?;
        o.input_seconds = samples.len() as f64 / f64::from(INPUT_SAMPLE_RATE);
        let per_piece = ((seconds * f64::from(INPUT_SAMPLE_RATE)).round() as usize).max(1);
        let mut texts = Vec::new();
        o.ended = true;
        for piece in samples.chunks(per_piece) {
            // why here too: a piece's encode and prefill hand over no event, and a piece may
            // decode no text at all, so a cancel would otherwise wait for the next text.
            if !g.keep_going() {
                break;
            }
            let r = self.asr_with(piece, &j.options, &mut |t| {
                g.offer(ReplyEvent::Text(t.to_owned()))
            })?;
            o.steps += r.tokens.len();
            o.tokens.extend_from_slice(&r.tokens);
            o.prompt_positions = r.prompt_positions;
            o.ended &= Outcome::asr_ended(r.stop);
            o.add_asr_timings(&r.timings);
            let t = r.text.trim();
            if !t.is_empty() {
                texts.push(t.to_owned());
            }
            if r.stop == StopReason::Stopped {
                break;
            }
        }
        o.text = texts.join(" ");
        Ok(())
    }
}
