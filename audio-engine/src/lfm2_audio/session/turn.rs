//! The speech-to-speech turn: a request checked, its questions encoded (reusing kept ones) and
//! its prompt built ([`Prepared`]), the reply generated through the session's prefill cache,
//! then the reply artifact made, prefill ahead started and the questions kept.

use std::time::Instant;

use crate::ggml::Backend;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::{
    check_max_new_tokens, KeptPrefill, ReplyEvent, ReplyOptions,
};
use crate::lfm2_audio::generation::reply::{ReplyRequest, ReplyResult};
use crate::lfm2_audio::generation::schedule::Schedule;
use crate::lfm2_audio::io::audio::ReadOptions;
use crate::lfm2_audio::limits::check_system_prompt;
use crate::lfm2_audio::text::prompt::Prompt;
use crate::lfm2_audio::text::tools::lists_tools;

use super::ahead::BackgroundWork;
use super::background::AheadInput;
use super::conversation::{
    check_artifacts, encode_reply, read_history, ChatMarkup, HistoryConfig, Question, ReplyFormat,
    Task, CONVERSATION_LIMIT, QUESTION_ID, REPLY_ID,
};
use super::questions::KeptQuestion;
use super::{S2sRequest, Session, TurnResult};
use crate::lfm2_audio::io::audio::AudioInput;

/// A request checked, its questions encoded and its prompt built: ready to generate.
pub(super) struct Prepared {
    req: ReplyRequest,
    chunked: bool,
    return_codes: bool,
    format: ReplyFormat,
    keep: Vec<KeptQuestion>,
    reused: usize,
    /// What prefilling the reply ahead needs (only when it will run).
    ahead: Option<AheadInput>,
    /// The new question and its encoder output.
    pub(super) question: KeptQuestion,
    /// The prefill-ahead work settled before this request.
    pub(super) background: Option<BackgroundWork>,
}

impl Prepared {
    /// What a turn started early keeps: the new question, and the prompt with its audio rows
    /// when the turn prefills through the prefill cache (`None` otherwise).
    pub(super) fn into_early(self) -> (KeptQuestion, Option<(Prompt, Vec<f32>)>) {
        let prompt = self.chunked.then_some((self.req.prompt, self.req.rows));
        (self.question, prompt)
    }
}

impl Session {
    /// Runs one turn offline.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn s2s(&mut self, request: &S2sRequest) -> Result<TurnResult, EngineError> {
        self.s2s_with(request, &mut |_| true)
    }

    /// Runs one turn, handing each event to `sink` as it is produced (return false to stop:
    /// the reply is then cut, `ended` false). A bad request fails before any event.
    pub(crate) fn s2s_with(
        &mut self,
        request: &S2sRequest,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<TurnResult, EngineError> {
        let background = self.settle_for(request);
        let backend = self.backend()?;
        let early = self.early_question.take();
        let mut p = self.prepare(&backend, request, early)?;
        p.background = background;
        self.run_prepared(&backend, p, sink)
    }

    /// Checks `request`, encodes its questions (the new one from `early` when that is the
    /// same audio) and builds its prompt.
    pub(super) fn prepare(
        &self,
        backend: &Backend,
        request: &S2sRequest,
        early: Option<KeptQuestion>,
    ) -> Result<Prepared, EngineError> {
        let started = Instant::now();
        let model = &self.model;
        let has_history = check_artifacts(Task::S2s, &request.history)?;
        check_system_prompt(&request.s2s.system_prompt)?;
        let return_codes = request.return_codes;
        check_max_new_tokens(request.s2s.max_new_tokens)?;
        let format = model.reply_format();
        let markup = ChatMarkup::new(model.tokenizer(), &request.s2s.system_prompt);
        let cfg = HistoryConfig {
            format: &format,
            markup: &markup,
            limit: CONVERSATION_LIMIT,
            wav: ReadOptions {
                max_seconds: model.options().max_audio_seconds,
            },
            tokenizer: model.tokenizer(),
        };
        let max_tokens = request.s2s.max_new_tokens;
        let mut history = read_history(&request.history, &cfg, max_tokens)?;

        // Encode every spoken question, earlier ones first (reusing kept outputs), the new one
        // always; a typed question takes its tokens' places instead.
        let mut keep = Vec::new();
        let mut reused = 0;
        let mut rows = Vec::new();
        let mut questions = Vec::new();
        for (i, turn) in history.turns.iter().enumerate() {
            let Question::Audio(samples) = &turn.question else {
                questions.push(turn.question.layout(0));
                history.budget.add_question(i, questions[i].steps())?;
                continue;
            };
            let (q, hit) = self.encode_question(backend, samples, &self.questions)?;
            reused += usize::from(hit);
            history.budget.add_question(i, q.rows)?;
            questions.push(turn.question.layout(q.rows));
            rows.extend_from_slice(&q.embeddings);
            keep.push(q);
        }
        let question = match (history.pending.take(), &request.question) {
            (Some(_), input) if !matches!(input, AudioInput::Wav(w) if w.is_empty()) => {
                return Err(EngineError::InvalidRequest(format!(
                    "turn {}'s {QUESTION_ID} has no {REPLY_ID} after it, and the request has a \
                     question of its own: send each earlier turn as its question then its \
                     reply, and the new question once",
                    history.turns.len() + 1
                )))
            }
            (Some(typed @ (Question::Text(_) | Question::Tool(_))), _) => {
                let layout = typed.layout(0);
                history
                    .budget
                    .add_question(history.turns.len(), layout.steps())?;
                questions.push(layout);
                KeptQuestion::none()
            }
            (Some(Question::Audio(samples)), _) => {
                let q = self.hear_question(backend, &AudioInput::mono_16k(samples), early)?;
                self.take_new_question(q, &mut history, &mut questions, &mut rows, &mut keep)?
            }
            (None, input) => {
                let q = self.hear_question(backend, input, early)?;
                self.take_new_question(q, &mut history, &mut questions, &mut rows, &mut keep)?
            }
        };
        let encode = started.elapsed();

        let prompt = markup.build_mixed(&format, history.replies(), &questions)?;
        history.budget.check_prompt(prompt.len())?;
        let (n_text, n_audio) = model.interleave();
        let ahead = (return_codes && self.options.prefill_ahead && self.options.prefill_slots > 0)
            .then(|| AheadInput {
                replies: history.replies().cloned().collect(),
                questions,
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
                    call_markers: lists_tools(&request.s2s.system_prompt),
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
            question,
            background: None,
        })
    }

    /// Adds the new spoken question `q` to a prepared prompt's parts.
    fn take_new_question(
        &self,
        q: KeptQuestion,
        history: &mut super::conversation::History,
        questions: &mut Vec<super::conversation::QuestionLayout>,
        rows: &mut Vec<f32>,
        keep: &mut Vec<KeptQuestion>,
    ) -> Result<KeptQuestion, EngineError> {
        history.budget.add_question(history.turns.len(), q.rows)?;
        questions.push(super::conversation::QuestionLayout::Audio { rows: q.rows });
        rows.extend_from_slice(&q.embeddings);
        keep.push(q.clone());
        Ok(q)
    }

    pub(super) fn finish_turn(
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
        self.keep_questions(p.keep);
        Ok(TurnResult {
            reply,
            artifact,
            reused_questions: p.reused,
            background: p.background,
        })
    }

    pub(super) fn run_prepared(
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
}
