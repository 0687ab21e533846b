//! What a forward run takes and returns: its input positions, which rows to return, and the
//! returned rows.

/// One input position of a forward chunk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Position<'a> {
    /// A text token id.
    Text(u32),
    /// An audio-in embedding (one adapter output row, `hidden` values).
    Audio(&'a [f32]),
    /// An audio-out frame: one code per codebook, embedded as the sum of the codebooks' rows.
    Frame(&'a [u32]),
}

/// Which rows a forward call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Only the chunk's last position (decode steps, end of prefill).
    Last,
    /// Every position of the chunk (tests, scoring).
    All,
    /// Nothing (prefill blocks whose outputs nobody reads).
    None,
}

/// What a forward call returns, for the requested rows in position order.
#[derive(Debug, Clone, Default)]
pub struct ForwardOutput {
    /// Number of rows returned.
    pub rows: usize,
    /// Final-norm hidden states, `rows x hidden`, row-major.
    pub hidden: Vec<f32>,
    /// Text logits, `rows x vocab`, when asked for.
    pub logits: Option<Vec<f32>>,
}
