//! A speech-to-speech session: multi-turn conversations carried by the client, with the
//! session's two caches — prefill blocks of recent conversations ([`PrefillCache`]) and
//! encoder outputs of recent questions — neither of which changes a single output byte.
//!
//! A request carries its earlier turns as artifacts (`lfm2_audio.question` WAV bytes and the
//! `lfm2_audio.reply` each turn returned; see [`self::conversation`]). The session checks the
//! request, encodes the questions (reusing the encoder output of a question it kept whose
//! samples match byte for byte), builds the conversation prompt, prefills it in the blocks of
//! its turn-structured partition (restoring the blocks a kept conversation shares), generates
//! the reply and, with `return_codes`, returns the reply artifact for the next turn.
//!
//! With `return_codes` the session then prefills the finished reply and its closing markup on a
//! worker thread ([`self::ahead`], [`SessionOptions::prefill_ahead`]), so that the next turn
//! runs only its new question: every earlier position of its prompt is restored. The work is
//! reported by [`Session::background_work`] and [`TurnResult::background`].
//!
//! A session owns all of its compute state (as whisper-rs's `WhisperState` does): the backend
//! instance it computes on (its own threads, [`SessionOptions::n_threads`]), and per turn the
//! decode cache, depthformer scratch, detokenizer stream and graph allocators. The model is only
//! read, so sessions on one model run at the same time, each on its own thread.

pub mod ahead;
pub mod conversation;
pub mod prefill_cache;

use std::time::Instant;

use crate::ggml::{Backend, GraphAllocator};

use self::ahead::{Ahead, BackgroundWork};
use self::conversation::{
    check_artifacts, encode_reply, read_history, Artifact, ChatMarkup, HistoryConfig, Reply,
    ReplyFormat, Task, CONVERSATION_LIMIT,
};
use self::prefill_cache::PrefillCache;
use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::{EventStream, ReplyRequest, ReplyResult, ReplyStream};
use crate::lfm2_audio::generation::reply::{KeptPrefill, ReplyEvent, ReplyOptions};
use crate::lfm2_audio::generation::schedule::Schedule;
use crate::lfm2_audio::io::audio::{AudioInput, ReadOptions};
use crate::lfm2_audio::tasks::asr::{AsrOptions, AsrResult};
use crate::lfm2_audio::tasks::s2s::S2sOptions;
use crate::lfm2_audio::tasks::tts::TtsOptions;

/// Session settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOptions {
    /// Conversations whose prefill blocks are kept (least recently used dropped; 0 disables).
    pub prefill_slots: usize,
    /// Questions whose encoder output is kept (least recently used dropped; 0 disables).
    pub kept_questions: usize,
    /// CPU threads the session computes with (`None`: the model's
    /// [`ModelOptions::n_threads`](super::ModelOptions::n_threads)).
    pub n_threads: Option<usize>,
    /// After a turn that returns its reply artifact, prefill the reply on a worker thread for
    /// the next turn (see [`ahead`]; needs `prefill_slots` > 0).
    pub prefill_ahead: bool,
    /// When the session is created, prefill the head every conversation with the default S2S
    /// system prompt starts with (`<|startoftext|>`, the system turn, `<|im_start|>user\n`) on
    /// a worker thread, so that a conversation's first turn runs only its question (needs
    /// `prefill_slots` > 0). A first request that comes sooner waits for that one short block.
    pub prefill_head: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            prefill_slots: 4,
            kept_questions: 32,
            n_threads: None,
            prefill_ahead: true,
            prefill_head: true,
        }
    }
}

/// One speech-to-speech request.
#[derive(Debug, Clone, Default)]
pub struct S2sRequest {
    /// The new question: WAV bytes (any rate, any channel count) or PCM samples.
    pub question: AudioInput,
    /// Earlier turns, in order: per turn an `lfm2_audio.question` and its `lfm2_audio.reply`.
    pub history: Vec<Artifact>,
    /// Whether the result returns the reply artifact the next turn sends back as history.
    pub return_codes: bool,
    /// Generation settings.
    pub s2s: S2sOptions,
}

/// A finished turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnResult {
    /// Text, audio, steps, timings.
    pub reply: ReplyResult,
    /// The reply artifact, when the request asked for `return_codes`.
    pub artifact: Option<Artifact>,
    /// Earlier questions whose encoder output was reused.
    pub reused_questions: usize,
    /// What prefilling ahead did after the previous turn, settled when this request came
    /// (`None` when nothing ran).
    pub background: Option<BackgroundWork>,
}

