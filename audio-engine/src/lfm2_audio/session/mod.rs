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
//!
//! Here the session's state and options; the turn in `turn.rs`, the streamed turn in
//! `stream.rs`, encoder-output reuse in `questions.rs`, starting and settling prefill ahead in
//! `background.rs` (its worker in [`ahead`], the blocks it fills in [`prefill_cache`]), and
//! ASR, TTS and encoding on the session's backend in `one_shot.rs`.

pub mod ahead;
mod background;
pub mod conversation;
mod early;
mod one_shot;
pub mod prefill_cache;
mod questions;
mod stream;
mod turn;

use crate::ggml::{Backend, GraphAllocator};

use self::ahead::{Ahead, BackgroundWork};
use self::conversation::{Artifact, ReplyFormat};
use self::prefill_cache::PrefillCache;
use self::questions::KeptQuestion;
use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::ReplyResult;
use crate::lfm2_audio::io::audio::AudioInput;
use crate::lfm2_audio::tasks::s2s::S2sOptions;

pub use self::stream::TurnStream;

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
    /// the next turn (see [`BackgroundWork`](crate::lfm2_audio::BackgroundWork); needs `prefill_slots` > 0).
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
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// The question of the turn started early ([`Session::prepare_turn`]), for that turn.
    early_question: Option<KeptQuestion>,
    reused: usize,
    /// Positions the last turn's prefill restored.
    resumed: usize,
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
            early_question: None,
            reused: 0,
            resumed: 0,
        };
        if session.options.prefill_head && session.options.prefill_slots > 0 {
            session.start_head();
        }
        session
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

    /// The last prefill-ahead work that finished (see [`BackgroundWork`](crate::lfm2_audio::BackgroundWork)); work still running is not
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
        self.encoder_alloc = Some(GraphAllocator::labelled(&b, "encoder")?);
        self.backend = Some(b.clone());
        Ok(b)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // why: the worker computes on this session's backend; stop it after its current block
        // rather than leave it running for a session that is gone.
        self.settle(false);
    }
}
