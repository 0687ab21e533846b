//! Log-mel features for the LFM2-Audio encoder, computed as NeMo's
//! `AudioToMelSpectrogramPreprocessor` (liquid-audio's audio preprocessor) does in eval mode.
//!
//! Pipeline, for `n` samples of 16 kHz mono audio:
//! 1. pre-emphasis `y[0] = x[0]`, `y[i] = x[i] - 0.97 x[i-1]`;
//! 2. STFT as `torch.stft(n_fft=512, hop_length=160, win_length=400, center=True,
//!    pad_mode="constant")`: the signal is padded with 256 zeros on each side, the symmetric
//!    (`periodic=False`) 400-point Hann window is centred in the 512-point frame (56 zeros on each
//!    side), frame `t` starts at padded index `160 t`; `n / 160 + 1` frames;
//! 3. power spectrum `|X|^2` over the 257 one-sided bins;
//! 4. 128 triangular mel filters, Slaney mel scale and Slaney area normalisation over 0..8000 Hz
//!    (librosa `filters.mel(htk=False, norm="slaney")`);
//! 5. `ln(x + 2^-24)`;
//! 6. per mel bin, subtract the mean and divide by (unbiased standard deviation + 1e-5), both
//!    taken over the `n / 160` "valid" frames (NeMo's sequence length drops the last frame);
//! 7. frames at or past the valid length are set to 0.
//!
//! No dither: NeMo adds dither only in training mode and liquid-audio runs the preprocessor in
//! eval mode. Everything is computed in f64 and rounded to f32 once at the end. Agreement, as
//! `max |ours - ref| / max |ref|` (see `tests/features.rs`): ~1e-5 with liquid-audio's f32 output,
//! which is that reference's own f32 rounding (larger in mel bins whose energy is near the 2^-24
//! guard), and within the final f32 rounding of the same liquid-audio code run in f64.

use std::f64::consts::PI;

/// Sample rate the features are defined for (Hz).
pub const SAMPLE_RATE: u32 = 16_000;
/// FFT size of the STFT.
pub const N_FFT: usize = 512;
/// Length of the (symmetric Hann) analysis window; it is centred inside the `N_FFT` frame.
pub const WIN_LENGTH: usize = 400;
/// Hop between frames, in samples (10 ms).
pub const HOP_LENGTH: usize = 160;
/// Number of mel bins.
pub const N_MELS: usize = 128;
/// Number of one-sided frequency bins of the STFT.
pub const N_FREQS: usize = N_FFT / 2 + 1;
/// Pre-emphasis coefficient.
pub const PREEMPHASIS: f64 = 0.97;
/// Upper edge of the mel filterbank (Hz).
pub const F_MAX: f64 = 8000.0;
/// Added to the mel energies before the logarithm (2^-24, NeMo's `log_zero_guard_value`).
pub const LOG_GUARD: f64 = 1.0 / 16_777_216.0;
/// Added to the per-bin standard deviation before dividing (NeMo's `CONSTANT`).
pub const STD_EPSILON: f64 = 1e-5;

/// Number of feature frames produced for `n_samples` samples: `n_samples / 160 + 1`.
pub fn frame_count(n_samples: usize) -> usize {
    n_samples / HOP_LENGTH + 1
}

/// Number of frames NeMo counts as valid (used for the statistics and left non-zero):
/// `n_samples / 160`, i.e. [`frame_count`] minus one.
pub fn valid_frame_count(n_samples: usize) -> usize {
    n_samples / HOP_LENGTH
}

/// Why features could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureError {
    /// No samples were given.
    #[error("audio is empty")]
    Empty,
    /// A sample is NaN or infinite.
    #[error("sample {index} is not finite")]
    NonFinite {
        /// Index of the first offending sample.
        index: usize,
    },
}

/// Normalised log-mel features of one utterance.
///
/// Memory layout: mel-major, `data[mel * n_frames + frame]`, i.e. a row-major `[n_mels, n_frames]`
/// matrix with frames fastest, the layout of NeMo's `[batch, n_mels, time]` output. In ggml terms
/// this is a tensor with `ne[0] = n_frames` and `ne[1] = n_mels`. [`LogMelFeatures::to_frame_major`]
/// gives the transpose.
#[derive(Debug, Clone, PartialEq)]
pub struct LogMelFeatures {
    n_mels: usize,
    n_frames: usize,
    n_valid_frames: usize,
    data: Vec<f32>,
}

