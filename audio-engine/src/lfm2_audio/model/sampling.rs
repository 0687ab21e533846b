//! Token and audio-code sampling: greedy, or top-k + temperature from a seeded integer PRNG.
//!
//! One [`AudioSampler`] instance per stream: the engine keeps one for text and one for audio
//! codes, so the audio draws never depend on how many text tokens were sampled (and vice versa).
//!
//! # The exact algorithm (same seed and logits -> same picks on every platform)
//!
//! 1. **Greedy** when `temperature` is not `> 0` (zero, negative or NaN) or `top_k == 1`: the
//!    index of the largest logit, the lowest index on ties, NaNs ignored. No random draw.
//! 2. Otherwise the candidates are the non-NaN logits ordered by (logit descending, index
//!    ascending), truncated to the first `top_k` (`top_k == 0`: no truncation). Exactly `top_k`
//!    candidates survive, ties at the boundary going to the lower index. (liquid-audio keeps
//!    every logit `>=` the k-th value, so it may keep more than `k` on exact ties; ties between
//!    float logits of a trained model are practically absent.)
//! 3. Each candidate `i` gets the weight `w_i = exp((l_i - l_max) / T)` computed in `f64` by
//!    [`portable_exp`] (range reduction and a fixed polynomial using only IEEE-754 `+ - * /`,
//!    which Rust never contracts, so it is bit-identical everywhere; `f64::exp` calls the
//!    platform's libm and is not). When `l_max` is `+inf`, the `+inf` candidates weigh 1 and the
//!    others 0.
//! 4. Weights become integers `q_i = floor(w_i * 2^32)` (`w_i <= 1`, and the top candidate has
//!    `q = 2^32`, so the total `Q` is positive and fits in `u64`).
//! 5. One uniform integer `r` in `[0, Q)` is drawn from the PRNG with Lemire's multiply-shift
//!    method with rejection (unbiased): draw `x`, `m = x * Q` (128-bit); if `low64(m) < Q` and
//!    `low64(m) < (2^64 - Q) mod Q`, draw again; `r = high64(m)`.
//! 6. The pick is the first candidate (in the order of step 2) whose running sum of `q` exceeds
//!    `r`.
//!
//! The PRNG is SplitMix64 (Steele, Lea and Flood 2014): state `s` starts at the seed; each draw
//! does `s += 0x9E3779B97F4A7C15` and returns `z ^ (z >> 31)` where
//! `z = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9`, `z = (z ^ (z >> 27)) * 0x94D049BB133111EB`
//! (wrapping). Greedy picks draw nothing; a sampled pick draws one value (rarely more, on
//! rejection).

/// liquid-audio's S2S (interleaved) audio temperature.
pub const S2S_AUDIO_TEMPERATURE: f32 = 1.0;
/// liquid-audio's S2S (interleaved) audio top-k.
pub const S2S_AUDIO_TOP_K: usize = 4;
/// liquid-audio's TTS (sequential) audio temperature.
pub const TTS_AUDIO_TEMPERATURE: f32 = 0.8;
/// liquid-audio's TTS (sequential) audio top-k.
pub const TTS_AUDIO_TOP_K: usize = 64;
/// Text is greedy by default (temperature 0).
pub const TEXT_TEMPERATURE: f32 = 0.0;
/// Text top-k (1: greedy).
pub const TEXT_TOP_K: usize = 1;

/// How a sampler picks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; not `> 0` means greedy.
    pub temperature: f32,
    /// Candidates kept (the highest logits); 0 keeps all, 1 means greedy.
    pub top_k: usize,
    /// PRNG seed (a fixed seed gives the same samples every run).
    pub seed: u64,
}

impl SamplerConfig {
    /// Always the argmax.
    pub const GREEDY: SamplerConfig = SamplerConfig {
        temperature: 0.0,
        top_k: 1,
        seed: 0,
    };

    /// The default for text: greedy.
    pub fn text() -> SamplerConfig {
        SamplerConfig {
            temperature: TEXT_TEMPERATURE,
            top_k: TEXT_TOP_K,
            seed: 0,
        }
    }

