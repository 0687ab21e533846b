//! smart-turn v3.2's network in plain Rust, with the quantization of the ONNX model it comes
//! from (`smart-turn-v3.2-cpu.onnx`, QDQ form): int8 weights with a scale per output channel
//! and, at each of the graph's 78 QuantizeLinear/DequantizeLinear pairs, the activation
//! rounded to its uint8 grid (`q = clamp(round_half_even(x / scale) + zero_point, 0, 255)`,
//! then `(q - zero_point) * scale`). Every matrix product multiplies two such quantized
//! operands, so it is computed on their integers (exact in f32 while the sums stay under 2^24)
//! and scaled once, as onnxruntime's integer kernels do.
//!
//! Shapes: features `[80][800]` -> conv1 (k3, pad 1) + GELU -> conv2 (k3, stride 2, pad 1) +
//! GELU -> `[400][384]` + positions -> four pre-norm layers (6 heads of 64, FFN 1536, GELU)
//! -> LayerNorm -> attention pooling over time -> 384 -> 256 (LayerNorm, GELU) -> 64 (GELU)
//! -> 1 -> sigmoid.

use std::collections::HashMap;

use super::gemm::{matmul, View};
use crate::VadError;

const WIDTH: usize = 384;
const HEADS: usize = 6;
const HEAD_DIM: usize = WIDTH / HEADS;
const FFN: usize = 1536;
const LAYERS: usize = 4;
const POSITIONS: usize = 400;
const MELS: usize = super::features::MELS;
const FRAMES: usize = super::features::FRAMES;
const POOL: usize = 256;
const CLS: [usize; 3] = [256, 64, 1];

/// An activation's uint8 grid.
#[derive(Debug, Clone, Copy)]
struct Quant {
    scale: f32,
    zero_point: f32,
}

impl Quant {
    /// `q - zero_point` of `x` on the grid (an integer, as f32).
    fn level(self, x: f32) -> f32 {
        // Clamped first (the grid is 0..=255 around the zero point), then rounded half to even
        // by the 1.5 * 2^23 trick: exact for |v| < 2^22, and it vectorises (round_ties_even
        // is a libm call per value here).
        const MAGIC: f32 = 12_582_912.0;
        let v = (x / self.scale).clamp(-self.zero_point - 1.0, 256.0 - self.zero_point);
        let r = (v + MAGIC) - MAGIC;
        (r + self.zero_point).clamp(0.0, 255.0) - self.zero_point
    }

    /// The levels of a whole tensor.
    fn levels(self, x: &[f32]) -> Vec<f32> {
        x.iter().map(|&v| self.level(v)).collect()
    }

    /// `x` rounded to the grid, in place (quantize then dequantize).
    fn round(self, x: &mut [f32]) {
        for v in x {
            *v = self.level(*v) * self.scale;
        }
    }
}

/// A quantized linear map: int8 weights (kept as f32 integers) `[out][in]`, a scale per output.
struct Linear {
    weight: Vec<f32>,
    scale: Vec<f32>,
    bias: Option<Vec<f32>>,
    n_out: usize,
    n_in: usize,
    /// The grid of the product (before the bias, where the graph adds it after).
    out: Quant,
}

impl Linear {
    /// `levels` (`rows x n_in`, integers on grid `input`) times the weights: the product's
    /// values, `rows x n_out`, bias not added.
    fn product(&self, levels: &[f32], rows: usize, input: Quant) -> Vec<f32> {
        let mut y = vec![0.0; rows * self.n_out];
        matmul(
            View::rows(levels, rows, self.n_in),
            View::rows(&self.weight, self.n_out, self.n_in).t(),
            &mut y,
            self.n_out,
        );
        for row in y.chunks_exact_mut(self.n_out) {
            for (v, s) in row.iter_mut().zip(&self.scale) {
                *v *= input.scale * s;
            }
        }
        y
    }

    /// The ONNX `MatMul -> Q/DQ -> Add(bias)` pattern.
    fn forward(&self, levels: &[f32], rows: usize, input: Quant) -> Vec<f32> {
        let mut y = self.product(levels, rows, input);
        self.out.round(&mut y);
        if let Some(bias) = &self.bias {
            for row in y.chunks_exact_mut(self.n_out) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        }
        y
    }

