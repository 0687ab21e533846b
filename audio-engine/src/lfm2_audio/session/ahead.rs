//! Prefill ahead: once a turn's reply is finished, the session prefills that reply and its
//! closing markup on a worker thread while the user listens and speaks, so the next turn's
//! prompt finds every earlier position in its [`PrefillCache`] and runs only its new question.
//!
//! The worker runs exactly the blocks the next turn's prefill would run for those positions
//! (the prompt of [`ChatMarkup::build_through_reply`](super::conversation::ChatMarkup::build_through_reply)
//! is the next prompt's leading chunks), so whether they were run ahead, by the next request or
//! by a fresh session, the bytes are the same.
//!
//! The worker owns the session's prefill cache while it runs and hands it back when joined. A
//! request that continues the conversation (its last history artifact is the reply being
//! prefilled) waits for the worker: it needs those blocks and would run them itself. Any other
//! call stops the worker after the block it is running (at most [`BLOCK_POSITIONS`] positions)
//! and keeps the blocks it finished.
//!
//! The same worker starts a turn early ([`Session::prepare_turn`](super::Session::prepare_turn)):
//! it runs the turn's whole prompt and keeps the last block with the last position's outputs,
//! exactly what the turn's own prefill would compute, so the turn finds every block kept and
//! starts generating at once. A request that is that turn waits for it; any other stops it.
//!
//! [`BLOCK_POSITIONS`]: crate::lfm2_audio::model::backbone::BLOCK_POSITIONS

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::ggml::Backend;
use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::io::audio::AudioInput;
use crate::lfm2_audio::text::prompt::Prompt;

use super::conversation::REPLY_ID;
use super::prefill_cache::PrefillCache;
use super::S2sRequest;

/// What prefilling ahead did between two turns (see [`Session::background_work`](super::Session::background_work)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BackgroundWork {
    /// Positions of the finished conversation that were already kept (restored, not run).
    pub restored_positions: usize,
    /// Positions prefilled ahead (the reply and its closing markup, or the part done).
    pub prefilled_positions: usize,
    /// Wall time the worker ran.
    pub elapsed: Duration,
    /// How long the call that settled it waited for it to finish or stop (time the caller
    /// spent on it; zero when it had finished).
    pub waited: Duration,
    /// Whether it was stopped before it finished (another request came first).
    pub stopped: bool,
    /// Why it failed, if it did (the next turn then runs those positions itself).
    pub failed: Option<String>,
}

/// What a prefill-ahead worker runs ahead of.
#[derive(Debug)]
pub(super) enum AheadOf {
    /// The default head a new session prefills: every conversation needs it.
    Head,
    /// The turn after a finished reply: the payload (the codes) of its artifact.
    Reply(Vec<u8>),
    /// A turn started early ([`Session::prepare_turn`](super::Session::prepare_turn)): its
    /// whole prompt, the last position's outputs included.
    Turn(TurnKey),
}

/// What tells a request apart from the one a turn was started early for: its earlier turns,
/// its question and its system prompt (the blocks are matched by content anyway, so a wrong
/// answer costs time, never bytes).
#[derive(Debug, PartialEq)]
pub(super) struct TurnKey {
    history: Vec<(String, Vec<u8>)>,
    question: AudioInput,
    system_prompt: String,
}

impl TurnKey {
    pub(super) fn of(request: &S2sRequest) -> TurnKey {
        TurnKey {
            history: request
                .history
                .iter()
                .map(|a| (a.id.clone(), a.payload.clone()))
                .collect(),
            question: request.question.clone(),
            system_prompt: request.s2s.system_prompt.clone(),
        }
    }

    fn is_of(&self, request: &S2sRequest) -> bool {
        self.question == request.question
            && self.system_prompt == request.s2s.system_prompt
            && self.history.len() == request.history.len()
            && self
                .history
                .iter()
                .zip(&request.history)
                .all(|((id, payload), a)| *id == a.id && *payload == a.payload)
    }
}

/// A prefill-ahead worker.
#[derive(Debug)]
pub(super) struct Ahead {
    stop: Arc<AtomicBool>,
    of: AheadOf,
    handle: JoinHandle<(PrefillCache, BackgroundWork)>,
}

impl Ahead {
    /// Starts prefilling `prompt` (audio rows from `rows`) into `cache` on a worker thread,
    /// ahead of what `of` says (a [`AheadOf::Turn`] keeps the last position's outputs too).
    /// If the thread cannot start, the error says so and the cache is dropped (reuse is lost,
    /// no output changes).
    pub(super) fn spawn(
        model: Lfm2Audio,
        backend: Backend,
        mut cache: PrefillCache,
        prompt: Prompt,
        rows: Vec<f32>,
        of: AheadOf,
    ) -> Result<Ahead, EngineError> {
        let with_outputs = matches!(of, AheadOf::Turn(_));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("lfm2-prefill-ahead".into())
            .spawn(move || {
                let started = Instant::now();
                let mut run = || -> Result<_, EngineError> {
                    let backbone = model.backbone();
                    let hidden = backbone.config().hidden_size as usize;
                    let positions = prompt.positions(&rows, hidden)?;
                    let mut decode = backbone.new_cache_on(&backend, prompt.len())?;
                    let stop = || flag.load(Ordering::Relaxed);
                    let blocks = prompt.blocks();
                    cache.extend(
                        backbone,
                        &mut decode,
                        &positions,
                        &blocks,
                        with_outputs,
                        &stop,
                    )
                };
                let work = match run() {
                    Ok(ext) => BackgroundWork {
                        restored_positions: ext.restored,
                        prefilled_positions: ext.ran,
                        elapsed: started.elapsed(),
                        stopped: ext.stopped,
                        failed: None,
                        waited: Duration::ZERO,
                    },
                    Err(e) => BackgroundWork {
                        elapsed: started.elapsed(),
                        failed: Some(e.chain()),
                        ..Default::default()
                    },
                };
                (cache, work)
            })
            .map_err(|e| {
                EngineError::Invariant(format!("could not start the prefill-ahead thread: {e}"))
            })?;
        Ok(Ahead { stop, of, handle })
    }

    /// Whether `request` needs what is being prefilled: for a reply, its history's last
    /// artifact is that reply (only the codes are compared: a protocol layer may re-spell the
    /// meta); for a turn started early, it is that turn. A false guess costs time, never bytes,
    /// since blocks are matched by content.
    pub(super) fn needed_by(&self, request: &S2sRequest) -> bool {
        match &self.of {
            AheadOf::Reply(reply) => request
                .history
                .last()
                .is_some_and(|a| a.id == REPLY_ID && &a.payload == reply),
            AheadOf::Turn(key) => key.is_of(request),
            // The head: a conversation's first turn needs it, and any other waits at most for
            // its one short block.
            AheadOf::Head => true,
        }
    }

    /// Joins the worker, first asking it to stop unless `wait`; gives back the prefill cache
    /// (`None` if the worker panicked: its blocks are lost) and the report.
    pub(super) fn finish(self, wait: bool) -> (Option<PrefillCache>, BackgroundWork) {
        if !wait {
            self.stop.store(true, Ordering::Relaxed);
        }
        match self.handle.join() {
            Ok((cache, work)) => (Some(cache), work),
            Err(_) => (
                None,
                BackgroundWork {
                    failed: Some("the prefill-ahead thread panicked".into()),
                    ..Default::default()
                },
            ),
        }
    }
}
