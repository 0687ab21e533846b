//! The prompt of a turn after earlier ones, as liquid-audio's `ChatState` holds a conversation:
//! the system prompt once, then per earlier turn its question's audio and its reply's steps as
//! generated, then the new question.
//!
//! `<|startoftext|><|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n` + q1 audio +
//! `<|im_end|>\n<|im_start|>assistant\n` + reply 1 + `<|im_end|>\n<|im_start|>user\n` + ... +
//! new question audio + `<|im_end|>\n<|im_start|>assistant\n`, each markup piece tokenized on
//! its own as [`PromptBuilder`](crate::lfm2_audio::prompt::PromptBuilder) does.

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::prompt::PromptPiece;
use crate::lfm2_audio::tokenizer::Tokenizer;

use super::artifact::{Reply, ReplyFormat, ReplyStep};

/// One stretch of a conversation prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatPiece {
    /// Text token ids: markup, or a run of a reply's text steps.
    Text(Vec<u32>),
    /// A question's audio-in positions.
    Audio {
        /// Which question: 0 for the first earlier turn's, the last for the new one.
        question: usize,
        /// First adapter row, counting the rows of all questions before this one.
        first: usize,
        /// Number of rows (positions).
        rows: usize,
    },
    /// A reply's frame, fed back as the sum of its codes' embeddings.
    Frame(Vec<u32>),
}

impl ChatPiece {
    /// Positions the piece takes.
    pub fn len(&self) -> usize {
        match self {
            ChatPiece::Text(ids) => ids.len(),
            ChatPiece::Audio { rows, .. } => *rows,
            ChatPiece::Frame(_) => 1,
        }
    }

    /// Whether the piece takes no position.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A conversation prompt, piece by piece.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatPrompt {
    pieces: Vec<ChatPiece>,
}

impl ChatPrompt {
    /// The pieces in order.
    pub fn pieces(&self) -> &[ChatPiece] {
        &self.pieces
    }

    /// Consumes the prompt into its pieces.
    pub fn into_pieces(self) -> Vec<ChatPiece> {
        self.pieces
    }

    /// Total positions.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(ChatPiece::len).sum()
    }

    /// Whether the prompt has no position.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Positions other than the questions' audio (markup and reply steps).
    pub fn text_steps(&self) -> usize {
        self.pieces
            .iter()
            .filter(|p| !matches!(p, ChatPiece::Audio { .. }))
            .map(ChatPiece::len)
            .sum()
    }

    /// Total audio-in rows (of all questions).
    pub fn audio_rows(&self) -> usize {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                ChatPiece::Audio { rows, .. } => Some(*rows),
                _ => None,
            })
            .sum()
    }

    /// Each frame's position and codes, in increasing position.
    pub fn frames(&self) -> Vec<(usize, &[u32])> {
        let mut out = Vec::new();
        let mut pos = 0;
        for p in &self.pieces {
            if let ChatPiece::Frame(codes) = p {
                out.push((pos, codes.as_slice()));
            }
            pos += p.len();
        }
        out
    }

    /// The prompt as a [`PromptPiece`] list (audio rows counted across all questions), when it
    /// holds no frame; `None` otherwise, as a `PromptPiece` cannot hold one.
    pub fn to_prompt_pieces(&self) -> Option<Vec<PromptPiece>> {
        self.pieces
            .iter()
            .map(|p| match p {
                ChatPiece::Text(ids) => Some(PromptPiece::Text(ids.clone())),
                ChatPiece::Audio { first, rows, .. } => Some(PromptPiece::Audio {
                    first: *first,
                    n: *rows,
                }),
                ChatPiece::Frame(_) => None,
            })
            .collect()
    }
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
                enc("<|startoftext|>"),
                enc("<|im_start|>system\n"),
                enc(system),
                enc("<|im_end|>\n"),
                enc("<|im_start|>user\n"),
            ],
            to_assistant: vec![enc("<|im_end|>\n"), enc("<|im_start|>assistant\n")],
            to_user: vec![enc("<|im_end|>\n"), enc("<|im_start|>user\n")],
        }
    }

    /// Markup steps of a prompt with `turns` earlier turns (replies and audio not counted).
    pub fn markup_steps(&self, turns: usize) -> usize {
        let per_turn = steps_of(&self.to_assistant) + steps_of(&self.to_user);
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
    /// row count list of the wrong length, is an [`EngineError::Internal`]: the session hands
    /// in replies it already read and rows it encoded.
    pub fn build<'a>(
        &self,
        fmt: &ReplyFormat,
        replies: impl IntoIterator<Item = &'a Reply>,
        question_rows: &[usize],
    ) -> Result<ChatPrompt, EngineError> {
        let replies: Vec<&Reply> = replies.into_iter().collect();
        if question_rows.len() != replies.len() + 1 {
            return Err(EngineError::Internal(format!(
                "chat prompt: {} question row counts for {} earlier turns (want one more)",
                question_rows.len(),
                replies.len()
            )));
        }
        let mut pieces: Vec<ChatPiece> = Vec::new();
        let text = |pieces: &mut Vec<ChatPiece>, markup: &[Vec<u32>]| {
            pieces.extend(markup.iter().cloned().map(ChatPiece::Text));
        };
        text(&mut pieces, &self.head);
        let mut first = 0usize;
        for (q, &rows) in question_rows.iter().enumerate() {
            pieces.push(ChatPiece::Audio {
                question: q,
                first,
                rows,
            });
            first = first.saturating_add(rows);
            text(&mut pieces, &self.to_assistant);
            let Some(reply) = replies.get(q) else {
                break;
            };
            let mut run: Vec<u32> = Vec::new();
            for (i, step) in reply.steps.iter().enumerate() {
                fmt.check_step(step).map_err(|e| {
                    EngineError::Internal(format!("chat prompt: turn {} step {i}: {e}", q + 1))
                })?;
                match step {
                    ReplyStep::Text(id) => run.push(*id),
                    ReplyStep::Frame(codes) => {
                        if !run.is_empty() {
                            pieces.push(ChatPiece::Text(std::mem::take(&mut run)));
                        }
                        pieces.push(ChatPiece::Frame(codes.clone()));
                    }
                }
            }
            if !run.is_empty() {
                pieces.push(ChatPiece::Text(run));
            }
            text(&mut pieces, &self.to_user);
        }
        Ok(ChatPrompt { pieces })
    }
}