    /// The ONNX `Gemm(bias) -> Q/DQ` and `Conv(bias) -> Q/DQ` pattern: the bias before the
    /// rounding.
    fn forward_bias_inside(&self, levels: &[f32], rows: usize, input: Quant) -> Vec<f32> {
        let mut y = self.product(levels, rows, input);
        if let Some(bias) = &self.bias {
            for row in y.chunks_exact_mut(self.n_out) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        }
        self.out.round(&mut y);
        y
    }
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl Norm {
    /// LayerNorm over rows of `weight.len()` (epsilon 1e-5), in place.
    fn apply(&self, x: &mut [f32]) {
        let n = self.weight.len();
        for row in x.chunks_exact_mut(n) {
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
            let var = row
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / n as f64;
            let inv = 1.0 / (var + 1e-5).sqrt();
            for ((v, w), b) in row.iter_mut().zip(&self.weight).zip(&self.bias) {
                *v = ((f64::from(*v) - mean) * inv) as f32 * w + b;
            }
        }
    }
}

struct Layer {
    ln1: Norm,
    ln1_q: Quant,
    q: Linear,
    k: Linear,
    v: Linear,
    q_scale: f32,
    k_scale: f32,
    q_scaled: Quant,
    k_scaled: Quant,
    v_heads: Quant,
    scores: Quant,
    probs: Quant,
    attn: Quant,
    attn_merged: Quant,
    o: Linear,
    ln2: Norm,
    ln2_q: Quant,
    fc1: Linear,
    gelu: Quant,
    fc2: Linear,
}

/// smart-turn v3.2's weights, converted from the pipecat-ai wheel by
/// `scripts/smart_turn_weights.py` (see [`crate::SmartTurn`]).
pub struct SmartTurnWeights {
    input: Quant,
    conv1: Linear,
    gelu1: Quant,
    conv2: Linear,
    positions: Vec<f32>,
    layers: Vec<Layer>,
    ln_post: Norm,
    ln_post_q: Quant,
    pool1: Linear,
    pool_tanh: Quant,
    pool2: Linear,
    pooled: Quant,
    cls0: Linear,
    cls_ln: Norm,
    cls_gelu1: Quant,
    cls4: Linear,
    cls_gelu2: Quant,
    cls6: Linear,
}

/// A safetensors file: its header and body.
struct Tensors<'a> {
    header: serde_json::Map<String, serde_json::Value>,
    body: &'a [u8],
}

fn bad(what: impl std::fmt::Display) -> VadError {
    VadError::InvalidWeights(format!("smart-turn: {what}"))
}

impl<'a> Tensors<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Tensors<'a>, VadError> {
        let len = bytes
            .get(..8)
            .ok_or_else(|| bad("shorter than a safetensors header"))?;
        let len = u64::from_le_bytes(len.try_into().map_err(|_| bad("header length"))?);
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(8))
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad("header past the end"))?;
        let header: serde_json::Value =
            serde_json::from_slice(&bytes[8..end]).map_err(|e| bad(e.to_string()))?;
        let serde_json::Value::Object(header) = header else {
            return Err(bad("header is not an object"));
        };
        Ok(Tensors {
            header,
            body: &bytes[end..],
        })
    }

    /// A tensor's values as f32 (F32, I8 and U8 stored), with its shape checked.
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, VadError> {
        let e = |what: String| bad(format!("{name}: {what}"));
        let info = self.header.get(name).ok_or_else(|| e("missing".into()))?;
        let dims: Option<Vec<usize>> = info["shape"].as_array().and_then(|a| {
            a.iter()
                .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                .collect()
        });
        if dims.as_deref() != Some(shape) {
            return Err(e(format!("shape {dims:?}, expected {shape:?}")));
        }
        let offsets = info["data_offsets"].as_array();
        let (start, end) = match offsets.map(|o| (o.first(), o.get(1))) {
            Some((Some(s), Some(t))) => (
                s.as_u64().and_then(|v| usize::try_from(v).ok()),
                t.as_u64().and_then(|v| usize::try_from(v).ok()),
            ),
            _ => (None, None),
        };
        let bytes = match (start, end) {
            (Some(s), Some(t)) if s <= t && t <= self.body.len() => &self.body[s..t],
            _ => return Err(e("data_offsets out of the file".into())),
        };
        let count: usize = shape.iter().product();
        match info["dtype"].as_str() {
            Some("F32") if bytes.len() == 4 * count => Ok(bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()),
            Some("I8") if bytes.len() == count => {
                Ok(bytes.iter().map(|&b| f32::from(b as i8)).collect())
            }
            Some("U8") if bytes.len() == count => Ok(bytes.iter().map(|&b| f32::from(b)).collect()),
            other => Err(e(format!(
                "dtype {other:?} with {} bytes for {count} values",
                bytes.len()
            ))),
        }
    }
}