impl LogMelFeatures {
    /// Number of mel bins (rows).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// Number of frames (columns), `n_samples / 160 + 1`; all of them are fed to the encoder.
    pub fn n_frames(&self) -> usize {
        self.n_frames
    }

    /// Number of frames used for the normalisation statistics, `n_samples / 160`; the frames from
    /// here on are all zero.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn n_valid_frames(&self) -> usize {
        self.n_valid_frames
    }

    /// The values, mel-major (`[n_mels, n_frames]`, frames fastest).
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// Consumes the features, returning the mel-major values.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn into_data(self) -> Vec<f32> {
        self.data
    }

    /// The value of mel bin `mel` at frame `frame`.
    ///
    /// # Panics
    /// If `mel >= n_mels` or `frame >= n_frames`.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn get(&self, mel: usize, frame: usize) -> f32 {
        assert!(
            mel < self.n_mels && frame < self.n_frames,
            "index out of range"
        );
        self.data[mel * self.n_frames + frame]
    }

    /// All frames of one mel bin (a contiguous row).
    ///
    /// # Panics
    /// If `mel >= n_mels`.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn mel_row(&self, mel: usize) -> &[f32] {
        &self.data[mel * self.n_frames..(mel + 1) * self.n_frames]
    }

    /// The `n_mels` values of one frame (a strided column, copied).
    ///
    /// # Panics
    /// If `frame >= n_frames`.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn frame(&self, frame: usize) -> Vec<f32> {
        assert!(frame < self.n_frames, "frame out of range");
        (0..self.n_mels)
            .map(|m| self.data[m * self.n_frames + frame])
            .collect()
    }

    /// The transpose: frame-major `[n_frames, n_mels]`, mel bins fastest.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn to_frame_major(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.data.len()];
        for (m, row) in self.data.chunks_exact(self.n_frames.max(1)).enumerate() {
            for (t, &v) in row.iter().enumerate() {
                out[t * self.n_mels + m] = v;
            }
        }
        out
    }
}

/// Iterative radix-2 complex FFT of a fixed power-of-two size, in f64.
struct Fft {
    n: usize,
    /// `exp(-2 pi i k / n)` for `k < n / 2`, each computed directly (no recurrence drift).
    twiddles: Vec<(f64, f64)>,
    bit_reverse: Vec<usize>,
}

impl Fft {
    fn new(n: usize) -> Self {
        assert!(n.is_power_of_two());
        let bits = n.trailing_zeros();
        let twiddles = (0..n / 2)
            .map(|k| {
                let a = -2.0 * PI * k as f64 / n as f64;
                (a.cos(), a.sin())
            })
            .collect();
        let bit_reverse = (0..n)
            .map(|i| {
                if bits == 0 {
                    0
                } else {
                    i.reverse_bits() >> (usize::BITS - bits)
                }
            })
            .collect();
        Self {
            n,
            twiddles,
            bit_reverse,
        }
    }

    /// In-place forward transform of `(re, im)`.
    fn forward(&self, re: &mut [f64], im: &mut [f64]) {
        let n = self.n;
        for i in 0..n {
            let j = self.bit_reverse[i];
            if j > i {
                re.swap(i, j);
                im.swap(i, j);
            }
        }
        let mut len = 2;
        while len <= n {
            let half = len / 2;
            let stride = n / len;
            for start in (0..n).step_by(len) {
                for k in 0..half {
                    let (wr, wi) = self.twiddles[k * stride];
                    let (a, b) = (start + k, start + k + half);
                    let tr = re[b] * wr - im[b] * wi;
                    let ti = re[b] * wi + im[b] * wr;
                    re[b] = re[a] - tr;
                    im[b] = im[a] - ti;
                    re[a] += tr;
                    im[a] += ti;
                }
            }
            len *= 2;
        }
    }
}

/// One triangular mel filter: weights for the bins `start..start + weights.len()`.
struct MelFilter {
    start: usize,
    weights: Vec<f64>,
}

