//! Chat prompts as liquid-audio's `ChatState` builds them: each piece tokenized on its own
//! (so token boundaries never cross a piece), audio-in positions in between; the [`Prompt`] type
//! every task hands to generation.
//!
//! A prompt is also split into *chunks* by its turn structure (a single request's prompt is one
//! chunk; a conversation's has one per question and one per earlier reply), and
//! [`Prompt::blocks`] splits each chunk into prefill blocks from its start. That partition is
//! what the prefill runs, cached or not: since it depends only on the turn structure, the blocks
//! of a conversation's earlier turns are the same blocks in every later turn's prompt, so a
//! session can restore them instead of running them without changing a bit.

use std::ops::Range;

use super::template::{Role, START, TURN_END};
use super::tokenizer::Tokenizer;
use crate::lfm2_audio::model::backbone::{Position, BLOCK_POSITIONS};

/// ASR system prompt.
pub const SYSTEM_ASR: &str = "Perform ASR.";
/// Speech-to-speech system prompt.
pub const SYSTEM_S2S: &str = "Respond with interleaved text and audio.";

/// A prompt's audio piece names rows that the request's encoded audio does not have: the prompt
/// and the rows were made for different requests, a bug of the caller (the engine's error
/// reports it as an invariant that does not hold).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the prompt needs audio rows {first}..{end}, the request has {have}")]
pub struct MissingAudioRows {
    /// The first row the piece needs.
    pub first: usize,
    /// One past the last row it needs.
    pub end: usize,
    /// The rows the request has.
    pub have: usize,
}

/// One stretch of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptPiece {
    /// Text token ids: markup, a text to speak, or a run of an earlier reply's text steps.
    Text(Vec<u32>),
    /// A question's audio-in positions: rows of the adapter output, taken from the request's
    /// encoded audio (all questions' rows one after the other).
    Audio {
        /// Which question: 0 for the first, counting the audio pieces before this one.
        question: usize,
        /// First adapter row, counting the rows of all questions before this one.
        first: usize,
        /// Number of rows (positions).
        rows: usize,
    },
    /// An earlier reply's frame, fed back as the sum of its codes' embeddings.
    Frame(Vec<u32>),
}

impl PromptPiece {
    /// Positions the piece takes.
    pub fn len(&self) -> usize {
        match self {
            PromptPiece::Text(ids) => ids.len(),
            PromptPiece::Audio { rows, .. } => *rows,
            PromptPiece::Frame(_) => 1,
        }
    }

    /// Whether the piece takes no position.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The prompt of one request, the one type every task builds ([`PromptBuilder`] for single
/// requests, [`ChatMarkup::build`](crate::lfm2_audio::session::conversation::ChatMarkup::build) for a conversation)
/// and [`Prompt::positions`] lowers to backbone positions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prompt {
    pieces: Vec<PromptPiece>,
    /// First position of each chunk, increasing, the first 0 (empty for an empty prompt).
    chunk_starts: Vec<usize>,
}

impl Prompt {
    /// A prompt of `pieces`, in order, as one chunk.
    pub fn from_pieces(pieces: Vec<PromptPiece>) -> Prompt {
        Prompt::from_chunks(vec![pieces])
    }

    /// A prompt of `chunks` of pieces, in order (chunks without positions are dropped).
    pub fn from_chunks(chunks: Vec<Vec<PromptPiece>>) -> Prompt {
        let mut pieces = Vec::new();
        let mut chunk_starts = Vec::new();
        let mut pos = 0;
        for chunk in chunks {
            let n: usize = chunk.iter().map(PromptPiece::len).sum();
            if n == 0 {
                continue;
            }
            chunk_starts.push(pos);
            pos += n;
            pieces.extend(chunk);
        }
        Prompt {
            pieces,
            chunk_starts,
        }
    }

    /// First position of each chunk.
    pub fn chunk_starts(&self) -> &[usize] {
        &self.chunk_starts
    }

    /// The prefill partition: each chunk split into blocks of at most [`BLOCK_POSITIONS`]
    /// positions from its start, in order, covering every position once.
    pub fn blocks(&self) -> Vec<Range<usize>> {
        let len = self.len();
        let mut out = Vec::new();
        for (i, &start) in self.chunk_starts.iter().enumerate() {
            let end = self.chunk_starts.get(i + 1).copied().unwrap_or(len);
            let mut s = start;
            while s < end {
                let e = (s + BLOCK_POSITIONS).min(end);
                out.push(s..e);
                s = e;
            }
        }
        out
    }