impl SmartTurnWeights {
    /// Reads the converted weight file's bytes (`scripts/smart_turn_weights.py` writes it).
    pub fn from_safetensors(bytes: &[u8]) -> Result<SmartTurnWeights, VadError> {
        let t = Tensors::parse(bytes)?;
        // The activation grids: names in the metadata, scales and zero points in two tensors.
        let names: Vec<String> = t
            .header
            .get("__metadata__")
            .and_then(|m| m.get("activations"))
            .and_then(|a| a.as_str())
            .and_then(|s| serde_json::from_str(s).ok())
            .ok_or_else(|| bad("no activation names in the metadata"))?;
        let scales = t.get("act.scale", &[names.len()])?;
        let zero_points = t.get("act.zero_point", &[names.len()])?;
        let quants: HashMap<&str, Quant> = names
            .iter()
            .zip(scales.iter().zip(&zero_points))
            .map(|(n, (&scale, &zero_point))| (n.as_str(), Quant { scale, zero_point }))
            .collect();
        let quant = |name: &str| -> Result<Quant, VadError> {
            let q = *quants
                .get(name)
                .ok_or_else(|| bad(format!("no grid for activation {name}")))?;
            if !(q.scale.is_finite() && q.scale > 0.0) {
                return Err(bad(format!("activation {name}: scale {}", q.scale)));
            }
            Ok(q)
        };
        let norm = |name: &str, n: usize| -> Result<Norm, VadError> {
            Ok(Norm {
                weight: t.get(&format!("{name}.weight"), &[n])?,
                bias: t.get(&format!("{name}.bias"), &[n])?,
            })
        };
        // A linear map; `shape` is the weight's stored shape ([out, in] or [out, in, k]).
        let linear = |name: &str, shape: &[usize], bias: bool, out: Quant| {
            let n_out = shape[0];
            let n_in = shape[1..].iter().product();
            let weight = t.get(&format!("{name}.weight"), shape)?;
            if weight.iter().any(|w| !(-128.0..=127.0).contains(w)) {
                return Err(bad(format!("{name}: weights are not int8")));
            }
            Ok::<_, VadError>(Linear {
                weight,
                scale: t.get(&format!("{name}.scale"), &[n_out])?,
                bias: if bias {
                    Some(t.get(&format!("{name}.bias"), &[n_out])?)
                } else {
                    None
                },
                n_out,
                n_in,
                out,
            })
        };
        let mut layers = Vec::with_capacity(LAYERS);
        for i in 0..LAYERS {
            let p = |s: &str| format!("layers.{i}.{s}");
            let qk = t.get(&p("qk_scale"), &[2])?;
            let sq = [WIDTH, WIDTH];
            layers.push(Layer {
                ln1: norm(&p("ln1"), WIDTH)?,
                ln1_q: quant(&p("ln1"))?,
                q: linear(&p("q"), &sq, true, quant(&p("q"))?)?,
                k: linear(&p("k"), &sq, false, quant(&p("k"))?)?,
                v: linear(&p("v"), &sq, true, quant(&p("v"))?)?,
                q_scale: qk[0],
                k_scale: qk[1],
                q_scaled: quant(&p("q_scaled"))?,
                k_scaled: quant(&p("k_scaled"))?,
                v_heads: quant(&p("v_heads"))?,
                scores: quant(&p("scores"))?,
                probs: quant(&p("probs"))?,
                attn: quant(&p("attn"))?,
                attn_merged: quant(&p("attn_merged"))?,
                o: linear(&p("o"), &sq, true, quant(&p("o"))?)?,
                ln2: norm(&p("ln2"), WIDTH)?,
                ln2_q: quant(&p("ln2"))?,
                fc1: linear(&p("fc1"), &[FFN, WIDTH], true, quant(&p("fc1"))?)?,
                gelu: quant(&p("gelu"))?,
                fc2: linear(&p("fc2"), &[WIDTH, FFN], true, quant(&p("fc2"))?)?,
            });
        }
        Ok(SmartTurnWeights {
            input: quant("input")?,
            conv1: linear("conv1", &[WIDTH, MELS, 3], true, quant("conv1")?)?,
            gelu1: quant("gelu1")?,
            conv2: linear("conv2", &[WIDTH, WIDTH, 3], true, quant("conv2")?)?,
            positions: t.get("positions", &[POSITIONS, WIDTH])?,
            layers,
            ln_post: norm("ln_post", WIDTH)?,
            ln_post_q: quant("ln_post")?,
            pool1: linear("pool1", &[POOL, WIDTH], true, quant("pool1")?)?,
            pool_tanh: quant("pool_tanh")?,
            pool2: linear("pool2", &[1, POOL], true, quant("pool2")?)?,
            pooled: quant("pooled")?,
            cls0: linear("cls0", &[CLS[0], WIDTH], true, quant("cls0")?)?,
            cls_ln: norm("cls_ln", CLS[0])?,
            cls_gelu1: quant("cls_gelu1")?,
            cls4: linear("cls4", &[CLS[1], CLS[0]], true, quant("cls4")?)?,
            cls_gelu2: quant("cls_gelu2")?,
            cls6: linear("cls6", &[CLS[2], CLS[1]], true, quant("cls6")?)?,
        })
    }

