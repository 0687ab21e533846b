//! The detokenizer's inverse STFT with "same" padding, frame by frame.
//!
//! Each spectral frame `t` is one head row: `n_bins` log-magnitudes then `n_bins` phases
//! (`n_bins = n_fft / 2 + 1`). Its complex spectrum `exp(mag) * e^(i phase)` is inverted with a
//! real inverse FFT (`1/n_fft` scaling, the imaginary parts of the DC and Nyquist bins ignored),
//! multiplied by the synthesis window and overlap-added at sample `t * hop` of the untrimmed
//! signal. The window's squares are overlap-added the same way into an envelope; the output is
//! the untrimmed signal divided by the envelope, with `(n_fft - hop) / 2` samples trimmed from
//! each end, so `T` frames give `T * hop` samples (liquid-audio's `ISTFT(padding="same")`).
//!
//! [`OverlapAdd`] keeps only the samples some later frame can still touch, and hands out each
//! sample as soon as no later frame can (`hop` samples per frame after the first
//! `pad / hop` frames); [`OverlapAdd::finish`] hands out the last `pad` samples, whose envelope
//! lacks the frames that never came. Offline and streaming decoding both run this one type, so
//! they produce the same bits.

use std::collections::VecDeque;
use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

/// Smallest envelope value liquid-audio accepts (it asserts `window_envelope > 1e-11`).
pub const MIN_ENVELOPE: f64 = 1e-11;

/// The synthesis window and the inverse FFT plan: everything about the ISTFT that does not
/// change between streams.
pub struct Istft {
    window: Vec<f64>,
    hop: usize,
    fft: Arc<dyn Fft<f64>>,
}

impl std::fmt::Debug for Istft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Istft")
            .field("n_fft", &self.window.len())
            .field("hop", &self.hop)
            .finish()
    }
}

/// Why a window cannot be used for "same"-padded synthesis.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WindowError {
    /// The window length and hop do not allow "same" padding.
    #[error("window of {n_fft} samples with hop {hop}: need an even n_fft >= hop > 0 with even n_fft - hop")]
    Geometry {
        /// Window length (= FFT size).
        n_fft: usize,
        /// Hop length.
        hop: usize,
    },
    /// Some output sample would be divided by an envelope of (nearly) zero.
    #[error("the window's squared overlap-add envelope is {value:e} at offset {offset} (must exceed 1e-11)")]
    Envelope {
        /// Offset in the window.
        offset: usize,
        /// The envelope's lower bound there.
        value: f64,
    },
    /// A window value is not finite.
    #[error("window value {index} is not finite")]
    NotFinite {
        /// Index of the value.
        index: usize,
    },
}

impl Istft {
    /// An ISTFT with synthesis `window` (its length is the FFT size) and hop `hop`.
    ///
    /// Checks that every output sample's envelope exceeds [`MIN_ENVELOPE`] whatever the number
    /// of frames: each kept sample is covered by one frame at a window offset in
    /// `[pad, pad + hop)`, so those squares bound the envelope from below.
    pub fn new(window: &[f32], hop: usize) -> Result<Istft, WindowError> {
        let n_fft = window.len();
        if hop == 0 || n_fft < hop || n_fft % 2 != 0 || (n_fft - hop) % 2 != 0 {
            return Err(WindowError::Geometry { n_fft, hop });
        }
        if let Some(index) = window.iter().position(|w| !w.is_finite()) {
            return Err(WindowError::NotFinite { index });
        }
        let window: Vec<f64> = window.iter().map(|&w| f64::from(w)).collect();
        let pad = (n_fft - hop) / 2;
        for (offset, w) in window.iter().enumerate().skip(pad).take(hop) {
            let value = w * w;
            if value <= MIN_ENVELOPE {
                return Err(WindowError::Envelope { offset, value });
            }
        }
        let fft = FftPlanner::new().plan_fft_inverse(n_fft);
        Ok(Istft { window, hop, fft })
    }

    /// FFT size (= window length).
    pub fn n_fft(&self) -> usize {
        self.window.len()
    }

