//! smart-turn's front end: Whisper's 80-bin log-mel spectrogram of exactly 8 s of 16 kHz audio,
//! as pipecat computes it (`_whisper_features.py` in the pipecat-ai wheel, itself transformers'
//! `WhisperFeatureExtractor`): the window zero-mean, unit-variance normalised, a centred STFT
//! (400-sample periodic Hann window, hop 160, reflection padding), power spectrum, Slaney mel
//! filters from 0 to 8 kHz, `log10` floored at 1e-10, the last frame dropped, everything
//! floored at the maximum minus 8, then `(x + 4) / 4`.

use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

/// The model's input: 8 s at 16 kHz.
pub const WINDOW_SAMPLES: usize = 8 * 16_000;
/// Mel bins.
pub const MELS: usize = 80;
/// Frames of the spectrogram (the 801st dropped).
pub const FRAMES: usize = 800;
const N_FFT: usize = 400;
const HOP: usize = 160;
const BINS: usize = N_FFT / 2 + 1;

/// The STFT plan and the filters, made once per model.
pub(crate) struct FrontEnd {
    fft: Arc<dyn Fft<f64>>,
    window: Vec<f64>,
    /// `[MELS][BINS]`.
    filters: Vec<f64>,
}

fn hz_to_mel(f: f64) -> f64 {
    let logstep = 27.0 / 6.4f64.ln();
    if f >= 1000.0 {
        15.0 + (f / 1000.0).ln() * logstep
    } else {
        3.0 * f / 200.0
    }
}

fn mel_to_hz(m: f64) -> f64 {
    let logstep = 6.4f64.ln() / 27.0;
    if m >= 15.0 {
        1000.0 * (logstep * (m - 15.0)).exp()
    } else {
        200.0 * m / 3.0
    }
}

impl FrontEnd {
    pub fn new() -> FrontEnd {
        let fft = FftPlanner::new().plan_fft_forward(N_FFT);
        let window = (0..N_FFT)
            .map(|n| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64).cos())
            .collect();
        // Slaney-normalised triangles between MELS + 2 points evenly spaced in mel.
        let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(8000.0));
        let points: Vec<f64> = (0..MELS + 2)
            .map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (MELS + 1) as f64))
            .collect();
        let mut filters = vec![0.0; MELS * BINS];
        for m in 0..MELS {
            let enorm = 2.0 / (points[m + 2] - points[m]);
            for b in 0..BINS {
                let f = 8000.0 * b as f64 / (BINS - 1) as f64;
                let down = (f - points[m]) / (points[m + 1] - points[m]);
                let up = (points[m + 2] - f) / (points[m + 2] - points[m + 1]);
                filters[m * BINS + b] = down.min(up).max(0.0) * enorm;
            }
        }
        FrontEnd {
            fft,
            window,
            filters,
        }
    }

    /// The `[MELS][FRAMES]` features of the last 8 s of `audio` (16 kHz, in `[-1, 1]`), zeros
    /// prepended to shorter audio (as pipecat does).
    pub fn features(&self, audio: &[f32]) -> Vec<f32> {
        let mut x = vec![0.0f64; WINDOW_SAMPLES];
        let tail = &audio[audio.len().saturating_sub(WINDOW_SAMPLES)..];
        for (d, s) in x[WINDOW_SAMPLES - tail.len()..].iter_mut().zip(tail) {
            *d = f64::from(*s);
        }
        // Normalisation (pipecat does it in float32; f64 here, then rounded to f32 as there).
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / x.len() as f64;
        let norm = (var + 1e-7).sqrt();
        for v in &mut x {
            *v = f64::from(((*v - mean) / norm) as f32);
        }
        // Reflection padding by N_FFT / 2 on both sides (the edge sample not repeated).
        let pad = N_FFT / 2;
        let mut padded = Vec::with_capacity(x.len() + 2 * pad);
        padded.extend((1..=pad).rev().map(|i| x[i]));
        padded.extend_from_slice(&x);
        padded.extend((1..=pad).map(|i| x[x.len() - 1 - i]));

        let mut log = vec![0.0f64; MELS * FRAMES];
        let mut buf = vec![Complex::new(0.0, 0.0); N_FFT];
        let mut scratch = vec![Complex::new(0.0, 0.0); self.fft.get_inplace_scratch_len()];
        let mut power = [0.0f64; BINS];
        for frame in 0..FRAMES {
            let start = frame * HOP;
            for (i, c) in buf.iter_mut().enumerate() {
                *c = Complex::new(padded[start + i] * self.window[i], 0.0);
            }
            self.fft.process_with_scratch(&mut buf, &mut scratch);
            for (p, c) in power.iter_mut().zip(&buf) {
                *p = c.norm_sqr();
            }
            for m in 0..MELS {
                let row = &self.filters[m * BINS..(m + 1) * BINS];
                let e: f64 = row.iter().zip(&power).map(|(f, p)| f * p).sum();
                log[m * FRAMES + frame] = e.max(1e-10).log10();
            }
        }
        let max = log.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        log.iter()
            .map(|&v| ((v.max(max - 8.0) + 4.0) / 4.0) as f32)
            .collect()
    }
}
