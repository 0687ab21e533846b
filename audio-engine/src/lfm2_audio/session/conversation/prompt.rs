//! The prompt of a turn after earlier ones, as liquid-audio's `ChatState` holds a conversation:
//! the system prompt once, then per earlier turn its question's audio and its reply's steps as
//! generated, then the new question.
//!
//! `<|startoftext|><|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n` + q1 audio +
//! `<|im_end|>\n<|im_start|>assistant\n` + reply 1 + `<|im_end|>\n<|im_start|>user\n` + ... +
//! new question audio + `<|im_end|>\n<|im_start|>assistant\n` (the markup from the text layer's
//! `template`, the one copy of the chat template), each markup piece tokenized on its own as the
//! text layer's `PromptBuilder` does. A typed question's text takes the place of
//! its audio, tokenized on its own as `ChatState.add_text` does (`QuestionLayout`). A tool's
//! result is a turn of role `tool` after the reply that called it: the markup after that reply
//! opens `<|im_start|>tool\n` instead of the user's turn.

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::text::prompt::{Prompt, PromptPiece};
use crate::lfm2_audio::text::template::{Role, START, TURN_END};
use crate::lfm2_audio::text::tokenizer::Tokenizer;

use super::artifact::{Reply, ReplyFormat, ReplyStep};

/// How a question sits in a prompt: its audio rows (a spoken question, encoded), or its text's
/// token ids (a typed question, liquid-audio's `ChatState.add_text`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionLayout {
    /// `rows` audio positions.
    Audio {
        /// Encoder rows of the question.
        rows: usize,
    },
    /// The text's tokens.
    Text(Vec<u32>),
    /// A tool's result (its turn text's tokens), after a reply.
    Tool(Vec<u32>),
}

impl QuestionLayout {
    /// Prompt positions the question takes.
    pub fn steps(&self) -> usize {
        match self {
            QuestionLayout::Audio { rows } => *rows,
            QuestionLayout::Text(ids) | QuestionLayout::Tool(ids) => ids.len(),
        }
    }
}

fn audio_layouts(rows: &[usize]) -> Vec<QuestionLayout> {
    rows.iter()
        .map(|&rows| QuestionLayout::Audio { rows })
        .collect()
}

/// The chat markup of a checkpoint's tokenizer and system prompt, tokenized once: enough to
/// count a conversation's text steps before any question is encoded, and to build its prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMarkup {
    /// `<|startoftext|>`, `<|im_start|>system\n`, the system prompt, `<|im_end|>\n`,
    /// `<|im_start|>user\n`.
    head: Vec<Vec<u32>>,
    /// `<|im_end|>\n`, `<|im_start|>assistant\n`: after each question.
    to_assistant: Vec<Vec<u32>>,
    /// `<|im_end|>\n`, `<|im_start|>user\n`: after each earlier reply.
    to_user: Vec<Vec<u32>>,
    /// `<|im_end|>\n`, `<|im_start|>tool\n`: after a reply whose next turn is a tool's result.
    to_tool: Vec<Vec<u32>>,
}

fn steps_of(pieces: &[Vec<u32>]) -> usize {
    pieces.iter().map(Vec::len).sum()
}

impl ChatMarkup {
    /// Tokenizes the markup, each piece on its own with special tokens recognised.
    pub fn new(tok: &Tokenizer, system: &str) -> ChatMarkup {
        let enc = |s: &str| tok.encode(s, true);
        ChatMarkup {
            head: vec![
                enc(START),
                enc(&Role::System.open()),
                enc(system),
                enc(TURN_END),
                enc(&Role::User.open()),
            ],
            to_assistant: vec![enc(TURN_END), enc(&Role::Assistant.open())],
            to_user: vec![enc(TURN_END), enc(&Role::User.open())],
            to_tool: vec![enc(TURN_END), enc(&Role::Tool.open())],
        }
    }

    /// Markup steps of a prompt with `turns` earlier turns (replies and audio not counted): at
    /// least that many, as a turn's closing markup is the shorter of the user's and the tool's
    /// where the next turn's role is not known yet.
    pub fn markup_steps(&self, turns: usize) -> usize {
        let to_next = steps_of(&self.to_user).min(steps_of(&self.to_tool));
        let per_turn = steps_of(&self.to_assistant) + to_next;
        steps_of(&self.head)
            .saturating_add(per_turn.saturating_mul(turns))
            .saturating_add(steps_of(&self.to_assistant))
    }