    /// Hop between frames, in samples.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn hop(&self) -> usize {
        self.hop
    }

    /// Frequency bins per frame: `n_fft / 2 + 1`.
    pub fn n_bins(&self) -> usize {
        self.window.len() / 2 + 1
    }

    /// Samples trimmed from each end of the untrimmed signal: `(n_fft - hop) / 2`.
    pub fn pad(&self) -> usize {
        (self.window.len() - self.hop) / 2
    }
}

/// Overlap-add state of one signal: the untrimmed samples later frames may still touch.
#[derive(Debug, Clone)]
pub struct OverlapAdd {
    /// Windowed inverse-FFT sums, from untrimmed sample `base` on.
    acc: VecDeque<f64>,
    /// Squared-window sums over the same samples.
    env: VecDeque<f64>,
    /// Untrimmed index of `acc[0]`.
    base: usize,
    /// Frames added so far.
    frames: usize,
    /// Scratch for the inverse FFT.
    buf: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
}

impl OverlapAdd {
    /// An empty signal for `istft`.
    pub fn new(istft: &Istft) -> OverlapAdd {
        let n = istft.n_fft();
        OverlapAdd {
            acc: VecDeque::with_capacity(n),
            env: VecDeque::with_capacity(n),
            base: 0,
            frames: 0,
            buf: vec![Complex::new(0.0, 0.0); n],
            scratch: vec![Complex::new(0.0, 0.0); istft.fft.get_inplace_scratch_len()],
        }
    }

    /// Frames added so far.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Adds one frame (`n_bins` log-magnitudes then `n_bins` phases) and returns the samples no
    /// later frame can change. `row` must hold `2 * n_bins` values (the caller checks).
    pub fn push(&mut self, istft: &Istft, row: &[f32]) -> Vec<f32> {
        let n = istft.n_fft();
        let bins = istft.n_bins();
        debug_assert_eq!(row.len(), 2 * bins);
        let (mag, phase) = row.split_at(bins);
        // why: liquid-audio computes exp, cos and sin in f32 (`torch.polar(log_abs.exp(), angle)`);
        // the transform itself runs in f64 so its own rounding stays far below f32's.
        for k in 0..bins {
            let a = mag[k].exp();
            let (s, c) = phase[k].sin_cos();
            // why: a real inverse FFT reads only the real part of the DC and Nyquist bins.
            let im = if k == 0 || k == n / 2 { 0.0 } else { a * s };
            self.buf[k] = Complex::new(f64::from(a * c), f64::from(im));
        }
        // Hermitian extension: bin n - k is the conjugate of bin k.
        for k in 1..n - bins + 1 {
            self.buf[n - k] = self.buf[k].conj();
        }
        istft
            .fft
            .process_with_scratch(&mut self.buf, &mut self.scratch);

        let start = self.frames * istft.hop;
        let end = start + n;
        while self.base + self.acc.len() < end {
            self.acc.push_back(0.0);
            self.env.push_back(0.0);
        }
        let off = start - self.base;
        let scale = 1.0 / n as f64;
        for (i, w) in istft.window.iter().enumerate() {
            self.acc[off + i] += self.buf[i].re * scale * w;
            self.env[off + i] += w * w;
        }
        self.frames += 1;
        // Untrimmed samples before the next frame's start are final.
        self.drain(istft, self.frames * istft.hop)
    }

    /// Hands out the remaining samples (the last `pad`, whose envelope lacks the frames that
    /// never came) and resets nothing: the signal is complete.
    pub fn finish(mut self, istft: &Istft) -> Vec<f32> {
        if self.frames == 0 {
            return Vec::new();
        }
        let end = (self.frames - 1) * istft.hop + istft.n_fft() - istft.pad();
        self.drain(istft, end)
    }

    /// Removes and returns the trimmed output samples with untrimmed index below `upto`.
    fn drain(&mut self, istft: &Istft, upto: usize) -> Vec<f32> {
        let pad = istft.pad();
        let mut out = Vec::with_capacity(upto.saturating_sub(self.base.max(pad)));
        while self.base < upto {
            let (Some(y), Some(e)) = (self.acc.pop_front(), self.env.pop_front()) else {
                break;
            };
            if self.base >= pad {
                out.push((y / e) as f32);
            }
            self.base += 1;
        }
        out
    }
}
