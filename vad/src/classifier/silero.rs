//! Silero VAD (v5/v6, the 16 kHz branch) in plain Rust: an STFT as a convolution, four
//! convolutions, one LSTM cell and a 1x1 convolution, over 512-sample frames with 64 samples of
//! context. The weights (`vad/weights/`, float16, 620 KB, embedded) were made by
//! `scripts/vad_silero_fixture.py` from PyPI's `silero-vad` 6.2.3 (its ONNX model; MIT licence,
//! the Silero Team: `vad/weights/LICENSE-silero-vad`).

use std::sync::{Arc, OnceLock};

use super::Classifier;
use crate::VadError;

/// New samples per frame (32 ms at 16 kHz), as the model was trained.
const FRAME: usize = 512;
/// Samples of the previous frame prepended to each window.
const CONTEXT: usize = 64;
/// The window after the model's own reflection padding: 64 + 512 + 64.
const PADDED: usize = CONTEXT + FRAME + CONTEXT;
const N_FFT: usize = 256;
const HOP: usize = 128;
/// Frequency bins: the STFT convolution has 2 * BINS output channels (real, imaginary).
const BINS: usize = N_FFT / 2 + 1;
const HIDDEN: usize = 128;

/// The weights shipped with the crate.
const BUNDLED: &[u8] = include_bytes!("../../weights/silero_vad_16k.safetensors");

/// One convolution's weights: `weight[out][in][k]`, flattened.
struct Conv {
    weight: Vec<f32>,
    bias: Vec<f32>,
    c_in: usize,
    c_out: usize,
    kernel: usize,
}

/// The model's weights, loaded once and shared by every classifier (`Arc`).
pub struct SileroWeights {
    stft: Conv,
    encoder: [Conv; 4],
    weight_ih: Vec<f32>,
    weight_hh: Vec<f32>,
    bias: Vec<f32>,
    final_weight: Vec<f32>,
    final_bias: f32,
}

/// A tensor of a safetensors file as f32.
fn tensor(
    header: &serde_json::Map<String, serde_json::Value>,
    body: &[u8],
    name: &str,
    shape: &[usize],
) -> Result<Vec<f32>, VadError> {
    let bad = |what: String| VadError::InvalidWeights(format!("{name}: {what}"));
    let info = header.get(name).ok_or_else(|| bad("missing".into()))?;
    let dims: Vec<usize> = info["shape"]
        .as_array()
        .ok_or_else(|| bad("no shape".into()))?
        .iter()
        .map(|d| d.as_u64().map(|d| d as usize))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("bad shape".into()))?;
    if dims != shape {
        return Err(bad(format!("shape {dims:?}, expected {shape:?}")));
    }
    let offsets = info["data_offsets"]
        .as_array()
        .ok_or_else(|| bad("no data_offsets".into()))?;
    let (start, end) = match (
        offsets.first().and_then(|v| v.as_u64()),
        offsets.get(1).and_then(|v| v.as_u64()),
    ) {
        (Some(s), Some(e)) if s <= e && e as usize <= body.len() => (s as usize, e as usize),
        _ => return Err(bad("data_offsets out of the file".into())),
    };
    let bytes = &body[start..end];
    let count: usize = shape.iter().product();
    let values: Vec<f32> = match info["dtype"].as_str() {
        Some("F32") if bytes.len() == 4 * count => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Some("F16") if bytes.len() == 2 * count => bytes
            .chunks_exact(2)
            .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        other => {
            return Err(bad(format!(
                "dtype {other:?} with {} bytes for {count} values",
                bytes.len()
            )))
        }
    };
    Ok(values)
}

/// IEEE half to single precision (the fixture stores the weights as f16 to stay small).
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let mant = u32::from(h & 0x3ff);
    let bits = match (exp, mant) {
        (0, 0) => sign,
        // Subnormal: value = mant * 2^-24.
        (0, _) => {
            let magnitude = mant as f32 * 2f32.powi(-24);
            return if sign != 0 { -magnitude } else { magnitude };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000,
        _ => sign | ((exp + 127 - 15) << 23) | (mant << 13),
    };
    f32::from_bits(bits)
}

impl SileroWeights {
    /// The weights shipped with the crate, parsed once per process and shared.
    pub fn bundled() -> Arc<SileroWeights> {
        static WEIGHTS: OnceLock<Arc<SileroWeights>> = OnceLock::new();
        WEIGHTS
            .get_or_init(|| {
                // why expect: the file is part of the crate, and a test loads it; it is not input.
                SileroWeights::from_safetensors(BUNDLED).expect("the bundled Silero weights load")
            })
            .clone()
    }

