//! A streaming rational resampler (windowed sinc) to the classifiers' 16 kHz.
//!
//! Why our own: the segmenter needs output that depends only on the absolute sample index, so
//! that any chunking of the input gives the same frames (and so the same events); a polyphase
//! FIR evaluated at exact rational positions gives that, and output sample `n` lies exactly at
//! input time `n * in_rate / out_rate` (the filter is centred), so timestamps need no latency
//! correction.

use crate::VadError;

/// The rate every classifier of this crate runs at.
pub const CLASSIFIER_RATE: u32 = 16_000;

/// Lowest and highest input rates accepted (telephone to studio rates).
const MIN_RATE: u32 = 8_000;
const MAX_RATE: u32 = 192_000;
/// Taps on each side of the centre (32 taps a phase: ample for a VAD's features).
const HALF_TAPS: usize = 16;
/// Most polyphase phases kept (the table is `phases * 2 * HALF_TAPS` floats); 44.1 kHz needs
/// 160, 22.05 kHz 320, 11.025 kHz 640.
const MAX_PHASES: u64 = 1024;
/// The pass band ends this fraction of the way to the lower Nyquist frequency (the rest is the
/// transition band, so that little folds back).
const CUTOFF: f64 = 0.9;

/// Converts a stream at `in_rate` to `out_rate` (up or down), in chunks of any size.
#[derive(Debug, Clone)]
pub struct Resampler {
    /// Output samples per `down` input samples: output `n` is at input position `n * down / up`.
    up: u64,
    down: u64,
    /// `phases[p]` holds the `2 * HALF_TAPS` weights for fractional position `p / up`.
    phases: Vec<f32>,
    /// Input samples not yet consumed; `pending[0]` is input index `pending_start`.
    pending: Vec<f32>,
    /// May be negative: the stream is padded with zeros before its first sample.
    pending_start: i64,
    /// Index of the next output sample.
    next_out: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Resampler {
    /// A resampler from `in_rate` to `out_rate`; both must lie in 8..=192 kHz with a ratio
    /// that reduces to at most 1024 phases (every common audio rate does).
    pub fn new(in_rate: u32, out_rate: u32) -> Result<Resampler, VadError> {
        for rate in [in_rate, out_rate] {
            if !(MIN_RATE..=MAX_RATE).contains(&rate) {
                return Err(VadError::UnsupportedSampleRate {
                    rate,
                    reason: "rates from 8000 to 192000 Hz are supported",
                });
            }
        }
        let g = gcd(u64::from(in_rate), u64::from(out_rate));
        let (up, down) = (u64::from(out_rate) / g, u64::from(in_rate) / g);
        if up > MAX_PHASES {
            return Err(VadError::UnsupportedSampleRate {
                rate: in_rate,
                reason: "its ratio to 16000 Hz needs too many filter phases",
            });
        }
        // Cut-off relative to the input's Nyquist frequency: the lower of the two.
        let fc = CUTOFF * (up as f64 / down as f64).min(1.0);
        let taps = 2 * HALF_TAPS;
        let mut phases = Vec::with_capacity(up as usize * taps);
        for p in 0..up {
            let frac = p as f64 / up as f64;
            let start = phases.len();
            for j in 0..taps {
                // Tap j reads input index base - HALF_TAPS + 1 + j; its distance to the output
                // position base + frac:
                let x = (j as f64 - (HALF_TAPS as f64 - 1.0)) - frac;
                let sinc = if x == 0.0 {
                    1.0
                } else {
                    (std::f64::consts::PI * fc * x).sin() / (std::f64::consts::PI * fc * x)
                };
                // Blackman window over the kernel's span.
                let w = x / HALF_TAPS as f64;
                let window = if w.abs() >= 1.0 {
                    0.0
                } else {
                    let t = std::f64::consts::PI * (w + 1.0);
                    0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos()
                };
                phases.push(sinc * window);
            }
            // Unit gain at DC for every phase, so silence and offsets stay exact.
            let sum: f64 = phases[start..].iter().sum();
            for w in &mut phases[start..] {
                *w /= sum;
            }
        }
        Ok(Resampler {
            up,
            down,
            phases: phases.into_iter().map(|w| w as f32).collect(),
            pending: vec![0.0; HALF_TAPS - 1],
            pending_start: -(HALF_TAPS as i64 - 1),
            next_out: 0,
        })
    }

    /// Feeds `input` and appends every output sample whose filter window is now complete.
    pub fn process(&mut self, input: &[f32], out: &mut Vec<f32>) {
        self.pending.extend_from_slice(input);
        let taps = 2 * HALF_TAPS;
        let available_end = self.pending_start + self.pending.len() as i64;
        loop {
            let pos = self.next_out * self.down;
            let base = (pos / self.up) as i64;
            let phase = (pos % self.up) as usize;
            let first = base - (HALF_TAPS as i64 - 1);
            if first + taps as i64 > available_end {
                break;
            }
            let at = (first - self.pending_start) as usize;
            let weights = &self.phases[phase * taps..(phase + 1) * taps];
            let sample: f32 = self.pending[at..at + taps]
                .iter()
                .zip(weights)
                .map(|(s, w)| s * w)
                .sum();
            out.push(sample);
            self.next_out += 1;
        }
        // Drop what no later output reads.
        let next_first = (self.next_out * self.down / self.up) as i64 - (HALF_TAPS as i64 - 1);
        let drop = (next_first - self.pending_start).clamp(0, self.pending.len() as i64) as usize;
        self.pending.drain(..drop);
        self.pending_start += drop as i64;
    }

    /// Forgets the stream: the next sample is input index 0 again.
    pub fn reset(&mut self) {
        self.pending.clear();
        self.pending.resize(HALF_TAPS - 1, 0.0);
        self.pending_start = -(HALF_TAPS as i64 - 1);
        self.next_out = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, hz: f32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin() * 0.5)
            .collect()
    }