    /// The prompt's steps other than the questions' audio: markup plus every reply step.
    pub fn text_steps<'a>(&self, replies: impl IntoIterator<Item = &'a Reply>) -> usize {
        let mut turns = 0usize;
        let mut steps = 0usize;
        for r in replies {
            turns += 1;
            steps = steps.saturating_add(r.len());
        }
        self.markup_steps(turns).saturating_add(steps)
    }

    /// Builds the prompt of a turn after `replies` (one per earlier turn, in order), with
    /// `question_rows[i]` audio positions for question `i`: the earlier ones, then the new one
    /// last (so one more than there are replies). A reply step that does not fit `fmt`, or a
    /// row count list of the wrong length, is an [`EngineError::Invariant`]: the session hands
    /// in replies it already read and rows it encoded.
    ///
    /// The prompt's chunks follow the turns: the head; the first question with its
    /// `<|im_end|>\n<|im_start|>assistant\n`; then per earlier reply its steps with the
    /// `<|im_end|>\n<|im_start|>user\n` after them; then the next question with its markup.
    pub fn build<'a>(
        &self,
        fmt: &ReplyFormat,
        replies: impl IntoIterator<Item = &'a Reply>,
        question_rows: &[usize],
    ) -> Result<Prompt, EngineError> {
        self.build_mixed(fmt, replies, &audio_layouts(question_rows))
    }

    /// [`ChatMarkup::build`] with spoken and typed questions: each question's audio rows or its
    /// text's tokens where liquid-audio's `ChatState` puts `add_audio` or `add_text`.
    pub fn build_mixed<'a>(
        &self,
        fmt: &ReplyFormat,
        replies: impl IntoIterator<Item = &'a Reply>,
        questions: &[QuestionLayout],
    ) -> Result<Prompt, EngineError> {
        let replies: Vec<&Reply> = replies.into_iter().collect();
        if questions.len() != replies.len() + 1 {
            return Err(EngineError::Invariant(format!(
                "chat prompt: {} question row counts for {} earlier turns (want one more)",
                questions.len(),
                replies.len()
            )));
        }
        self.lay_out(fmt, &replies, questions)
    }

    /// The conversation of `replies` and their questions up to the end of the last reply's
    /// closing markup, before any next question: the prompt a session prefills ahead of the
    /// next turn (whose [`ChatMarkup::build`] prompt starts with exactly these chunks).
    /// `question_rows` has one count per reply.
    pub fn build_through_reply<'a>(
        &self,
        fmt: &ReplyFormat,
        replies: impl IntoIterator<Item = &'a Reply>,
        question_rows: &[usize],
    ) -> Result<Prompt, EngineError> {
        self.build_through_reply_mixed(fmt, replies, &audio_layouts(question_rows))
    }

    /// [`ChatMarkup::build_through_reply`] with spoken and typed questions.
    pub fn build_through_reply_mixed<'a>(
        &self,
        fmt: &ReplyFormat,
        replies: impl IntoIterator<Item = &'a Reply>,
        questions: &[QuestionLayout],
    ) -> Result<Prompt, EngineError> {
        let replies: Vec<&Reply> = replies.into_iter().collect();
        if replies.is_empty() || questions.len() != replies.len() {
            return Err(EngineError::Invariant(format!(
                "chat prompt: {} question row counts for {} replies (want as many, at least one)",
                questions.len(),
                replies.len()
            )));
        }
        self.lay_out(fmt, &replies, questions)
    }

    /// Refuses a tool's result where no reply comes before it (the first question).
    fn check_roles(questions: &[QuestionLayout]) -> Result<(), EngineError> {
        if let Some(QuestionLayout::Tool(_)) = questions.first() {
            return Err(EngineError::Invariant(
                "chat prompt: a tool's result as the first turn".into(),
            ));
        }
        Ok(())
    }

    /// The head alone (`<|startoftext|>`, the system turn, `<|im_start|>user\n`): the first
    /// chunk of every prompt [`ChatMarkup::build`] makes, which a session prefills ahead before
    /// its first request.
    pub fn head_prompt(&self) -> Prompt {
        Prompt::from_chunks(vec![self.head_pieces()])
    }

    fn head_pieces(&self) -> Vec<PromptPiece> {
        self.head.iter().cloned().map(PromptPiece::Text).collect()
    }

    fn lay_out(
        &self,
        fmt: &ReplyFormat,
        replies: &[&Reply],
        questions: &[QuestionLayout],
    ) -> Result<Prompt, EngineError> {
        Self::check_roles(questions)?;
        let markup = |chunk: &mut Vec<PromptPiece>, markup: &[Vec<u32>]| {
            chunk.extend(markup.iter().cloned().map(PromptPiece::Text));
        };
        // why the head alone: it is the same in every conversation with this system prompt,
        // so its block is kept once and reused by every conversation's first turn (and a
        // session prefills it ahead: see `ChatMarkup::head_prompt`).
        let mut chunks: Vec<Vec<PromptPiece>> = vec![self.head_pieces()];
        let mut chunk: Vec<PromptPiece> = Vec::new();
        let mut first = 0usize;
        for (q, question) in questions.iter().enumerate() {
            match question {
                QuestionLayout::Audio { rows } => {
                    chunk.push(PromptPiece::Audio {
                        question: q,
                        first,
                        rows: *rows,
                    });
                    first = first.saturating_add(*rows);
                }
                QuestionLayout::Text(ids) | QuestionLayout::Tool(ids) => {
                    chunk.push(PromptPiece::Text(ids.clone()))
                }
            }
            markup(&mut chunk, &self.to_assistant);
            chunks.push(std::mem::take(&mut chunk));
            let Some(reply) = replies.get(q) else {
                break;
            };
            let mut run: Vec<u32> = Vec::new();
            for (i, step) in reply.steps.iter().enumerate() {
                fmt.check_step(step).map_err(|e| {
                    EngineError::Invariant(format!("chat prompt: turn {} step {i}: {e}", q + 1))
                })?;
                match step {
                    ReplyStep::Text(id) => run.push(*id),
                    ReplyStep::Frame(codes) => {
                        if !run.is_empty() {
                            chunk.push(PromptPiece::Text(std::mem::take(&mut run)));
                        }
                        chunk.push(PromptPiece::Frame(codes.clone()));
                    }
                }
            }
            if !run.is_empty() {
                chunk.push(PromptPiece::Text(run));
            }
            // why the next turn's role here: the markup that opens it ends this reply's chunk.
            let next = match questions.get(q + 1) {
                Some(QuestionLayout::Tool(_)) => &self.to_tool,
                _ => &self.to_user,
            };
            markup(&mut chunk, next);
            chunks.push(std::mem::take(&mut chunk));
        }
        Ok(Prompt::from_chunks(chunks))
    }
}
