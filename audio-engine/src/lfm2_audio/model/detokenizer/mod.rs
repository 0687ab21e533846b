//! The LFM2.5-Audio detokenizer: audio codes (8 codebooks at 12.5 Hz) to a 24 kHz waveform.
//!
//! Per frame: the mean of the frame's code rows of the vocoder file's `emb.emb.weight` (codebook
//! `cb`'s codes at rows `cb * codes .. (cb + 1) * codes`), repeated 6 times (nearest upsampling to
//! 75 Hz), an LFM2 (the `tokenizer-` file, run by [`Backbone`] with its causal sliding window),
//! the `dense_2` head to 641 log-magnitudes and 641 phases per row, and an inverse STFT (n_fft
//! 1280, hop 320, the file's `istft.window`, "same" padding): 1920 samples per frame
//! (liquid-audio 1.3.0's `LFM2AudioDetokenizer`).
//!
//! Decoding runs one LFM2 call per frame (6 positions) in a
//! [`DecodeCache`](super::backbone::DecodeCache); the cache holds at most
//! [`DetokenizerOptions::segment_frames`] frames. When it is full, a new segment starts in
//! the cleared cache with the last [`Detokenizer::warmup_frames`] frames run again first (outputs
//! discarded): they cover the model's whole receptive field (each attention layer looks back
//! `sliding_window - 1` positions, each conv layer `L - 1`), so the next frame's outputs depend on
//! exactly the inputs they would without the restart, and memory and per-frame cost stay bounded
//! however long the audio is. [`Detokenizer::decode`] is a [`DetokenizerStream`] fed every frame,
//! so offline and streaming decoding give the same bits. [`Detokenizer::decode_unchunked`] runs
//! liquid-audio's single pass over all positions (memory grows with the length; for references).

pub mod config;
pub mod istft;
pub mod stream;

mod head;

use std::collections::VecDeque;

use crate::ggml::{quant, Backend, GgmlError, GgmlType, GraphAllocator};

use super::nn::Linear;

use self::config::{DETOK_EMBEDDING, ISTFT_WINDOW};
use super::backbone::config::LayerKind;
use super::backbone::{Backbone, BackboneError, Position, Rows};
use super::load_error::LoadError;
use super::weights::{display_path, Role};
use crate::lfm2_audio::model::package::{
    Detokenizer as DetokenizerFile, Vocoder, DENSE_2, DENSE_2_BIAS,
};

use istft::{Istft, OverlapAdd};
pub use stream::DetokenizerStream;

/// Output sample rate in Hz.
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
pub const SAMPLE_RATE: u32 = 24_000;
/// LFM2 positions (spectral frames) per code frame: 12.5 Hz codes upsampled to 75 Hz.
// why: liquid-audio hard-codes `6 * x.shape[1]`; the files carry no key for it.
pub const UPSAMPLE: usize = 6;
/// ISTFT hop in samples.
// why: liquid-audio hard-codes `ISTFT(1280, 320, 1280)`; only the window length is in the file.
pub const HOP: usize = 320;
/// Output samples per code frame.
pub const SAMPLES_PER_FRAME: usize = UPSAMPLE * HOP;
/// Default [`DetokenizerOptions::segment_frames`]: 128 frames, 10.24 s of audio.
pub const DEFAULT_SEGMENT_FRAMES: usize = 128;
/// Largest accepted [`DetokenizerOptions::segment_frames`] (about 23 hours of audio).
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
pub const MAX_SEGMENT_FRAMES: usize = 1 << 20;

/// How decoding bounds its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetokenizerOptions {
    /// Frames the decode cache holds (warm-up frames of a segment included). Larger segments
    /// rerun fewer warm-up frames but attend over longer (masked) caches; it must exceed
    /// [`Detokenizer::warmup_frames`].
    pub segment_frames: usize,
}

impl Default for DetokenizerOptions {
    fn default() -> Self {
        DetokenizerOptions {
            segment_frames: DEFAULT_SEGMENT_FRAMES,
        }
    }
}

