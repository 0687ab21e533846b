//! Chat prompts as liquid-audio's `ChatState` builds them: each piece tokenized on its own
//! (so token boundaries never cross a piece), audio-in positions in between.

use super::tokenizer::Tokenizer;

/// ASR system prompt.
pub const SYSTEM_ASR: &str = "Perform ASR.";
/// Speech-to-speech system prompt.
pub const SYSTEM_S2S: &str = "Respond with interleaved text and audio.";

/// One stretch of a prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptPiece {
    /// Text token ids.
    Text(Vec<u32>),
    /// `n` audio-in embeddings (rows of the adapter output), taken in order from the request's
    /// encoded audio, starting at row `first`.
    Audio {
        /// First adapter row.
        first: usize,
        /// Number of rows.
        n: usize,
    },
}

/// Builds a prompt piece by piece.
#[derive(Debug, Clone)]
pub struct PromptBuilder<'t> {
    tok: &'t Tokenizer,
    pieces: Vec<PromptPiece>,
    audio_rows: usize,
}

impl<'t> PromptBuilder<'t> {
    /// A prompt starting with `<|startoftext|>`.
    pub fn new(tok: &'t Tokenizer) -> PromptBuilder<'t> {
        let mut b = PromptBuilder {
            tok,
            pieces: Vec::new(),
            audio_rows: 0,
        };
        b.text("<|startoftext|>");
        b
    }

    /// Appends `text`, tokenized alone with special tokens recognised.
    pub fn text(&mut self, text: &str) -> &mut Self {
        let ids = self.tok.encode(text, true);
        self.pieces.push(PromptPiece::Text(ids));
        self
    }

    /// `<|im_start|>{role}\n`.
    pub fn new_turn(&mut self, role: &str) -> &mut Self {
        self.text(&format!("<|im_start|>{role}\n"))
    }

    /// `<|im_end|>\n`.
    pub fn end_turn(&mut self) -> &mut Self {
        self.text("<|im_end|>\n")
    }

    /// `n` audio-in positions (the next `n` adapter rows).
    pub fn audio(&mut self, n: usize) -> &mut Self {
        self.pieces.push(PromptPiece::Audio {
            first: self.audio_rows,
            n,
        });
        self.audio_rows += n;
        self
    }

    /// The system turn and the opening of the user turn.
    pub fn system(&mut self, system: &str) -> &mut Self {
        self.new_turn("system")
            .text(system)
            .end_turn()
            .new_turn("user")
    }

    /// Number of positions so far.
    pub fn len(&self) -> usize {
        self.pieces
            .iter()
            .map(|p| match p {
                PromptPiece::Text(t) => t.len(),
                PromptPiece::Audio { n, .. } => *n,
            })
            .sum()
    }

    /// Whether the prompt is empty (never, after `new`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pieces.
    pub fn finish(self) -> Vec<PromptPiece> {
        self.pieces
    }
}