/// Slaney mel scale (librosa `hz_to_mel(htk=False)`): linear below 1 kHz, logarithmic above.
fn hz_to_mel(hz: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    const MIN_LOG_HZ: f64 = 1000.0;
    const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;
    let logstep = (6.4f64).ln() / 27.0;
    if hz >= MIN_LOG_HZ {
        MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / logstep
    } else {
        hz / F_SP
    }
}

/// Inverse of [`hz_to_mel`] (librosa `mel_to_hz(htk=False)`).
fn mel_to_hz(mel: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    const MIN_LOG_HZ: f64 = 1000.0;
    const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;
    let logstep = (6.4f64).ln() / 27.0;
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * (logstep * (mel - MIN_LOG_MEL)).exp()
    } else {
        F_SP * mel
    }
}

/// The dense `[N_MELS, N_FREQS]` filterbank as librosa builds it
/// (`librosa.filters.mel(sr=16000, n_fft=512, n_mels=128, fmin=0, fmax=8000, htk=False,
/// norm="slaney")`), in f64.
pub fn mel_filterbank() -> Vec<f64> {
    let mel_min = hz_to_mel(0.0);
    let mel_max = hz_to_mel(F_MAX);
    let mel_f: Vec<f64> = (0..N_MELS + 2)
        .map(|i| {
            // np.linspace: start + i * step, step = (stop - start) / (num - 1).
            let step = (mel_max - mel_min) / (N_MELS + 1) as f64;
            mel_to_hz(mel_min + i as f64 * step)
        })
        .collect();
    let fft_freqs: Vec<f64> = (0..N_FREQS)
        .map(|k| k as f64 * (f64::from(SAMPLE_RATE) / 2.0) / (N_FREQS - 1) as f64)
        .collect();
    let mut fb = vec![0.0f64; N_MELS * N_FREQS];
    for m in 0..N_MELS {
        let fdiff_lo = mel_f[m + 1] - mel_f[m];
        let fdiff_hi = mel_f[m + 2] - mel_f[m + 1];
        let enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
        for (k, &f) in fft_freqs.iter().enumerate() {
            let lower = -(mel_f[m] - f) / fdiff_lo;
            let upper = (mel_f[m + 2] - f) / fdiff_hi;
            fb[m * N_FREQS + k] = lower.min(upper).max(0.0) * enorm;
        }
    }
    fb
}

/// Computes [`LogMelFeatures`]; holds the window, FFT tables and filterbank so that repeated
/// calls do not rebuild them.
pub struct MelExtractor {
    /// The 400-point symmetric Hann window centred in 512 points.
    window: Vec<f64>,
    fft: Fft,
    filters: Vec<MelFilter>,
}

impl Default for MelExtractor {
    fn default() -> Self {
        Self::new()
    }
}

impl MelExtractor {
    /// Builds the window, FFT tables and mel filterbank.
    pub fn new() -> Self {
        let mut window = vec![0.0f64; N_FFT];
        // torch.stft centres a shorter window: (n_fft - win_length) / 2 zeros on the left.
        let offset = (N_FFT - WIN_LENGTH) / 2;
        for i in 0..WIN_LENGTH {
            // torch.hann_window(400, periodic=False): 0.5 - 0.5 cos(2 pi i / (N - 1)).
            window[offset + i] = 0.5 - 0.5 * (2.0 * PI * i as f64 / (WIN_LENGTH - 1) as f64).cos();
        }
        let dense = mel_filterbank();
        let filters = dense
            .chunks_exact(N_FREQS)
            .map(|row| {
                // Keep only the non-zero span of each triangle.
                let start = row.iter().position(|&w| w != 0.0).unwrap_or(0);
                let end = row.iter().rposition(|&w| w != 0.0).map_or(start, |e| e + 1);
                MelFilter {
                    start,
                    weights: row[start..end].to_vec(),
                }
            })
            .collect();
        Self {
            window,
            fft: Fft::new(N_FFT),
            filters,
        }
    }

