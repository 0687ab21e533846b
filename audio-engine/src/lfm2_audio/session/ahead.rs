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
//! [`BLOCK_POSITIONS`]: crate::lfm2_audio::model::backbone::BLOCK_POSITIONS

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::ggml::Backend;
use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::text::prompt::Prompt;

use super::conversation::{Artifact, REPLY_ID};
use super::prefill_cache::PrefillCache;

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

/// A prefill-ahead worker.
#[derive(Debug)]
pub(super) struct Ahead {
    stop: Arc<AtomicBool>,
    /// The payload (the codes) of the reply artifact whose positions it prefills; `None` for
    /// the head a new session prefills (every conversation needs it).
    reply: Option<Vec<u8>>,
    handle: JoinHandle<(PrefillCache, BackgroundWork)>,
}

impl Ahead {
    /// Starts prefilling `prompt` (audio rows from `rows`) into `cache` on a worker thread,
    /// ahead of the turn after the reply artifact `reply` (`None`: ahead of any turn).
    /// If the thread cannot start, the error says so and the cache is dropped (reuse is lost,
    /// no output changes).
    pub(super) fn spawn(
        model: Lfm2Audio,
        backend: Backend,
        mut cache: PrefillCache,
        prompt: Prompt,
        rows: Vec<f32>,
        reply: Option<Artifact>,
    ) -> Result<Ahead, EngineError> {
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
                    cache.extend(backbone, &mut decode, &positions, &prompt.blocks(), &|| {
                        flag.load(Ordering::Relaxed)
                    })
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
        Ok(Ahead {
            stop,
            reply: reply.map(|r| r.payload),
            handle,
        })
    }

    /// Whether a request with `history` continues the conversation being prefilled: its last
    /// artifact is that reply. (Only the codes are compared: a protocol layer may re-spell the
    /// meta; a false guess costs time, never bytes, since blocks are matched by content.)
    pub(super) fn continued_by(&self, history: &[Artifact]) -> bool {
        match &self.reply {
            Some(reply) => history
                .last()
                .is_some_and(|a| a.id == REPLY_ID && &a.payload == reply),
            // The head: a conversation's first turn needs it, and any other waits at most for
            // its one short block.
            None => true,
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
