//! Streaming detokenization: one frame in, the samples that became final out.
//!
//! `Core` runs the LFM2 and the head frame by frame in a bounded [`DecodeCache`], restarting
//! it every `segment_frames` frames with the last `warmup_frames` frames rerun (see the module
//! docs of [`super`]); [`DetokenizerStream`] adds the inverse STFT's overlap-add state.

use std::collections::VecDeque;

use crate::ggml::{Backend, GraphAllocator};

use super::super::backbone::{DecodeCache, Position, Rows};
use super::istft::OverlapAdd;
use super::{head, keep_last, Detokenizer, DetokenizerError, UPSAMPLE};

/// The LFM2 + head state of one stream.
pub(super) struct Core<'a> {
    det: &'a Detokenizer,
    /// What the stream computes on.
    backend: Backend,
    /// The head graph's memory (made on first use).
    alloc: Option<GraphAllocator>,
    segment_frames: usize,
    cache: Option<DecodeCache>,
    /// Embeddings of the last `warmup_frames` frames, oldest first.
    history: VecDeque<Vec<f32>>,
    /// Frames in the cache's current segment; `None` when the next frame must start a segment
    /// (at the start, when the segment is full, or after a failed restart).
    in_segment: Option<usize>,
}

impl<'a> Core<'a> {
    pub(super) fn new(det: &'a Detokenizer, backend: &Backend) -> Core<'a> {
        Core {
            det,
            backend: backend.clone(),
            alloc: None,
            segment_frames: det.options.segment_frames,
            cache: None,
            history: VecDeque::new(),
            in_segment: None,
        }
    }

    /// Runs one frame's embedding; returns its `UPSAMPLE` head rows (row-major).
    pub(super) fn step(&mut self, emb: Vec<f32>) -> Result<Vec<f32>, DetokenizerError> {
        let det = self.det;
        let bb = &det.backbone;
        let cache = match &mut self.cache {
            Some(c) => c,
            None => self
                .cache
                .insert(bb.new_cache_on(&self.backend, self.segment_frames * UPSAMPLE)?),
        };
        if self.in_segment.is_some_and(|n| n >= self.segment_frames) {
            self.in_segment = None;
        }
        let in_segment = match self.in_segment {
            Some(n) => n,
            None => {
                cache.clear()?;
                if !self.history.is_empty() {
                    // why: rerunning the receptive field rebuilds K/V rows and conv tails equal
                    // in exact arithmetic to those of an unrestarted run; outputs are not needed.
                    let warm: Vec<Position<'_>> = self
                        .history
                        .iter()
                        .flat_map(|e| std::iter::repeat_n(Position::Audio(e), UPSAMPLE))
                        .collect();
                    // why: `Rows::Last`, not `Rows::None`: with `None` the graph drops the last
                    // attention layer's scores, leaving its mask input unallocated (an error).
                    bb.forward(cache, &warm, Rows::Last, false)?;
                }
                self.in_segment = Some(self.history.len());
                self.history.len()
            }
        };
        let positions = [Position::Audio(&emb); UPSAMPLE];
        let out = bb.forward(cache, &positions, Rows::All, false)?;
        self.in_segment = Some(in_segment + 1);
        let alloc = match &self.alloc {
            Some(a) => a,
            None => self
                .alloc
                .insert(GraphAllocator::labelled(&self.backend, "detokenizer head")?),
        };
        let rows = head::run(&det.head, &self.backend, alloc, &out.hidden, out.rows)?;
        if det.warmup_frames > 0 {
            self.history.push_back(emb);
            keep_last(&mut self.history, det.warmup_frames);
        }
        Ok(rows)
    }
}

/// A streaming decoder of one utterance: [`push`](Self::push) frames as they are generated and
/// play the samples each push returns; [`finish`](Self::finish) returns the last ones.
///
/// The concatenation of everything returned equals [`Detokenizer::decode`] of the same frames,
/// bit for bit: the first push returns `SAMPLES_PER_FRAME - pad` samples (`pad` = 480), each
/// later one [`SAMPLES_PER_FRAME`](super::SAMPLES_PER_FRAME), and `finish` the last `pad`.
/// A failed push changes nothing: the frame can be pushed again or skipped; except
/// [`DetokenizerError::NonFinite`] (the model's weights are corrupt), after which the stream's
/// state holds that frame and it should be dropped.
pub struct DetokenizerStream<'a> {
    core: Core<'a>,
    ola: OverlapAdd,
    frames: usize,
}

impl std::fmt::Debug for DetokenizerStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetokenizerStream")
            .field("frames", &self.frames)
            .field("in_segment", &self.core.in_segment)
            .finish()
    }
}

impl<'a> DetokenizerStream<'a> {
    /// A stream on `det` with its current options, computing on the backend its weights were
    /// loaded on.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn new(det: &'a Detokenizer) -> DetokenizerStream<'a> {
        DetokenizerStream::on(det, det.backbone.backend())
    }

    /// A stream on `det` with its current options, computing on `backend`.
    pub fn on(det: &'a Detokenizer, backend: &Backend) -> DetokenizerStream<'a> {
        DetokenizerStream {
            core: Core::new(det, backend),
            ola: OverlapAdd::new(&det.istft),
            frames: 0,
        }
    }

    /// Frames pushed successfully so far.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Decodes one frame (one code per codebook) and returns the samples that became final.
    pub fn push(&mut self, frame: &[u32]) -> Result<Vec<f32>, DetokenizerError> {
        let det = self.core.det;
        let emb = det.codes.embed(self.frames, frame)?;
        let rows = self.core.step(emb)?;
        // why: a well-formed file with corrupt weights computes NaN or infinite spectra, and
        // audio made of them must not be handed out as a valid result.
        let non_finite = |what: &str, v: &[f32]| {
            v.iter()
                .position(|x| !x.is_finite())
                .map(|i| DetokenizerError::NonFinite {
                    frame: self.frames,
                    what: format!("{what} {i} ({})", v[i]),
                })
        };
        if let Some(e) = non_finite("spectrum value", &rows) {
            return Err(e);
        }
        let mut out = Vec::with_capacity(super::SAMPLES_PER_FRAME);
        for row in rows.chunks_exact(det.out_width) {
            out.extend(self.ola.push(&det.istft, row));
        }
        if let Some(e) = non_finite("sample", &out) {
            return Err(e);
        }
        self.frames += 1;
        Ok(out)
    }

    /// Pushes several frames in order; returns the samples that became final (the same as
    /// pushing them one by one and concatenating). Every frame is checked before any is run, so
    /// a bad frame changes nothing; a backend failure midway keeps the frames before it pushed.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn push_frames<F: AsRef<[u32]>>(
        &mut self,
        frames: &[F],
    ) -> Result<Vec<f32>, DetokenizerError> {
        for (i, f) in frames.iter().enumerate() {
            self.core.det.codes.check(self.frames + i, f.as_ref())?;
        }
        let mut out = Vec::with_capacity(frames.len() * super::SAMPLES_PER_FRAME);
        for f in frames {
            out.extend(self.push(f.as_ref())?);
        }
        Ok(out)
    }

    /// Ends the utterance and returns its last samples (none if no frame was pushed).
    pub fn finish(self) -> Vec<f32> {
        self.ola.finish(&self.core.det.istft)
    }
}