    /// Computes normalised log-mel features of 16 kHz mono `samples`.
    ///
    /// Inputs shorter than two hops (320 samples) have fewer than two valid frames; NeMo then
    /// produces all-zero features (its statistics degenerate and the frames are masked), and so
    /// does this.
    pub fn compute(&self, samples: &[f32]) -> Result<LogMelFeatures, FeatureError> {
        if samples.is_empty() {
            return Err(FeatureError::Empty);
        }
        if let Some(index) = samples.iter().position(|s| !s.is_finite()) {
            return Err(FeatureError::NonFinite { index });
        }
        let n = samples.len();
        let n_frames = frame_count(n);
        let n_valid = valid_frame_count(n);

        // Pre-emphasis, with the first sample kept as is.
        let mut emphasised = Vec::with_capacity(n);
        emphasised.push(f64::from(samples[0]));
        for pair in samples.windows(2) {
            emphasised.push(f64::from(pair[1]) - PREEMPHASIS * f64::from(pair[0]));
        }

        // Log-mel energies, mel-major, for every frame (the last one is later zeroed, but its
        // spectrum costs nothing worth saving).
        let mut logmel = vec![0.0f64; N_MELS * n_frames];
        let mut re = vec![0.0f64; N_FFT];
        let mut im = vec![0.0f64; N_FFT];
        let mut power = vec![0.0f64; N_FREQS];
        let pad = (N_FFT / 2) as isize;
        for t in 0..n_frames {
            // Frame t covers original samples [160 t - 256, 160 t + 256); outside is zero padding.
            let origin = (t * HOP_LENGTH) as isize - pad;
            for i in 0..N_FFT {
                let idx = origin + i as isize;
                re[i] = if idx >= 0 && (idx as usize) < n {
                    emphasised[idx as usize] * self.window[i]
                } else {
                    0.0
                };
                im[i] = 0.0;
            }
            self.fft.forward(&mut re, &mut im);
            for k in 0..N_FREQS {
                power[k] = re[k] * re[k] + im[k] * im[k];
            }
            for (m, filter) in self.filters.iter().enumerate() {
                let energy: f64 = filter
                    .weights
                    .iter()
                    .zip(&power[filter.start..])
                    .map(|(w, p)| w * p)
                    .sum();
                logmel[m * n_frames + t] = (energy + LOG_GUARD).ln();
            }
        }

        // Per-bin normalisation over the valid frames, as NeMo's normalize_batch("per_feature").
        let mut data = vec![0.0f32; N_MELS * n_frames];
        if n_valid >= 2 {
            for m in 0..N_MELS {
                let row = &logmel[m * n_frames..m * n_frames + n_valid];
                let mean = row.iter().sum::<f64>() / n_valid as f64;
                let var =
                    row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n_valid - 1) as f64;
                let denom = var.sqrt() + STD_EPSILON;
                let out = &mut data[m * n_frames..m * n_frames + n_valid];
                for (o, v) in out.iter_mut().zip(row) {
                    *o = ((v - mean) / denom) as f32;
                }
            }
        }
        // With one valid frame NeMo's (x - mean) is exactly 0 and with none every frame is
        // masked, so all-zero output is what it produces for n_valid < 2.
        Ok(LogMelFeatures {
            n_mels: N_MELS,
            n_frames,
            n_valid_frames: n_valid,
            data,
        })
    }
}

/// Computes normalised log-mel features of 16 kHz mono `samples` with a fresh [`MelExtractor`].
pub fn log_mel(samples: &[f32]) -> Result<LogMelFeatures, FeatureError> {
    MelExtractor::new().compute(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fft_matches_naive_dft() {
        let n = 64;
        let fft = Fft::new(n);
        let x: Vec<f64> = (0..n).map(|i| ((i * 7 + 3) % 11) as f64 - 5.0).collect();
        let mut re = x.clone();
        let mut im = vec![0.0; n];
        fft.forward(&mut re, &mut im);
        for k in 0..n {
            let (mut sr, mut si) = (0.0, 0.0);
            for (j, &v) in x.iter().enumerate() {
                let a = -2.0 * PI * (j * k) as f64 / n as f64;
                sr += v * a.cos();
                si += v * a.sin();
            }
            assert!((sr - re[k]).abs() < 1e-9 && (si - im[k]).abs() < 1e-9);
        }
    }

    #[test]
    fn mel_scale_round_trips() {
        for hz in [0.0, 500.0, 1000.0, 3000.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9);
        }
    }
}