/// Why decoding failed. Input errors are found before any work is done.
#[derive(Debug, thiserror::Error)]
pub enum DetokenizerError {
    /// No frames were given.
    #[error("no frames to decode")]
    Empty,
    /// A frame has the wrong number of codes.
    #[error("frame {frame}: {found} codes, the detokenizer reads {expected} codebooks")]
    Codebooks {
        /// Index of the frame (in the call, or in the stream).
        frame: usize,
        /// Codes given.
        found: usize,
        /// Codebooks of the model.
        expected: usize,
    },
    /// A code is outside its codebook (2048, end of audio, is never a detokenizer input).
    #[error("frame {frame}: code {code} of codebook {codebook} is outside 0..{limit}")]
    CodeOutOfRange {
        /// Index of the frame (in the call, or in the stream).
        frame: usize,
        /// The codebook.
        codebook: usize,
        /// The code.
        code: u32,
        /// Codes per codebook.
        limit: usize,
    },
    /// The segment length cannot hold the warm-up frames and one new frame, or is too large.
    #[error(
        "segment of {segment} frames: need more than {warmup} (the warm-up) and at most {max}"
    )]
    Segment {
        /// The segment length asked for.
        segment: usize,
        /// The model's warm-up frames.
        warmup: usize,
        /// [`MAX_SEGMENT_FRAMES`].
        max: usize,
    },
    /// The model computed a NaN or infinite spectrum or sample for a frame: its weights are
    /// well-formed but corrupt (found by the fault sweep: F32 bytes read as F16). Refused
    /// rather than handed out as audio; the stream cannot continue.
    #[error("frame {frame}: the detokenizer computed a non-finite {what}: corrupt weights?")]
    NonFinite {
        /// The frame's index in the stream.
        frame: usize,
        /// Which value (`spectrum value I is NaN`, `sample I is inf`).
        what: String,
    },
    /// The LFM2 run failed.
    #[error(transparent)]
    Backbone(#[from] BackboneError),
    /// A weight the head needs is missing (cannot happen after a successful load).
    #[error(transparent)]
    Weights(#[from] LoadError),
    /// ggml rejected the head graph or failed to compute it.
    #[error(transparent)]
    Ggml(#[from] GgmlError),
}

/// The code embedding table `emb.emb.weight`, kept in its stored type; rows are converted to
/// f32 on use.
#[derive(Debug)]
struct CodeEmbedding {
    data: Vec<u8>,
    ty: GgmlType,
    row_bytes: usize,
    width: usize,
    codebooks: usize,
    codes: usize,
}

impl CodeEmbedding {
    /// Checks `frame` (index `index`) against the table.
    fn check(&self, index: usize, frame: &[u32]) -> Result<(), DetokenizerError> {
        if frame.len() != self.codebooks {
            return Err(DetokenizerError::Codebooks {
                frame: index,
                found: frame.len(),
                expected: self.codebooks,
            });
        }
        for (codebook, &code) in frame.iter().enumerate() {
            if code as usize >= self.codes {
                return Err(DetokenizerError::CodeOutOfRange {
                    frame: index,
                    codebook,
                    code,
                    limit: self.codes,
                });
            }
        }
        Ok(())
    }

    /// The mean of the frame's rows (checked first).
    fn embed(&self, index: usize, frame: &[u32]) -> Result<Vec<f32>, DetokenizerError> {
        self.check(index, frame)?;
        let mut sum = vec![0f32; self.width];
        for (cb, &code) in frame.iter().enumerate() {
            let row = cb * self.codes + code as usize;
            let bytes = &self.data[row * self.row_bytes..(row + 1) * self.row_bytes];
            let values = quant::dequantize(self.ty, bytes, self.width)?;
            // why: codebook 0 first, then each next one, as torch's `mean(1)` sums them.
            for (s, v) in sum.iter_mut().zip(&values) {
                *s += v;
            }
        }
        let n = self.codebooks as f32;
        Ok(sum.into_iter().map(|s| s / n).collect())
    }
}

/// A loaded detokenizer: immutable weights; every stream owns its decode cache and graph memory.
pub struct Detokenizer {
    backbone: Backbone,
    /// `dense_2`: `[hidden, n_fft + 2]` with bias.
    head: Linear,
    codes: CodeEmbedding,
    istft: Istft,
    out_width: usize,
    warmup_frames: usize,
    options: DetokenizerOptions,
}

impl std::fmt::Debug for Detokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detokenizer")
            .field("backbone", &self.backbone)
            .field("istft", &self.istft)
            .field("warmup_frames", &self.warmup_frames)
            .field("options", &self.options)
            .finish()
    }
}