    /// P(turn complete) for `[MELS][FRAMES]` features.
    pub(crate) fn probability(&self, features: &[f32]) -> f32 {
        debug_assert_eq!(features.len(), MELS * FRAMES);
        // conv1 over the quantized features: im2col rows t, columns (mel, k).
        let x = self.input.levels(features);
        let cols = im2col(&x, MELS, FRAMES, 1, |c, t| c * FRAMES + t);
        let mut h = self.conv1.forward_bias_inside(&cols, FRAMES, self.input);
        gelu(&mut h);
        // h is [t][c] (800 x 384); conv2 reads it through the same im2col.
        let h = self.gelu1.levels(&h);
        let cols = im2col(&h, WIDTH, FRAMES, 2, |c, t| t * WIDTH + c);
        let mut x = self.conv2.forward_bias_inside(&cols, POSITIONS, self.gelu1);
        gelu(&mut x);
        for (v, p) in x.iter_mut().zip(&self.positions) {
            *v += p;
        }
        for layer in &self.layers {
            layer.forward(&mut x);
        }
        let mut enc = x;
        self.ln_post.apply(&mut enc);
        let enc = self.ln_post_q.levels(&enc);
        // Attention pooling over the 400 positions.
        let mut e = self.pool1.forward(&enc, POSITIONS, self.ln_post_q);
        for v in &mut e {
            *v = v.tanh();
        }
        let e = self.pool_tanh.levels(&e);
        let mut s = self.pool2.forward(&e, POSITIONS, self.pool_tanh);
        softmax(&mut s);
        let mut pooled = vec![0.0f32; WIDTH];
        for (row, a) in enc.chunks_exact(WIDTH).zip(&s) {
            for (p, v) in pooled.iter_mut().zip(row) {
                *p += v * self.ln_post_q.scale * a;
            }
        }
        let pooled = self.pooled.levels(&pooled);
        let mut h = self.cls0.forward_bias_inside(&pooled, 1, self.pooled);
        self.cls_ln.apply(&mut h);
        gelu(&mut h);
        let h = self.cls_gelu1.levels(&h);
        let mut h = self.cls4.forward_bias_inside(&h, 1, self.cls_gelu1);
        gelu(&mut h);
        let h = self.cls_gelu2.levels(&h);
        let logit = self.cls6.forward_bias_inside(&h, 1, self.cls_gelu2)[0];
        1.0 / (1.0 + (-logit).exp())
    }
}