    /// The S2S audio default (temperature 1.0, top-k 4) with `seed`.
    pub fn s2s_audio(seed: u64) -> SamplerConfig {
        SamplerConfig {
            temperature: S2S_AUDIO_TEMPERATURE,
            top_k: S2S_AUDIO_TOP_K,
            seed,
        }
    }

    /// The TTS audio default (temperature 0.8, top-k 64) with `seed`.
    pub fn tts_audio(seed: u64) -> SamplerConfig {
        SamplerConfig {
            temperature: TTS_AUDIO_TEMPERATURE,
            top_k: TTS_AUDIO_TOP_K,
            seed,
        }
    }

    /// Whether picks are the argmax (`temperature` not `> 0`, or `top_k == 1`).
    pub fn is_greedy(&self) -> bool {
        // why: a NaN temperature goes to greedy instead of to NaN weights.
        self.temperature.is_nan() || self.temperature <= 0.0 || self.top_k == 1
    }
}

impl Default for SamplerConfig {
    /// Greedy.
    fn default() -> SamplerConfig {
        SamplerConfig::GREEDY
    }
}

/// Why nothing could be picked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SampleError {
    /// The logits row is empty.
    #[error("cannot sample from an empty logits row")]
    Empty,
    /// Every logit is NaN.
    #[error("every one of the {0} logits is NaN")]
    AllNan(usize),
}

/// A seeded sampler (one per stream: text and audio each have their own).
#[derive(Debug, Clone)]
pub struct AudioSampler {
    config: SamplerConfig,
    rng: SplitMix64,
    /// Reused candidate buffer (avoids an allocation per pick).
    idx: Vec<u32>,
    q: Vec<u64>,
}

impl AudioSampler {
    /// A sampler with `config`, its PRNG seeded with `config.seed`.
    pub fn new(config: SamplerConfig) -> AudioSampler {
        AudioSampler {
            config,
            rng: SplitMix64(config.seed),
            idx: Vec::new(),
            q: Vec::new(),
        }
    }

    #[cfg(feature = "testkit")]
    /// A greedy sampler.
    pub fn greedy() -> AudioSampler {
        AudioSampler::new(SamplerConfig::GREEDY)
    }

    #[cfg(feature = "testkit")]
    /// The configuration.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Whether picks are the argmax.
    pub fn is_greedy(&self) -> bool {
        self.config.is_greedy()
    }

    #[cfg(feature = "testkit")]
    /// The PRNG's state (the seed advanced by one golden-ratio step per draw), for saving a
    /// stream's position.
    pub fn rng_state(&self) -> u64 {
        self.rng.0
    }

    #[cfg(feature = "testkit")]
    /// Restores a state from [`AudioSampler::rng_state`].
    pub fn set_rng_state(&mut self, state: u64) {
        self.rng.0 = state;
    }

    /// Picks an index of `logits` (see the [module docs](self) for the exact algorithm).
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SampleError> {
        if self.is_greedy() {
            return argmax(logits);
        }
        self.idx.clear();
        self.idx
            .extend((0..logits.len() as u32).filter(|&i| !logits[i as usize].is_nan()));
        if self.idx.is_empty() {
            return Err(if logits.is_empty() {
                SampleError::Empty
            } else {
                SampleError::AllNan(logits.len())
            });
        }
        // A strict total order (indices are unique), so the selected set and its order never
        // depend on the sort algorithm.
        let order = |a: &u32, b: &u32| {
            logits[*b as usize]
                .total_cmp(&logits[*a as usize])
                .then(a.cmp(b))
        };
        let k = match self.config.top_k {
            0 => self.idx.len(),
            k => k.min(self.idx.len()),
        };
        if k < self.idx.len() {
            // why: O(n) selection instead of sorting all 2049 codes at every codebook.
            self.idx.select_nth_unstable_by(k - 1, order);
            self.idx.truncate(k);
        }
        self.idx.sort_unstable_by(order);

        let lmax = logits[self.idx[0] as usize];
        let t = f64::from(self.config.temperature);
        self.q.clear();
        for &i in &self.idx {
            let l = logits[i as usize];
            let w = if lmax == f32::INFINITY {
                if l == f32::INFINITY {
                    1.0
                } else {
                    0.0
                }
            } else {
                portable_exp((f64::from(l) - f64::from(lmax)) / t)
            };
            // why: w is in [0, 1]; the cast saturates and maps NaN (impossible here) to 0.
            self.q.push((w * 4_294_967_296.0).floor() as u64);
        }
        let total: u64 = self.q.iter().sum();
        if total == 0 {
            // Unreachable for finite inputs (the top weight is 2^32); keep the best candidate.
            return Ok(self.idx[0]);
        }
        let r = self.rng.below(total);
        let mut acc = 0u64;
        for (&i, &q) in self.idx.iter().zip(&self.q) {
            acc += q;
            if r < acc {
                return Ok(i);
            }
        }
        Ok(self.idx[self.idx.len() - 1])
    }
}