fn bad_shape(gguf: &crate::ggml::gguf::GgufFile, tensor: &str, expected: Vec<u64>) -> LoadError {
    LoadError::BadShape {
        file: display_path(gguf),
        tensor: tensor.to_owned(),
        expected,
        found: gguf
            .tensor(tensor)
            .map(|t| t.shape().to_vec())
            .unwrap_or_default(),
    }
}

impl Detokenizer {
    /// Loads the detokenizer file's LFM2 and head onto `backend` and copies the code embedding
    /// and ISTFT window out of the vocoder file (the depthformer keeps using the rest of it).
    pub fn load(
        file: DetokenizerFile,
        vocoder: &Vocoder,
        backend: &Backend,
    ) -> Result<Detokenizer, LoadError> {
        let vg = &vocoder.gguf;
        let vpath = display_path(vg);
        let missing = |tensor: &str| LoadError::MissingTensor {
            file: vpath.clone(),
            tensor: tensor.to_owned(),
        };

        // The synthesis window: its length is the FFT size; the head must give n_fft/2+1 bins
        // of magnitude and of phase.
        let win = vg
            .tensor(ISTFT_WINDOW)
            .ok_or_else(|| missing(ISTFT_WINDOW))?;
        if win.ggml_type() != GgmlType::F32 || win.shape().len() != 1 {
            return Err(bad_shape(vg, ISTFT_WINDOW, vec![win.n_elements()]));
        }
        let window = quant::dequantize(
            GgmlType::F32,
            vg.tensor_data(win),
            win.n_elements() as usize,
        )
        .map_err(|source| LoadError::Backend {
            file: vpath.clone(),
            source,
        })?;
        let istft = Istft::new(&window, HOP).map_err(|e| LoadError::BadValue {
            file: vpath.clone(),
            key: ISTFT_WINDOW.to_owned(),
            reason: e.to_string(),
        })?;
        let hidden = file.lfm2.config.hidden_size as usize;
        let out_width = 2 * istft.n_bins();
        if file.n_embd_out as usize != out_width {
            return Err(bad_shape(
                &file.lfm2.gguf,
                DENSE_2,
                vec![hidden as u64, out_width as u64],
            ));
        }

        // The code embedding: [hidden, codebooks * codes].
        let emb = vg
            .tensor(DETOK_EMBEDDING)
            .ok_or_else(|| missing(DETOK_EMBEDDING))?;
        let codebooks = vocoder.config.codebooks as usize;
        let ne = emb.ne();
        let rows = ne[1] as usize;
        if ne[0] as usize != hidden || codebooks == 0 || rows % codebooks != 0 {
            return Err(bad_shape(
                vg,
                DETOK_EMBEDDING,
                vec![
                    hidden as u64,
                    (codebooks * (rows / codebooks.max(1))) as u64,
                ],
            ));
        }
        let ty = emb.ggml_type();
        let backend_err = |source| LoadError::Backend {
            file: vpath.clone(),
            source,
        };
        let row_bytes = ty.row_size(hidden as u64).map_err(|_| LoadError::BadType {
            file: vpath.clone(),
            tensor: DETOK_EMBEDDING.to_owned(),
            found: ty,
        })?;
        let data = vg.tensor_data(emb).to_vec();
        if data.len() != row_bytes * rows {
            return Err(bad_shape(
                vg,
                DETOK_EMBEDDING,
                vec![hidden as u64, rows as u64],
            ));
        }
        // why: fail at load, not at the first frame, if ggml cannot convert the stored type.
        quant::dequantize(ty, &data[..row_bytes], hidden).map_err(backend_err)?;
        let codes = CodeEmbedding {
            data,
            ty,
            row_bytes,
            width: hidden,
            codebooks,
            codes: rows / codebooks,
        };

        // The receptive field, from the LFM2's layer kinds.
        let cfg = file.lfm2.config.clone();
        let tpath = display_path(&file.lfm2.gguf);
        let backbone = Backbone::load(file.lfm2, backend)?.with_label("detokenizer");
        let vb = backbone.weights().vb();
        let head = Linear {
            weight: vb.get(DENSE_2, &[hidden, out_width], Role::Matrix)?,
            bias: Some(vb.get(DENSE_2_BIAS, &[out_width], Role::Vector)?),
        };
        let has_attention = cfg.layer_kinds().contains(&LayerKind::Attention);
        let window_len = match (backbone.sliding_window(), has_attention) {
            (Some(w), _) => w,
            (None, false) => 1,
            (None, true) => {
                // why: without a window the receptive field is unbounded and segments could not
                // restart exactly.
                return Err(LoadError::MissingKey {
                    file: tpath,
                    key: crate::lfm2_audio::model::package::KEY_SLIDING_WINDOW.to_owned(),
                });
            }
        };
        let lookback: usize = cfg
            .layer_kinds()
            .iter()
            .map(|k| match k {
                LayerKind::Attention => window_len - 1,
                LayerKind::Conv => cfg.conv_L_cache.saturating_sub(1) as usize,
            })
            .sum();
        let warmup_frames = lookback.div_ceil(UPSAMPLE);
        let mut options = DetokenizerOptions::default();
        // why: a model with a very long receptive field still gets segments mostly of new frames.
        options.segment_frames = options.segment_frames.max(4 * (warmup_frames + 1));
        drop(vb);
        Ok(Detokenizer {
            backbone,
            head,
            codes,
            istft,
            out_width,
            warmup_frames,
            options,
        })
    }