    /// Reads the weights from a safetensors file's bytes (F16 or F32 tensors named as in the
    /// package's `tinygrad_model.py`: `stft_conv.weight`, `conv1..4.{weight,bias}`,
    /// `lstm_cell.{weight_ih,weight_hh,bias_ih,bias_hh}`, `final_conv.{weight,bias}`).
    pub fn from_safetensors(bytes: &[u8]) -> Result<Arc<SileroWeights>, VadError> {
        let bad = |what: &str| VadError::InvalidWeights(what.to_string());
        let len = bytes
            .get(..8)
            .ok_or_else(|| bad("shorter than a safetensors header"))?;
        let len = u64::from_le_bytes(len.try_into().expect("8 bytes")) as usize;
        let header_end = 8usize
            .checked_add(len)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad("header past the end"))?;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..header_end])
            .map_err(|e| VadError::InvalidWeights(e.to_string()))?;
        let header = header
            .as_object()
            .ok_or_else(|| bad("header is not an object"))?;
        let body = &bytes[header_end..];
        let t = |name: &str, shape: &[usize]| tensor(header, body, name, shape);
        let conv =
            |name: &str, c_out: usize, c_in: usize, kernel: usize| -> Result<Conv, VadError> {
                Ok(Conv {
                    weight: t(&format!("{name}.weight"), &[c_out, c_in, kernel])?,
                    bias: t(&format!("{name}.bias"), &[c_out])?,
                    c_in,
                    c_out,
                    kernel,
                })
            };
        let stft = Conv {
            weight: t("stft_conv.weight", &[2 * BINS, 1, N_FFT])?,
            bias: vec![0.0; 2 * BINS],
            c_in: 1,
            c_out: 2 * BINS,
            kernel: N_FFT,
        };
        let bias_ih = t("lstm_cell.bias_ih", &[4 * HIDDEN])?;
        let bias_hh = t("lstm_cell.bias_hh", &[4 * HIDDEN])?;
        Ok(Arc::new(SileroWeights {
            stft,
            encoder: [
                conv("conv1", 128, BINS, 3)?,
                conv("conv2", 64, 128, 3)?,
                conv("conv3", 64, 64, 3)?,
                conv("conv4", HIDDEN, 64, 3)?,
            ],
            weight_ih: t("lstm_cell.weight_ih", &[4 * HIDDEN, HIDDEN])?,
            weight_hh: t("lstm_cell.weight_hh", &[4 * HIDDEN, HIDDEN])?,
            // The two biases are only ever added together.
            bias: bias_ih.iter().zip(&bias_hh).map(|(a, b)| a + b).collect(),
            final_weight: t("final_conv.weight", &[1, HIDDEN, 1])?,
            final_bias: t("final_conv.bias", &[1])?[0],
        }))
    }
}

/// `y[o][t] = b[o] + sum_i,k w[o][i][k] * x[i][t * stride + k - pad]` (zero padding), with
/// `x` as `[c_in][len]`; returns `[c_out][len_out]`.
fn conv1d(conv: &Conv, x: &[f32], len: usize, stride: usize, pad: usize) -> (Vec<f32>, usize) {
    let len_out = (len + 2 * pad - conv.kernel) / stride + 1;
    let patch = conv.c_in * conv.kernel;
    // why im2col: each output is then one contiguous dot product with a weight row, which is
    // what keeps this fast (also unoptimised, in the debug-build tests).
    let mut cols = vec![0.0; len_out * patch];
    for t in 0..len_out {
        for i in 0..conv.c_in {
            for k in 0..conv.kernel {
                // Position in the unpadded input; outside it the padding is zero.
                let at = (t * stride + k).wrapping_sub(pad);
                if at < len {
                    cols[t * patch + i * conv.kernel + k] = x[i * len + at];
                }
            }
        }
    }
    let mut y = vec![0.0; conv.c_out * len_out];
    for (o, (row, bias)) in conv.weight.chunks_exact(patch).zip(&conv.bias).enumerate() {
        for (t, col) in cols.chunks_exact(patch).enumerate() {
            y[o * len_out + t] = bias + dot(row, col);
        }
    }
    (y, len_out)
}