/// Whether two questions are the same samples (size and bytes).
fn same_samples(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[derive(Debug, Clone)]
struct KeptQuestion {
    samples: Vec<f32>,
    rows: usize,
    embeddings: Vec<f32>,
}

/// A speech-to-speech session over one model (see the module docs).
#[derive(Debug)]
pub struct Session {
    model: Lfm2Audio,
    options: SessionOptions,
    /// The backend instance the session computes on (made on first use).
    backend: Option<Backend>,
    /// The encoder's graph allocator, kept between questions (made with the backend): its
    /// buffer, sized by the longest question encoded so far (about 4 MiB per second of audio
    /// at full size), stays mapped instead of being made again for every question.
    encoder_alloc: Option<GraphAllocator>,
    /// The prefill cache (taken by the prefill-ahead worker while it runs).
    prefill: PrefillCache,
    ahead: Option<Ahead>,
    /// The last prefill-ahead work that finished.
    background: Option<BackgroundWork>,
    /// Most recently used first.
    questions: Vec<KeptQuestion>,
    reused: usize,
    /// Positions the last turn's prefill restored.
    resumed: usize,
}

/// A request checked, its questions encoded and its prompt built: ready to generate.
struct Prepared {
    req: ReplyRequest,
    chunked: bool,
    return_codes: bool,
    format: ReplyFormat,
    keep: Vec<KeptQuestion>,
    reused: usize,
    /// What prefilling the reply ahead needs: the markup, the earlier replies, the questions'
    /// row counts and rows (only when it will run).
    ahead: Option<AheadInput>,
    /// The prefill-ahead work settled before this request.
    background: Option<BackgroundWork>,
}

struct AheadInput {
    markup: ChatMarkup,
    replies: Vec<Reply>,
    question_rows: Vec<usize>,
    rows: Vec<f32>,
}

impl Session {
    /// A session on `model`.
    pub fn new(model: Lfm2Audio, options: SessionOptions) -> Session {
        let mut session = Session {
            prefill: PrefillCache::new(options.prefill_slots),
            model,
            options,
            backend: None,
            encoder_alloc: None,
            ahead: None,
            background: None,
            questions: Vec::new(),
            reused: 0,
            resumed: 0,
        };
        if session.options.prefill_head && session.options.prefill_slots > 0 {
            session.start_head();
        }
        session
    }

    /// Prefills the default S2S head ahead (see [`SessionOptions::prefill_head`]). A failure
    /// only costs the reuse: it is reported as background work and the first turn runs the head.
    fn start_head(&mut self) {
        let started = self.backend().and_then(|backend| {
            let markup =
                ChatMarkup::new(self.model.tokenizer(), &S2sOptions::default().system_prompt);
            let cache = std::mem::take(&mut self.prefill);
            Ahead::spawn(
                self.model.clone(),
                backend,
                cache,
                markup.head_prompt(),
                Vec::new(),
                None,
            )
        });
        self.keep_ahead(started);
    }

    /// Keeps a started prefill-ahead worker; if it could not start, the (taken) prefill cache is
    /// lost and the failure is reported as background work: reuse is lost, no output changes.
    fn keep_ahead(&mut self, started: Result<Ahead, EngineError>) {
        match started {
            Ok(a) => self.ahead = Some(a),
            Err(e) => {
                self.prefill = PrefillCache::new(self.options.prefill_slots);
                self.background = Some(BackgroundWork {
                    failed: Some(e.chain()),
                    ..Default::default()
                });
            }
        }
    }

    /// The model.
    pub fn model(&self) -> &Lfm2Audio {
        &self.model
    }

    /// Positions the last request's prefill restored from kept blocks instead of running them.
    pub fn resumed_prefill_steps(&self) -> usize {
        self.resumed
    }

    /// Earlier questions of the last request whose encoder output was reused.
    pub fn reused_questions(&self) -> usize {
        self.reused
    }

    /// The last prefill-ahead work that finished (see [`ahead`]); work still running is not
    /// reported until a call settles it.
    pub fn background_work(&self) -> Option<&BackgroundWork> {
        self.background.as_ref()
    }

    /// Waits for prefill-ahead work still running to finish on its own (as a user who listens
    /// to the whole reply before speaking gives it time to) and returns the last finished
    /// work's report.
    pub fn wait_background(&mut self) -> Option<&BackgroundWork> {
        self.settle(true);
        self.background.as_ref()
    }

    /// Ends prefill-ahead work: waits for it when `wait`, otherwise stops it after its current
    /// block; takes the prefill cache back. Returns the work's report.
    fn settle(&mut self, wait: bool) -> Option<BackgroundWork> {
        let ahead = self.ahead.take()?;
        let started = Instant::now();
        let (cache, mut work) = ahead.finish(wait);
        work.waited = started.elapsed();
        self.prefill = cache.unwrap_or_else(|| PrefillCache::new(self.options.prefill_slots));
        self.background = Some(work.clone());
        Some(work)
    }

    /// Settles prefill-ahead work before a request: waits for it when the request continues
    /// the conversation being prefilled (it needs those blocks), stops it otherwise.
    fn settle_for(&mut self, history: &[Artifact]) -> Option<BackgroundWork> {
        let wait = self.ahead.as_ref().is_some_and(|a| a.continued_by(history));
        self.settle(wait)
    }

    /// The reply format of this model (what a reply artifact must fit).
    pub fn reply_format(&self) -> ReplyFormat {
        self.model.reply_format()
    }

    /// The session's backend instance, made on first use.
    fn backend(&mut self) -> Result<Backend, EngineError> {
        if let Some(b) = &self.backend {
            return Ok(b.clone());
        }
        let b = self.model.run_backend(self.options.n_threads)?;
        self.encoder_alloc = Some(GraphAllocator::new(&b)?);
        self.backend = Some(b.clone());
        Ok(b)
    }

    fn encode_question(
        &self,
        backend: &Backend,
        samples: &[f32],
        kept: &[KeptQuestion],
    ) -> Result<(KeptQuestion, bool), EngineError> {
        if let Some(k) = kept.iter().find(|k| same_samples(&k.samples, samples)) {
            return Ok((k.clone(), true));
        }
        let (rows, embeddings) =
            self.model
                .encode_audio_on(backend, self.encoder_alloc.as_ref(), samples)?;
        Ok((
            KeptQuestion {
                samples: samples.to_vec(),
                rows,
                embeddings,
            },
            false,
        ))
    }

    fn prepare(&self, backend: &Backend, request: &S2sRequest) -> Result<Prepared, EngineError> {
        let started = Instant::now();
        let model = &self.model;
        let has_history = check_artifacts(Task::S2s, &request.history)?;
        crate::lfm2_audio::limits::check_system_prompt(&request.s2s.system_prompt)?;
        let return_codes = request.return_codes;
        if request.s2s.max_new_tokens == 0 {
            return Err(EngineError::InvalidRequest(
                "max_new_tokens must be positive".into(),
            ));
        }
        let question = model.read_audio(&request.question)?;
        let format = model.reply_format();
        let markup = ChatMarkup::new(model.tokenizer(), &request.s2s.system_prompt);
        let cfg = HistoryConfig {
            format: &format,
            markup: &markup,
            limit: CONVERSATION_LIMIT,
            wav: ReadOptions {
                max_seconds: model.options().max_audio_seconds,
            },
        };
        let max_tokens = request.s2s.max_new_tokens;
        let mut history = read_history(&request.history, &cfg, max_tokens)?;

        // Encode every question, earlier ones first (reusing kept outputs), the new one always.
        let mut keep = Vec::new();
        let mut reused = 0;
        let mut rows = Vec::new();
        let mut question_rows = Vec::new();
        for (i, turn) in history.turns.iter().enumerate() {
            let (q, hit) = self.encode_question(backend, &turn.question, &self.questions)?;
            reused += usize::from(hit);
            history.budget.add_question(i, q.rows)?;
            question_rows.push(q.rows);
            rows.extend_from_slice(&q.embeddings);
            keep.push(q);
        }
        let (q, _) = self.encode_question(backend, &question, &[])?;
        history.budget.add_question(history.turns.len(), q.rows)?;
        question_rows.push(q.rows);
        rows.extend_from_slice(&q.embeddings);
        keep.push(q);
        let encode = started.elapsed();

        let prompt = markup.build(&format, history.replies(), &question_rows)?;
        history.budget.check_prompt(prompt.len())?;
        let (n_text, n_audio) = model.interleave();
        let ahead = (return_codes && self.options.prefill_ahead && self.options.prefill_slots > 0)
            .then(|| AheadInput {
                replies: history.replies().cloned().collect(),
                question_rows,
                rows: rows.clone(),
                markup,
            });
        Ok(Prepared {
            req: ReplyRequest {
                prompt,
                rows,
                schedule: Schedule::interleaved(model.schedule_tokens(), n_text, n_audio),
                opts: ReplyOptions {
                    max_new_tokens: max_tokens,
                    text: request.s2s.text,
                    audio: request.s2s.audio,
                },
                started,
                encode,
            },
            chunked: has_history || return_codes,
            return_codes,
            format,
            keep: if has_history || return_codes {
                keep
            } else {
                Vec::new()
            },
            reused,
            ahead,
            background: None,
        })
    }

    fn finish_turn(
        &mut self,
        backend: &Backend,
        p: Prepared,
        reply: ReplyResult,
    ) -> Result<TurnResult, EngineError> {
        let artifact = if p.return_codes {
            Some(encode_reply(&reply.steps, reply.ended, &p.format)?)
        } else {
            None
        };
        if let (Some(input), Some(art)) = (p.ahead, &artifact) {
            self.start_ahead(backend, input, &p.format, &reply, art.clone());
        }
        // Keep this request's questions, most recent first, without duplicates.
        for q in p.keep.into_iter().rev() {
            self.questions
                .retain(|k| !same_samples(&k.samples, &q.samples));
            self.questions.insert(0, q);
        }
        self.questions.truncate(self.options.kept_questions);
        Ok(TurnResult {
            reply,
            artifact,
            reused_questions: p.reused,
            background: p.background,
        })
    }

    /// Starts prefilling `reply` ahead of the next turn. A failure to build its prompt or to
    /// start the worker is recorded as the background work's failure: it only costs reuse.
    fn start_ahead(
        &mut self,
        backend: &Backend,
        input: AheadInput,
        format: &ReplyFormat,
        reply: &ReplyResult,
        artifact: Artifact,
    ) {
        if reply.steps.is_empty() {
            return;
        }
        let this = Reply {
            steps: reply.steps.clone(),
            ended: reply.ended,
        };
        let prompt = match input.markup.build_through_reply(
            format,
            input.replies.iter().chain([&this]),
            &input.question_rows,
        ) {
            Ok(p) => p,
            Err(e) => {
                self.background = Some(BackgroundWork {
                    failed: Some(e.chain()),
                    ..Default::default()
                });
                return;
            }
        };
        let cache = std::mem::take(&mut self.prefill);
        let started = Ahead::spawn(
            self.model.clone(),
            backend.clone(),
            cache,
            prompt,
            input.rows,
            Some(artifact),
        );
        self.keep_ahead(started);
    }

    /// The audio-in embeddings of 16 kHz mono samples (as [`Lfm2Audio::encode_audio`]), on the
    /// session's backend and in its kept encoder buffer; the kept questions are neither used
    /// nor changed.
    pub fn encode_audio(&mut self, samples: &[f32]) -> Result<(usize, Vec<f32>), EngineError> {
        self.settle(false);
        let backend = self.backend()?;
        self.model
            .encode_audio_on(&backend, self.encoder_alloc.as_ref(), samples)
    }

    /// Transcribes 16 kHz mono samples on the session's backend (as [`Lfm2Audio::asr`]; the
    /// conversation caches are not involved).
    pub fn asr(&mut self, samples: &[f32], opts: &AsrOptions) -> Result<AsrResult, EngineError> {
        self.settle(false);
        let backend = self.backend()?;
        self.model.asr_on(&backend, samples, opts)
    }

    /// [`Session::asr`], handing each piece of text to `sink` (see [`Lfm2Audio::asr_with`]).
    pub fn asr_with(
        &mut self,
        samples: &[f32],
        opts: &AsrOptions,
        sink: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AsrResult, EngineError> {
        self.settle(false);
        let backend = self.backend()?;
        self.model.asr_on_with(&backend, samples, opts, sink)
    }

    /// Speaks `text` on the session's backend (as [`Lfm2Audio::tts`]; the conversation caches
    /// are not involved).
    pub fn tts(&mut self, text: &str, opts: &TtsOptions) -> Result<ReplyResult, EngineError> {
        self.tts_with(text, opts, &mut |_| true)
    }

    /// [`Session::tts`], handing each event to `sink` as it is produced (return false to stop:
    /// the result then holds what was produced so far, `ended` false).
    pub fn tts_with(
        &mut self,
        text: &str,
        opts: &TtsOptions,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<ReplyResult, EngineError> {
        self.settle(false);
        let backend = self.backend()?;
        self.model.tts_on(&backend, text, opts, sink)
    }

    /// Runs one turn offline.
    pub fn s2s(&mut self, request: &S2sRequest) -> Result<TurnResult, EngineError> {
        self.s2s_with(request, &mut |_| true)
    }

    /// Runs one turn, handing each event to `sink` as it is produced (return false to stop:
    /// the reply is then cut, `ended` false). A bad request fails before any event.
    pub fn s2s_with(
        &mut self,
        request: &S2sRequest,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<TurnResult, EngineError> {
        let background = self.settle_for(&request.history);
        let backend = self.backend()?;
        let mut p = self.prepare(&backend, request)?;
        p.background = background;
        self.run_prepared(&backend, p, sink)
    }

    fn run_prepared(
        &mut self,
        backend: &Backend,
        mut p: Prepared,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<TurnResult, EngineError> {
        self.reused = p.reused;
        let req = ReplyRequest {
            prompt: std::mem::take(&mut p.req.prompt),
            rows: std::mem::take(&mut p.req.rows),
            schedule: p.req.schedule.clone(),
            opts: p.req.opts,
            started: p.req.started,
            encode: p.req.encode,
        };
        let cache: Option<&mut dyn KeptPrefill> = if p.chunked {
            Some(&mut self.prefill)
        } else {
            None
        };
        let reply = self.model.run_reply(backend, req, cache, sink)?;
        self.resumed = reply.resumed_prefill_steps;
        self.finish_turn(backend, p, reply)
    }

    /// Streams one turn: the request is checked and its questions encoded now (a bad request
    /// fails here, before any audio), then the session moves onto a worker thread that
    /// generates the reply; [`TurnStream::finish`] / [`TurnStream::wait`] give it back with
    /// the turn's result (reply artifact included with `return_codes`). A rejected request
    /// returns the session with the error.
    pub fn s2s_stream(
        self,
        request: &S2sRequest,
    ) -> Result<TurnStream, Box<(Session, EngineError)>> {
        let mut session = self;
        let background = session.settle_for(&request.history);
        let backend = match session.backend() {
            Ok(b) => b,
            Err(e) => return Err(Box::new((session, e))),
        };
        let mut p = match session.prepare(&backend, request) {
            Ok(p) => p,
            Err(e) => return Err(Box::new((session, e))),
        };
        p.background = background;
        Ok(TurnStream {
            inner: EventStream::spawn(move |sink| {
                let r = session.run_prepared(&backend, p, sink);
                (session, r)
            }),
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // why: the worker computes on this session's backend; stop it after its current block
        // rather than leave it running for a session that is gone.
        self.settle(false);
    }
}

/// A turn being generated by a session on a worker thread (see [`Session::s2s_stream`]).
pub struct TurnStream {
    inner: EventStream<(Session, Result<TurnResult, EngineError>)>,
}

impl std::fmt::Debug for TurnStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnStream").finish_non_exhaustive()
    }
}

impl TurnStream {
    /// The next event, waiting for it; `None` once the reply is over.
    pub fn next_event(&mut self) -> Option<ReplyEvent> {
        self.inner.next_event()
    }

    /// Stops generation if it still runs (the reply is then cut, `ended` false) and returns
    /// the session with the turn's result. `Err` only if the worker thread panicked (the
    /// session is then lost).
    pub fn finish(self) -> Result<(Session, Result<TurnResult, EngineError>), EngineError> {
        self.inner.finish()
    }

    /// Waits for the reply to end on its own; returns the session with the turn's result.
    pub fn wait(self) -> Result<(Session, Result<TurnResult, EngineError>), EngineError> {
        self.inner.wait()
    }
}

impl Lfm2Audio {
    /// A streamed single-turn reply through a throwaway session (see [`Session::s2s_with`] for
    /// multi-turn streaming).
    pub fn s2s_request_stream(&self, request: S2sRequest) -> ReplyStream {
        let model = self.clone();
        ReplyStream::spawn(move |sink| {
            let mut s = Session::new(model, SessionOptions::default());
            s.s2s_with(&request, sink).map(|t| t.reply)
        })
    }
}