impl Layer {
    fn forward(&self, x: &mut [f32]) {
        let t = POSITIONS;
        let mut h = x.to_vec();
        self.ln1.apply(&mut h);
        let h = self.ln1_q.levels(&h);
        let mut q = self.q.forward(&h, t, self.ln1_q);
        let mut k = self.k.forward(&h, t, self.ln1_q);
        let v = self.v.forward(&h, t, self.ln1_q);
        for v in &mut q {
            *v *= self.q_scale;
        }
        for v in &mut k {
            *v *= self.k_scale;
        }
        let (q, k, v) = (
            self.q_scaled.levels(&q),
            self.k_scaled.levels(&k),
            self.v_heads.levels(&v),
        );
        let mut merged = vec![0.0f32; t * WIDTH];
        let mut scores = vec![0.0f32; t * t];
        let mut head_out = vec![0.0f32; t * HEAD_DIM];
        for head in 0..HEADS {
            let at = head * HEAD_DIM;
            fn head_view(m: &[f32], at: usize, t: usize) -> View<'_> {
                View {
                    data: &m[at..],
                    rows: t,
                    cols: HEAD_DIM,
                    row_stride: WIDTH,
                    col_stride: 1,
                }
            }
            let view = |m| head_view(m, at, t);
            matmul(view(&q), view(&k).t(), &mut scores, t);
            let s = self.q_scaled.scale * self.k_scaled.scale;
            for v in &mut scores {
                *v *= s;
            }
            self.scores.round(&mut scores);
            for row in scores.chunks_exact_mut(t) {
                softmax(row);
            }
            let p = self.probs.levels(&scores);
            matmul(View::rows(&p, t, t), view(&v), &mut head_out, HEAD_DIM);
            let s = self.probs.scale * self.v_heads.scale;
            for (out, row) in merged
                .chunks_exact_mut(WIDTH)
                .zip(head_out.chunks_exact(HEAD_DIM))
            {
                for (o, r) in out[at..at + HEAD_DIM].iter_mut().zip(row) {
                    *o = r * s;
                }
            }
        }
        self.attn.round(&mut merged);
        let merged = self.attn_merged.levels(&merged);
        let o = self.o.forward(&merged, t, self.attn_merged);
        for (x, o) in x.iter_mut().zip(&o) {
            *x += o;
        }
        let mut h = x.to_vec();
        self.ln2.apply(&mut h);
        let h = self.ln2_q.levels(&h);
        let mut f = self.fc1.forward(&h, t, self.ln2_q);
        gelu(&mut f);
        let f = self.gelu.levels(&f);
        let f = self.fc2.forward(&f, t, self.gelu);
        for (x, f) in x.iter_mut().zip(&f) {
            *x += f;
        }
    }
}

/// Rows `t_out` of the patches of a kernel-3, padding-1 convolution with `stride`: columns
/// `(channel, k)`, `at(c, t)` the input's index of channel `c` at time `t`.
fn im2col(
    x: &[f32],
    channels: usize,
    len: usize,
    stride: usize,
    at: impl Fn(usize, usize) -> usize,
) -> Vec<f32> {
    let len_out = (len + 2 - 3) / stride + 1;
    let patch = channels * 3;
    let mut cols = vec![0.0; len_out * patch];
    for (t, row) in cols.chunks_exact_mut(patch).enumerate() {
        for c in 0..channels {
            for k in 0..3 {
                let pos = (t * stride + k).wrapping_sub(1);
                if pos < len {
                    row[c * 3 + k] = x[at(c, pos)];
                }
            }
        }
    }
    cols
}

/// GELU, `x * (1 + erf(x / sqrt 2)) / 2`, in place.
fn gelu(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26), far below the 8-bit grid every GELU
/// output is rounded to next (the standard library has no erf).
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_72 + t * (1.421_413_8 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * (-a * a).exp();
    y.copysign(x)
}

/// Softmax of one row, in place.
fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    let inv = (1.0 / sum) as f32;
    for v in x {
        *v *= inv;
    }
}