/// A dot product in eight independent lanes (vectorises when optimised, and an eighth of the
/// loop overhead when not).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a8.zip(b8) {
        lanes[0] += x[0] * y[0];
        lanes[1] += x[1] * y[1];
        lanes[2] += x[2] * y[2];
        lanes[3] += x[3] * y[3];
        lanes[4] += x[4] * y[4];
        lanes[5] += x[5] * y[5];
        lanes[6] += x[6] * y[6];
        lanes[7] += x[7] * y[7];
    }
    lanes.iter().sum::<f32>() + tail
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Silero VAD over 32 ms frames; a speech probability, so `VadConfig::threshold` applies as
/// is (Silero's own default threshold is also 0.5).
pub struct SileroClassifier {
    weights: Arc<SileroWeights>,
    /// The last CONTEXT samples of the previous frame.
    context: [f32; CONTEXT],
    h: Vec<f32>,
    c: Vec<f32>,
}

impl SileroClassifier {
    /// A classifier with fresh state over shared weights.
    pub fn new(weights: Arc<SileroWeights>) -> SileroClassifier {
        SileroClassifier {
            weights,
            context: [0.0; CONTEXT],
            h: vec![0.0; HIDDEN],
            c: vec![0.0; HIDDEN],
        }
    }
}

impl Default for SileroClassifier {
    /// Over the bundled weights.
    fn default() -> Self {
        SileroClassifier::new(SileroWeights::bundled())
    }
}

impl Classifier for SileroClassifier {
    fn name(&self) -> &'static str {
        "silero"
    }

    fn frame_len(&self) -> usize {
        FRAME
    }

    fn speech_probability(&mut self, frame: &[f32]) -> f32 {
        debug_assert_eq!(frame.len(), FRAME);
        let w = &*self.weights;
        // context + frame, then reflection padding on the right (the edge sample not repeated).
        let mut x = [0.0f32; PADDED];
        x[..CONTEXT].copy_from_slice(&self.context);
        x[CONTEXT..CONTEXT + FRAME].copy_from_slice(frame);
        let last = CONTEXT + FRAME - 1;
        for i in 0..CONTEXT {
            x[last + 1 + i] = x[last - 1 - i];
        }
        self.context.copy_from_slice(&frame[FRAME - CONTEXT..]);

        let (spec, frames) = conv1d(&w.stft, &x, PADDED, HOP, 0);
        let mut mag = vec![0.0; BINS * frames];
        for (m, (re, im)) in mag
            .iter_mut()
            .zip(spec[..BINS * frames].iter().zip(&spec[BINS * frames..]))
        {
            *m = (re * re + im * im).sqrt();
        }
        let (mut h, mut len) = (mag, frames);
        for (conv, stride) in w.encoder.iter().zip([1, 2, 2, 1]) {
            let (y, l) = conv1d(conv, &h, len, stride, 1);
            h = y.into_iter().map(|v| v.max(0.0)).collect();
            len = l;
        }
        debug_assert_eq!(len, 1, "four frames reduce to one");

        // LSTM cell; gates in PyTorch's order: input, forget, cell, output.
        let mut gates = w.bias.clone();
        for (g, gate) in gates.iter_mut().enumerate() {
            let wi = &w.weight_ih[g * HIDDEN..][..HIDDEN];
            let wh = &w.weight_hh[g * HIDDEN..][..HIDDEN];
            *gate += dot(wi, &h) + dot(wh, &self.h);
        }
        for j in 0..HIDDEN {
            let (i, f, g, o) = (
                gates[j],
                gates[HIDDEN + j],
                gates[2 * HIDDEN + j],
                gates[3 * HIDDEN + j],
            );
            self.c[j] = sigmoid(f) * self.c[j] + sigmoid(i) * g.tanh();
            self.h[j] = sigmoid(o) * self.c[j].tanh();
        }
        let logit = w.final_bias
            + w.final_weight
                .iter()
                .zip(&self.h)
                .map(|(a, b)| a * b.max(0.0))
                .sum::<f32>();
        sigmoid(logit)
    }

    fn reset(&mut self) {
        self.context = [0.0; CONTEXT];
        self.h.fill(0.0);
        self.c.fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::f16_to_f32;

    #[test]
    fn half_precision_values() {
        for (bits, value) in [
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x0001, 5.960_464_5e-8),
            (0x8000, -0.0),
        ] {
            assert_eq!(f16_to_f32(bits), value, "{bits:#06x}");
        }
        assert!(f16_to_f32(0x7c00).is_infinite());
        assert!(f16_to_f32(0x7e00).is_nan());
    }
}