/// Index of the largest logit (lowest index on ties; NaNs ignored).
pub fn argmax(logits: &[f32]) -> Result<u32, SampleError> {
    let mut best: Option<usize> = None;
    for (i, v) in logits.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        if best.is_none_or(|b| *v > logits[b]) {
            best = Some(i);
        }
    }
    match best {
        Some(b) => Ok(b as u32),
        None if logits.is_empty() => Err(SampleError::Empty),
        None => Err(SampleError::AllNan(logits.len())),
    }
}

/// `e^x` for `x <= 0` with only IEEE-754 basic operations, so the result is the same bits on
/// every platform (within ~2 ulp of the true value). `x > 0` is clamped to 0 (the sampler only
/// passes `(l - l_max) / T <= 0`); below -708 (and `-inf`) it returns 0.
pub fn portable_exp(x: f64) -> f64 {
    // Cody-Waite split of ln 2 (fdlibm's, bits 0x3fe62e42fee00000 and 0x3dea39ef35793c76): the
    // high part has 32 trailing zero bits, so `k * LN2_HI` is exact for |k| < 2^20.
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    if x.is_nan() || x < -708.0 {
        return 0.0;
    }
    let x = if x > 0.0 { 0.0 } else { x };
    let k = (x * LOG2_E).round();
    // |r| <= ~0.347; the Taylor series of e^r to degree 13 (Horner form) leaves a remainder
    // r^14/14! < 4e-18, below f64 resolution.
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    for d in (1..=12u32).rev() {
        p = p * r + 1.0 / factorial(d);
    }
    let e_r = p * r + 1.0;
    // why: k is in [-1022, 0] here, so 2^k is a normal f64 built exactly from its exponent.
    let two_k = f64::from_bits(((k as i64 + 1023) as u64) << 52);
    e_r * two_k
}

/// `d!` as f64 (exact for d <= 18).
fn factorial(d: u32) -> f64 {
    (1..=d).fold(1.0, |acc, i| acc * f64::from(i))
}

/// SplitMix64: a small, well-known generator with a 64-bit state.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `[0, n)` (`n > 0`), Lemire's method with rejection (unbiased).
    fn below(&mut self, n: u64) -> u64 {
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            let low = m as u64;
            if low < n {
                let threshold = n.wrapping_neg() % n;
                if low < threshold {
                    continue;
                }
            }
            return (m >> 64) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_exp_is_accurate() {
        let mut worst = 0f64;
        let mut x = -700.0;
        while x <= 0.0 {
            let a = portable_exp(x);
            let b = x.exp();
            worst = worst.max(((a - b) / b).abs());
            x += 0.013_7;
        }
        assert!(worst < 1e-15, "relative error {worst:e}");
        assert_eq!(portable_exp(0.0), 1.0);
        assert_eq!(portable_exp(f64::NEG_INFINITY), 0.0);
    }

    #[test]
    fn splitmix_matches_the_published_sequence() {
        // First outputs of SplitMix64 seeded with 0 (reference C implementation).
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }
}