    #[test]
    fn a_tone_keeps_its_frequency_and_level() {
        for rate in [24_000, 22_050, 44_100, 8_000, 48_000] {
            let input = tone(rate, 440.0, rate as usize);
            let mut r = Resampler::new(rate, CLASSIFIER_RATE).unwrap();
            let mut out = Vec::new();
            r.process(&input, &mut out);
            // One second in, all but the filter's look-ahead out.
            assert!(
                out.len() <= 16_000 && out.len() > 16_000 - 2 * HALF_TAPS * 3,
                "{rate}: {}",
                out.len()
            );
            let expect = tone(CLASSIFIER_RATE, 440.0, out.len());
            // Skip the start, where the zero padding is inside the filter window.
            let err = out[100..]
                .iter()
                .zip(&expect[100..])
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(err < 0.01, "{rate} Hz: max error {err}");
        }
    }

    #[test]
    fn chunking_does_not_change_the_output() {
        let input = tone(24_000, 1234.0, 9_000);
        let mut whole = Vec::new();
        Resampler::new(24_000, CLASSIFIER_RATE)
            .unwrap()
            .process(&input, &mut whole);
        for chunk in [1, 7, 480] {
            let mut r = Resampler::new(24_000, CLASSIFIER_RATE).unwrap();
            let mut out = Vec::new();
            for c in input.chunks(chunk) {
                r.process(c, &mut out);
            }
            assert_eq!(out, whole, "chunks of {chunk}");
        }
    }

    #[test]
    fn odd_rates_are_errors() {
        assert!(Resampler::new(0, CLASSIFIER_RATE).is_err());
        assert!(Resampler::new(400_000, CLASSIFIER_RATE).is_err());
        // 16001 and 16000 are coprime: 16000 phases.
        assert!(Resampler::new(16_001, CLASSIFIER_RATE).is_err());
    }
}
