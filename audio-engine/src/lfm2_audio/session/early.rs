//! Starting a turn early: [`Session::prepare_turn`] runs a turn's encoding and prefill before
//! the turn is asked for, so that when it is (the realtime route's speaker stayed silent after a
//! pause), the reply starts at once.

use crate::lfm2_audio::error::EngineError;

use super::{S2sRequest, Session};

impl Session {
    /// Starts the turn `request` before it is asked for: checks it, encodes its questions now
    /// and prefills its whole prompt, the last position's outputs included, on a worker thread
    /// (the prefill-ahead worker; a failure there only costs the head start). A later
    /// [`Session::run`] of the same request waits for that worker,
    /// takes the encoded question and finds every prompt block kept, so it starts generating
    /// at once; any other request stops the worker after its current block. Neither changes a
    /// byte of any turn: blocks are matched by content and the question by its samples, and
    /// the work is exactly what the turn's own prefill would run.
    ///
    /// A bad request fails here as it would in `run`. Without the prefill cache
    /// ([`SessionOptions::prefill_slots`](super::SessionOptions::prefill_slots) 0, or a first
    /// turn without `return_codes`) only the encoding is done early.
    pub fn prepare_turn(&mut self, request: &S2sRequest) -> Result<(), EngineError> {
        self.settle_for(request);
        let backend = self.backend()?;
        let early = self.early_question.take();
        let (question, prompt) = self.prepare(&backend, request, early)?.into_early();
        self.early_question = Some(question);
        if let Some((prompt, rows)) = prompt {
            if self.options.prefill_slots > 0 {
                self.start_turn_ahead(&backend, request, prompt, rows);
            }
        }
        Ok(())
    }
}
