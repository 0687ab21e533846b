//! Prefill ahead, as the session drives it: starting the worker ([`super::ahead`]) on the
//! default head or a finished reply, and settling it before the next request (waiting when that
//! request continues the conversation being prefilled, stopping it otherwise).

use std::time::Instant;

use crate::ggml::Backend;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::ReplyResult;
use crate::lfm2_audio::tasks::s2s::S2sOptions;
use crate::lfm2_audio::text::prompt::Prompt;

use super::ahead::{Ahead, AheadOf, BackgroundWork, TurnKey};
use super::conversation::{Artifact, ChatMarkup, QuestionLayout, Reply, ReplyFormat};
use super::prefill_cache::PrefillCache;
use super::{S2sRequest, Session};

/// What prefilling a reply ahead needs: the markup, the earlier replies, the questions' row
/// counts and rows.
pub(super) struct AheadInput {
    pub(super) markup: ChatMarkup,
    pub(super) replies: Vec<Reply>,
    pub(super) questions: Vec<QuestionLayout>,
    pub(super) rows: Vec<f32>,
}

impl Session {
    /// Prefills the default S2S head ahead (see [`SessionOptions::prefill_head`]). A failure
    /// only costs the reuse: it is reported as background work and the first turn runs the head.
    pub(super) fn start_head(&mut self) {
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
                AheadOf::Head,
            )
        });
        self.keep_ahead(started);
    }

    /// Starts prefilling `prompt` (audio rows `rows`), the whole prompt of the turn `request`
    /// with its last position's outputs, ahead of that turn.
    pub(super) fn start_turn_ahead(
        &mut self,
        backend: &Backend,
        request: &S2sRequest,
        prompt: Prompt,
        rows: Vec<f32>,
    ) {
        let cache = std::mem::take(&mut self.prefill);
        let started = Ahead::spawn(
            self.model.clone(),
            backend.clone(),
            cache,
            prompt,
            rows,
            AheadOf::Turn(TurnKey::of(request)),
        );
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

    /// Ends prefill-ahead work: waits for it when `wait`, otherwise stops it after its current
    /// block; takes the prefill cache back. Returns the work's report.
    pub(super) fn settle(&mut self, wait: bool) -> Option<BackgroundWork> {
        let ahead = self.ahead.take()?;
        let started = Instant::now();
        let (cache, mut work) = ahead.finish(wait);
        work.waited = started.elapsed();
        self.prefill = cache.unwrap_or_else(|| PrefillCache::new(self.options.prefill_slots));
        self.background = Some(work.clone());
        Some(work)
    }

    /// Settles prefill-ahead work before a request: waits for it when the request needs it
    /// (it continues the conversation being prefilled, or it is the turn started early), stops
    /// it otherwise.
    pub(super) fn settle_for(&mut self, request: &S2sRequest) -> Option<BackgroundWork> {
        let wait = self.ahead.as_ref().is_some_and(|a| a.needed_by(request));
        self.settle(wait)
    }

    /// Starts prefilling `reply` ahead of the next turn. A failure to build its prompt or to
    /// start the worker is recorded as the background work's failure: it only costs reuse.
    pub(super) fn start_ahead(
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
        let prompt = match input.markup.build_through_reply_mixed(
            format,
            input.replies.iter().chain([&this]),
            &input.questions,
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
            AheadOf::Reply(artifact.payload),
        );
        self.keep_ahead(started);
    }
}