    /// Sets the options of streams started from now on (and of [`decode`](Self::decode)).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn set_options(&mut self, options: DetokenizerOptions) -> Result<(), DetokenizerError> {
        let s = options.segment_frames;
        if s <= self.warmup_frames || s > MAX_SEGMENT_FRAMES {
            return Err(DetokenizerError::Segment {
                segment: s,
                warmup: self.warmup_frames,
                max: MAX_SEGMENT_FRAMES,
            });
        }
        self.options = options;
        Ok(())
    }

    /// The options in force.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn options(&self) -> DetokenizerOptions {
        self.options
    }

    /// Frames rerun at the start of each segment after the first: the LFM2's look-back
    /// (`sliding_window - 1` per attention layer, `L - 1` per conv layer) in whole frames.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn warmup_frames(&self) -> usize {
        self.warmup_frames
    }

    /// Codebooks per frame.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn codebooks(&self) -> usize {
        self.codes.codebooks
    }

    /// Codes per codebook (valid codes are `0..codes_per_codebook`).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn codes_per_codebook(&self) -> usize {
        self.codes.codes
    }

    /// Width of one head row: `n_bins` log-magnitudes then `n_bins` phases.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn spectrum_width(&self) -> usize {
        self.out_width
    }

    /// The LFM2 the detokenizer runs.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn backbone(&self) -> &Backbone {
        &self.backbone
    }

    /// A streaming decoder computing on the backend the weights were loaded on: push frames,
    /// get samples as soon as they are final.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn stream(&self) -> DetokenizerStream<'_> {
        DetokenizerStream::new(self)
    }

    /// A streaming decoder computing on `backend` (an instance of the weights' device, e.g.
    /// [`Backend::new_instance`]), so several streams decode at once.
    pub fn stream_on(&self, backend: &Backend) -> DetokenizerStream<'_> {
        DetokenizerStream::on(self, backend)
    }

    /// Checks every frame before any work is done.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    fn check_all<F: AsRef<[u32]>>(&self, frames: &[F]) -> Result<(), DetokenizerError> {
        if frames.is_empty() {
            return Err(DetokenizerError::Empty);
        }
        for (i, f) in frames.iter().enumerate() {
            self.codes.check(i, f.as_ref())?;
        }
        Ok(())
    }

    /// The waveform of `frames` (24 kHz, [`SAMPLES_PER_FRAME`] samples per frame), decoded in
    /// segments exactly as a [`DetokenizerStream`] fed the same frames (the same bits).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn decode<F: AsRef<[u32]>>(&self, frames: &[F]) -> Result<Vec<f32>, DetokenizerError> {
        self.check_all(frames)?;
        let mut s = self.stream();
        let mut out = Vec::with_capacity(frames.len() * SAMPLES_PER_FRAME);
        for f in frames {
            out.extend(s.push(f.as_ref())?);
        }
        out.extend(s.finish());
        Ok(out)
    }

    /// The head output of `frames` (`UPSAMPLE` rows of [`spectrum_width`](Self::spectrum_width)
    /// values per frame, row-major), computed as [`decode`](Self::decode) computes it.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn spectrogram<F: AsRef<[u32]>>(&self, frames: &[F]) -> Result<Vec<f32>, DetokenizerError> {
        self.check_all(frames)?;
        let mut core = stream::Core::new(self, self.backbone.backend());
        let mut out = Vec::with_capacity(frames.len() * UPSAMPLE * self.out_width);
        for (i, f) in frames.iter().enumerate() {
            let emb = self.codes.embed(i, f.as_ref())?;
            out.extend(core.step(emb)?);
        }
        Ok(out)
    }

    /// The head output of `frames` from one LFM2 pass over all positions (liquid-audio's
    /// computation; memory grows with the square of the length).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn spectrogram_unchunked<F: AsRef<[u32]>>(
        &self,
        frames: &[F],
    ) -> Result<Vec<f32>, DetokenizerError> {
        self.check_all(frames)?;
        let embs = frames
            .iter()
            .enumerate()
            .map(|(i, f)| self.codes.embed(i, f.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let positions: Vec<Position<'_>> = embs
            .iter()
            .flat_map(|e| std::iter::repeat_n(Position::Audio(e), UPSAMPLE))
            .collect();
        let mut cache = self.backbone.new_cache(positions.len())?;
        let out = self
            .backbone
            .forward(&mut cache, &positions, Rows::All, false)?;
        let alloc = GraphAllocator::labelled(cache.backend(), "detokenizer head")?;
        head::run(&self.head, cache.backend(), &alloc, &out.hidden, out.rows)
    }

    /// The waveform of `frames` from one LFM2 pass over all positions (see
    /// [`spectrogram_unchunked`](Self::spectrogram_unchunked)).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn decode_unchunked<F: AsRef<[u32]>>(
        &self,
        frames: &[F],
    ) -> Result<Vec<f32>, DetokenizerError> {
        let spec = self.spectrogram_unchunked(frames)?;
        let mut ola = OverlapAdd::new(&self.istft);
        let mut out = Vec::with_capacity(frames.len() * SAMPLES_PER_FRAME);
        for row in spec.chunks_exact(self.out_width) {
            out.extend(ola.push(&self.istft, row));
        }
        out.extend(ola.finish(&self.istft));
        Ok(out)
    }
}

/// The last `n` items of a history, oldest first (helper for the warm-up ring).
fn keep_last<T>(ring: &mut VecDeque<T>, n: usize) {
    while ring.len() > n {
        ring.pop_front();
    }
}
