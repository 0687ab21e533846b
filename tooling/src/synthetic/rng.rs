//! Platform-independent number sources for the synthetic checkpoint: SplitMix64 for integers and
//! floats built from them with IEEE `+ - * /` and `sqrt` only, which are exactly rounded on every
//! platform, so the same seed gives the same bytes everywhere (no libm `sin`/`exp`/`ln`).

/// SplitMix64 (Steele, Lea and Flood): a 64-bit state stepped by a Weyl increment and mixed.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1): 53 random bits scaled by a power of two, so the conversion is exact.
    pub(crate) fn symmetric(&mut self) -> f64 {
        let bits = (self.next_u64() >> 11) as f64;
        bits * (2.0 / 9_007_199_254_740_992.0) - 1.0
    }
}

/// FNV-1a over `bytes`: gives every tensor its own stream, so adding or reordering tensors never
/// changes the values of the others.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// The stream of tensor `name` under `seed`.
pub(crate) fn tensor_stream(seed: u64, name: &str) -> SplitMix64 {
    let mut mix = SplitMix64::new(seed ^ fnv1a(name.as_bytes()));
    // One step decorrelates seeds that differ in few bits from names that differ in few bits.
    let s = mix.next_u64();
    SplitMix64::new(s)
}

/// `cos(2π k / n)` from a Taylor series on a reduced argument, with exact integer range
/// reduction: deterministic across platforms and accurate to ~1e-16, far below the f32 rounding
/// the window is stored with.
pub(crate) fn cos_two_pi_frac(k: u64, n: u64) -> f64 {
    assert!(n > 0, "period must be positive");
    let k = k % n;
    // 4k / n = quadrant + r / n with r in [0, n): angle = quadrant * π/2 + θ, θ = (π/2) r / n.
    let quadrant = (4 * k) / n;
    let r = 4 * k - quadrant * n;
    let theta = std::f64::consts::FRAC_PI_2 * (r as f64) / (n as f64);
    let (s, c) = sin_cos_small(theta);
    match quadrant {
        0 => c,
        1 => -s,
        2 => -c,
        _ => s,
    }
}

/// sin and cos of `x` in [0, π/2] by their Maclaurin series up to x^27 (remainder < 1e-20).
fn sin_cos_small(x: f64) -> (f64, f64) {
    let x2 = x * x;
    // Horner from the highest term: sin = x(1 - x²/(2·3)(1 - x²/(4·5)(1 - ...))).
    let mut s = 1.0;
    let mut c = 1.0;
    let mut i = 13u32;
    while i > 0 {
        let si = f64::from(2 * i * (2 * i + 1));
        let ci = f64::from((2 * i - 1) * (2 * i));
        s = 1.0 - x2 / si * s;
        c = 1.0 - x2 / ci * c;
        i -= 1;
    }
    (x * s, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_matches_libm() {
        for n in [7u64, 1280, 1000] {
            for k in 0..n {
                let want = (2.0 * std::f64::consts::PI * k as f64 / n as f64).cos();
                let got = cos_two_pi_frac(k, n);
                assert!((want - got).abs() < 1e-14, "k={k} n={n}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn symmetric_stays_in_range_and_varies() {
        let mut r = SplitMix64::new(1);
        let v: Vec<f64> = (0..1000).map(|_| r.symmetric()).collect();
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.1, "mean {mean}");
        assert!(v.iter().any(|&x| x > 0.9) && v.iter().any(|&x| x < -0.9));
    }
}