    /// The pieces in order.
    pub fn pieces(&self) -> &[PromptPiece] {
        &self.pieces
    }

    /// Total positions.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(PromptPiece::len).sum()
    }

    /// Whether the prompt has no position.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Positions other than the questions' audio (text and frames).
    pub fn text_steps(&self) -> usize {
        self.len() - self.audio_rows()
    }

    /// Total audio-in rows (of all questions).
    pub fn audio_rows(&self) -> usize {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                PromptPiece::Audio { rows, .. } => Some(*rows),
                _ => None,
            })
            .sum()
    }

    /// Each frame's position and codes, in increasing position.
    pub fn frames(&self) -> Vec<(usize, &[u32])> {
        let mut out = Vec::new();
        let mut pos = 0;
        for p in &self.pieces {
            if let PromptPiece::Frame(codes) = p {
                out.push((pos, codes.as_slice()));
            }
            pos += p.len();
        }
        out
    }

    /// The backbone positions of the prompt, audio pieces taking their rows from `rows` (the
    /// request's adapter output, `hidden` values per row). The only place a prompt becomes
    /// positions.
    pub fn positions<'a>(
        &'a self,
        rows: &'a [f32],
        hidden: usize,
    ) -> Result<Vec<Position<'a>>, MissingAudioRows> {
        let mut out = Vec::with_capacity(self.len());
        for piece in &self.pieces {
            match piece {
                PromptPiece::Text(ids) => out.extend(ids.iter().map(|&t| Position::Text(t))),
                PromptPiece::Audio { first, rows: n, .. } => {
                    let need = (first + n) * hidden;
                    let block = rows
                        .get(first * hidden..need)
                        .ok_or_else(|| MissingAudioRows {
                            first: *first,
                            end: first + n,
                            have: rows.len() / hidden.max(1),
                        })?;
                    out.extend(block.chunks_exact(hidden).map(Position::Audio));
                }
                PromptPiece::Frame(codes) => out.push(Position::Frame(codes)),
            }
        }
        Ok(out)
    }
}

/// Builds a prompt piece by piece.
#[derive(Debug, Clone)]
pub struct PromptBuilder<'t> {
    tok: &'t Tokenizer,
    pieces: Vec<PromptPiece>,
    audio_rows: usize,
    questions: usize,
}

impl<'t> PromptBuilder<'t> {
    /// A prompt starting with the template's `<|startoftext|>`.
    pub fn new(tok: &'t Tokenizer) -> PromptBuilder<'t> {
        let mut b = PromptBuilder {
            tok,
            pieces: Vec::new(),
            audio_rows: 0,
            questions: 0,
        };
        b.text(START);
        b
    }

    /// Appends `text`, tokenized alone with special tokens recognised.
    pub fn text(&mut self, text: &str) -> &mut Self {
        let ids = self.tok.encode(text, true);
        self.pieces.push(PromptPiece::Text(ids));
        self
    }

    /// Opens a turn of `role` (`<|im_start|>{role}\n`).
    pub fn new_turn(&mut self, role: Role) -> &mut Self {
        self.text(&role.open())
    }

    /// Ends the turn (`<|im_end|>\n`).
    pub fn end_turn(&mut self) -> &mut Self {
        self.text(TURN_END)
    }

    /// Ends the user's turn and opens the assistant's, where the reply starts.
    pub fn assistant_turn(&mut self) -> &mut Self {
        self.end_turn().new_turn(Role::Assistant)
    }

    /// `n` audio-in positions (the next `n` adapter rows).
    pub fn audio(&mut self, n: usize) -> &mut Self {
        self.pieces.push(PromptPiece::Audio {
            question: self.questions,
            first: self.audio_rows,
            rows: n,
        });
        self.audio_rows += n;
        self.questions += 1;
        self
    }

    /// The system turn and the opening of the user turn.
    pub fn system(&mut self, system: &str) -> &mut Self {
        self.new_turn(Role::System)
            .text(system)
            .end_turn()
            .new_turn(Role::User)
    }

    /// Number of positions so far.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn len(&self) -> usize {
        self.pieces.iter().map(PromptPiece::len).sum()
    }

    /// Whether the prompt is empty (never, after `new`).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The prompt.
    pub fn finish(self) -> Prompt {
        Prompt::from_pieces(self.pieces)
    }
}
