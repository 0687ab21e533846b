//! Integration tests of the safe ggml layer: small graphs computed on the CPU backend and
//! compared with plain-Rust reference implementations, plus error paths that ggml itself would
//! turn into process aborts.

use audio_engine::ggml::dtype::{self, GgmlType};
use audio_engine::ggml::{
    quant, AlignedBytes, Backend, BackendBuffer, Context, DeviceKind, GgmlError, Graph,
    GraphAllocator, Precision, Result, RopeMode, RopeParams, Tensor,
};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Deterministic values in [-1, 1).
fn rand_vec(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn cpu() -> Backend {
    let be = Backend::cpu().expect("CPU backend");
    be.set_n_threads(2).expect("threads");
    be
}

/// Builds a graph of `outs`, allocates it, lets `set` fill the inputs, computes on the CPU and
/// reads the outputs back as F32.
fn eval<'a>(
    ctx: &'a Context,
    outs: &[Tensor<'a>],
    set: impl FnOnce() -> Result<()>,
) -> Result<Vec<Vec<f32>>> {
    let be = cpu();
    let mut g = ctx.new_graph(512)?;
    for &o in outs {
        o.set_output();
        g.build_forward_expand(o)?;
    }
    let alloc = GraphAllocator::new(&be)?;
    alloc.alloc_graph(&g)?;
    set()?;
    be.compute(&g)?;
    outs.iter()
        .map(|o| match o.ty() {
            GgmlType::I32 => Ok(o.get_i32()?.into_iter().map(|v| v as f32).collect()),
            _ => o.get_f32(),
        })
        .collect()
}

fn input<'a>(ctx: &'a Context, ty: GgmlType, ne: &[i64]) -> Tensor<'a> {
    let t = ctx.new_tensor(ty, ne).expect("tensor");
    t.set_input();
    t
}

#[track_caller]
fn assert_close(name: &str, got: &[f32], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        let tol = abs + rel * w.abs().max(1.0);
        assert!(
            err <= tol,
            "{name}[{i}]: got {g}, want {w} (error {err:e} > {tol:e})"
        );
    }
}

fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

fn f16_round(v: &[f32]) -> Vec<f32> {
    v.iter()
        .map(|&x| dtype::f16_to_f32(dtype::f32_to_f16(x)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Matrix products
// ---------------------------------------------------------------------------------------------

/// `r[i, j] = sum_k a[k, i] * b[k, j]` for `a: [k, n]`, `b: [k, m]` (ggml layout).
fn ref_mul_mat(a: &[f32], b: &[f32], k: usize, n: usize, m: usize) -> Vec<f64> {
    let mut r = vec![0f64; n * m];
    for j in 0..m {
        for i in 0..n {
            r[i + n * j] = (0..k)
                .map(|kk| f64::from(a[kk + k * i]) * f64::from(b[kk + k * j]))
                .sum();
        }
    }
    r
}

#[test]
fn mul_mat_f32() {
    let (k, n, m) = (64usize, 7usize, 5usize);
    let ctx = Context::metadata(16).unwrap();
    let a = input(&ctx, GgmlType::F32, &[k as i64, n as i64]);
    let b = input(&ctx, GgmlType::F32, &[k as i64, m as i64]);
    let r = ctx.mul_mat(a, b).unwrap();
    assert_eq!(r.ne(), [n as i64, m as i64, 1, 1]);
    assert_eq!(r.ty(), GgmlType::F32);
    let (va, vb) = (rand_vec(1, k * n), rand_vec(2, k * m));
    let out = eval(&ctx, &[r], || {
        a.set_f32(&va)?;
        b.set_f32(&vb)
    })
    .unwrap();
    assert_close(
        "mul_mat",
        &out[0],
        &ref_mul_mat(&va, &vb, k, n, m),
        1e-5,
        1e-6,
    );
}

#[test]
fn mul_mat_batched_broadcast() {
    // a: [k, n, 1, 1] broadcast over b's [k, m, 3, 1].
    let (k, n, m, batch) = (32usize, 4usize, 3usize, 3usize);
    let ctx = Context::metadata(16).unwrap();
    let a = input(&ctx, GgmlType::F32, &[k as i64, n as i64]);
    let b = input(&ctx, GgmlType::F32, &[k as i64, m as i64, batch as i64]);
    let r = ctx.mul_mat(a, b).unwrap();
    assert_eq!(r.ne(), [n as i64, m as i64, batch as i64, 1]);
    let (va, vb) = (rand_vec(3, k * n), rand_vec(4, k * m * batch));
    let out = eval(&ctx, &[r], || {
        a.set_f32(&va)?;
        b.set_f32(&vb)
    })
    .unwrap();
    let want: Vec<f64> = (0..batch)
        .flat_map(|z| ref_mul_mat(&va, &vb[z * k * m..(z + 1) * k * m], k, n, m))
        .collect();
    assert_close("mul_mat batched", &out[0], &want, 1e-5, 1e-6);
}

#[test]
fn mul_mat_q8_0_weights() {
    let (k, n, m) = (128usize, 6usize, 3usize);
    let w = rand_vec(5, k * n);
    let x = rand_vec(6, k * m);
    let wq = quant::quantize(GgmlType::Q8_0, &w, k).unwrap();
    assert_eq!(wq.len(), n * (k / 32) * 34);

    let ctx = Context::metadata(16).unwrap();
    let a = input(&ctx, GgmlType::Q8_0, &[k as i64, n as i64]);
    let b = input(&ctx, GgmlType::F32, &[k as i64, m as i64]);
    let r = ctx.mul_mat(a, b).unwrap();
    let out = eval(&ctx, &[r], || {
        a.set_bytes(0, &wq)?;
        b.set_f32(&x)
    })
    .unwrap();

    // ggml quantizes the activations to Q8_0 too (the CPU dot-product type of Q8_0 weights), so
    // the exact reference uses dequantized weights and dequantized activations.
    let wd = quant::dequantize(GgmlType::Q8_0, &wq, k * n).unwrap();
    let xq = quant::quantize(GgmlType::Q8_0, &x, k).unwrap();
    let xd = quant::dequantize(GgmlType::Q8_0, &xq, k * m).unwrap();
    assert_close(
        "mul_mat q8_0 (exact)",
        &out[0],
        &ref_mul_mat(&wd, &xd, k, n, m),
        1e-5,
        1e-5,
    );
    // Against dequantized weights and unquantized activations only the activation rounding
    // remains (half a quantization step of 1/127 per element).
    assert_close(
        "mul_mat q8_0 (dequantized)",
        &out[0],
        &ref_mul_mat(&wd, &x, k, n, m),
        0.0,
        0.05,
    );
}

#[test]
fn mul_mat_precision_flag() {
    let ctx = Context::metadata(8).unwrap();
    let a = ctx.new_tensor_2d(GgmlType::F32, 8, 2).unwrap();
    let b = ctx.new_tensor_2d(GgmlType::F32, 8, 2).unwrap();
    let r = ctx.mul_mat(a, b).unwrap();
    ctx.set_precision(r, Precision::F32).unwrap();
    let s = ctx.add(a, b).unwrap();
    assert!(matches!(
        ctx.set_precision(s, Precision::F32),
        Err(GgmlError::InvalidArgument { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Elementwise and normalisation
// ---------------------------------------------------------------------------------------------

#[test]
fn add_with_broadcast() {
    let ne = [6usize, 4, 3];
    let n: usize = ne.iter().product();
    let ctx = Context::metadata(16).unwrap();
    let a = input(&ctx, GgmlType::F32, &[6, 4, 3]);
    // b tiles along dim 0 (3 into 6) and dim 1 (1 into 4).
    let b = input(&ctx, GgmlType::F32, &[3, 1, 3]);
    let c = input(&ctx, GgmlType::F32, &[6, 4, 1]);
    let r1 = ctx.add(a, b).unwrap();
    let r2 = ctx.add(a, c).unwrap();
    let r3 = ctx.mul(a, c).unwrap();
    let (va, vb, vc) = (rand_vec(7, n), rand_vec(8, 9), rand_vec(9, 24));
    let out = eval(&ctx, &[r1, r2, r3], || {
        a.set_f32(&va)?;
        b.set_f32(&vb)?;
        c.set_f32(&vc)
    })
    .unwrap();
    let mut w1 = vec![0f64; n];
    let mut w2 = vec![0f64; n];
    let mut w3 = vec![0f64; n];
    for i2 in 0..ne[2] {
        for i1 in 0..ne[1] {
            for i0 in 0..ne[0] {
                let i = i0 + ne[0] * (i1 + ne[1] * i2);
                let bi = (i0 % 3) + 3 * i2;
                let ci = i0 + 6 * i1;
                w1[i] = f64::from(va[i]) + f64::from(vb[bi]);
                w2[i] = f64::from(va[i]) + f64::from(vc[ci]);
                w3[i] = f64::from(va[i]) * f64::from(vc[ci]);
            }
        }
    }
    assert_close("add tiled", &out[0], &w1, 1e-6, 1e-7);
    assert_close("add broadcast", &out[1], &w2, 1e-6, 1e-7);
    assert_close("mul broadcast", &out[2], &w3, 1e-6, 1e-7);
}

#[test]
fn rms_norm_with_eps() {
    let (n, rows) = (16usize, 5usize);
    let eps = 1e-5f32;
    let ctx = Context::metadata(8).unwrap();
    let a = input(&ctx, GgmlType::F32, &[n as i64, rows as i64]);
    let r = ctx.rms_norm(a, eps).unwrap();
    let mut va = rand_vec(10, n * rows);
    // A tiny row, where eps matters.
    for v in &mut va[n..2 * n] {
        *v *= 1e-3;
    }
    let out = eval(&ctx, &[r], || a.set_f32(&va)).unwrap();
    let mut want = vec![0f64; n * rows];
    for row in 0..rows {
        let x = &va[row * n..(row + 1) * n];
        let ms: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / n as f64;
        let s = 1.0 / (ms + f64::from(eps)).sqrt();
        for (i, &v) in x.iter().enumerate() {
            want[row * n + i] = f64::from(v) * s;
        }
    }
    assert_close("rms_norm", &out[0], &want, 1e-5, 1e-6);
}

#[test]
fn unary_and_glu() {
    let n = 8usize;
    let ctx = Context::metadata(16).unwrap();
    let a = input(&ctx, GgmlType::F32, &[n as i64, 2]);
    let silu = ctx.silu(a).unwrap();
    let sig = ctx.sigmoid(a).unwrap();
    let sw = ctx.swiglu(a).unwrap();
    assert_eq!(sw.ne(), [4, 2, 1, 1]);
    let va: Vec<f32> = rand_vec(11, 2 * n).iter().map(|v| v * 3.0).collect();
    let out = eval(&ctx, &[silu, sig, sw], || a.set_f32(&va)).unwrap();
    let sigm = |x: f64| 1.0 / (1.0 + (-x).exp());
    let w_silu: Vec<f64> = va
        .iter()
        .map(|&x| f64::from(x) * sigm(f64::from(x)))
        .collect();
    let w_sig: Vec<f64> = va.iter().map(|&x| sigm(f64::from(x))).collect();
    let mut w_sw = Vec::new();
    for row in 0..2 {
        let r = &va[row * n..(row + 1) * n];
        for i in 0..n / 2 {
            let g = f64::from(r[i]);
            w_sw.push(g * sigm(g) * f64::from(r[i + n / 2]));
        }
    }
    assert_close("silu", &out[0], &w_silu, 1e-5, 1e-6);
    assert_close("sigmoid", &out[1], &w_sig, 1e-5, 1e-6);
    assert_close("swiglu", &out[2], &w_sw, 1e-5, 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Rotary embeddings
// ---------------------------------------------------------------------------------------------

/// ggml's RoPE: theta for pair `i` is `pos * base^(-2i/n_dims)`, built by repeated
/// multiplication in f32 exactly as the CPU kernel does.
fn ref_rope(
    x: &[f32],
    ne: [usize; 3],
    pos: &[i32],
    n_dims: usize,
    mode: RopeMode,
    base: f32,
) -> Vec<f64> {
    let [hd, nh, nt] = ne;
    let theta_scale = base.powf(-2.0 / n_dims as f32);
    let mut out: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    for (t, &p) in pos.iter().enumerate().take(nt) {
        let mut cache = Vec::new();
        let mut theta = p as f32;
        for _ in 0..n_dims / 2 {
            cache.push((f64::from(theta.cos()), f64::from(theta.sin())));
            theta *= theta_scale;
        }
        for h in 0..nh {
            let base_i = hd * (h + nh * t);
            for (i, &(c, s)) in cache.iter().enumerate() {
                let (i0, i1) = match mode {
                    RopeMode::Normal => (2 * i, 2 * i + 1),
                    RopeMode::Neox => (i, i + n_dims / 2),
                };
                let x0 = f64::from(x[base_i + i0]);
                let x1 = f64::from(x[base_i + i1]);
                out[base_i + i0] = x0 * c - x1 * s;
                out[base_i + i1] = x0 * s + x1 * c;
            }
        }
    }
    out
}

#[test]
fn rope_ext_neox_and_normal() {
    let (hd, nh, nt) = (8usize, 2usize, 4usize);
    let pos = [0i32, 1, 7, 100];
    let ctx = Context::metadata(32).unwrap();
    let a = input(&ctx, GgmlType::F32, &[hd as i64, nh as i64, nt as i64]);
    let p = input(&ctx, GgmlType::I32, &[nt as i64]);
    let cases = [
        (RopeMode::Neox, hd),
        (RopeMode::Normal, hd),
        (RopeMode::Neox, 4),
        (RopeMode::Normal, 4),
    ];
    let outs: Vec<Tensor<'_>> = cases
        .iter()
        .map(|&(mode, n_dims)| {
            ctx.rope_ext(a, p, None, RopeParams::new(n_dims, mode, 10000.0))
                .unwrap()
        })
        .collect();
    let va = rand_vec(12, hd * nh * nt);
    let out = eval(&ctx, &outs, || {
        a.set_f32(&va)?;
        p.set_i32(&pos)
    })
    .unwrap();
    for (o, &(mode, n_dims)) in out.iter().zip(&cases) {
        let want = ref_rope(&va, [hd, nh, nt], &pos, n_dims, mode, 10000.0);
        assert_close(
            &format!("rope {mode:?} n_dims={n_dims}"),
            o,
            &want,
            1e-5,
            1e-6,
        );
    }
    // Position 0 is the identity.
    assert_close(
        "rope pos 0",
        &out[0][..hd * nh],
        &to_f64(&va[..hd * nh]),
        0.0,
        1e-7,
    );
}

// ---------------------------------------------------------------------------------------------
// Softmax and attention
// ---------------------------------------------------------------------------------------------

fn ref_softmax_rows(x: &[f64], n: usize) -> Vec<f64> {
    x.chunks(n)
        .flat_map(|row| {
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = row.iter().map(|&v| (v - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / s)
        })
        .collect()
}

#[test]
fn soft_max_ext_with_mask_and_scale() {
    let (n_kv, rows, heads) = (7usize, 3usize, 2usize);
    let scale = 0.5f32;
    let ctx = Context::metadata(16).unwrap();
    let a = input(
        &ctx,
        GgmlType::F32,
        &[n_kv as i64, rows as i64, heads as i64],
    );
    let m32 = input(&ctx, GgmlType::F32, &[n_kv as i64, rows as i64]);
    let m16 = input(&ctx, GgmlType::F16, &[n_kv as i64, rows as i64]);
    let r32 = ctx.soft_max_ext(a, Some(m32), scale, 0.0).unwrap();
    let r16 = ctx.soft_max_ext(a, Some(m16), scale, 0.0).unwrap();
    let plain = ctx.soft_max(a).unwrap();
    let va: Vec<f32> = rand_vec(13, n_kv * rows * heads)
        .iter()
        .map(|v| v * 4.0)
        .collect();
    // Causal-style mask with a finite penalty, exactly representable in F16.
    let mut mask = vec![0f32; n_kv * rows];
    for r in 0..rows {
        for c in 0..n_kv {
            mask[c + n_kv * r] = if c > r + 4 {
                f32::NEG_INFINITY
            } else if c == 0 {
                -1.5
            } else {
                0.0
            };
        }
    }
    let out = eval(&ctx, &[r32, r16, plain], || {
        a.set_f32(&va)?;
        m32.set_f32(&mask)?;
        m16.set_f32_as_f16(&mask)
    })
    .unwrap();
    let logits: Vec<f64> = va
        .iter()
        .enumerate()
        .map(|(i, &v)| f64::from(v) * f64::from(scale) + f64::from(mask[i % (n_kv * rows)]))
        .collect();
    let want = ref_softmax_rows(&logits, n_kv);
    assert_close("soft_max_ext f32 mask", &out[0], &want, 1e-5, 1e-7);
    assert_close("soft_max_ext f16 mask", &out[1], &want, 1e-5, 1e-7);
    assert_close(
        "soft_max",
        &out[2],
        &ref_softmax_rows(&to_f64(&va), n_kv),
        1e-5,
        1e-7,
    );
}

/// Naive attention in ggml's layouts; returns `[d_v, n_head, n_batch]`.
#[allow(clippy::too_many_arguments)]
fn ref_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    mask: &[f32],
    dk: usize,
    dv: usize,
    nb: usize,
    nh: usize,
    nkv: usize,
    nhkv: usize,
    scale: f32,
) -> Vec<f64> {
    let mut out = vec![0f64; dv * nh * nb];
    for h in 0..nh {
        let hk = h / (nh / nhkv);
        for t in 0..nb {
            let qv = &q[dk * (t + nb * h)..][..dk];
            let scores: Vec<f64> = (0..nkv)
                .map(|j| {
                    let kv = &k[dk * (j + nkv * hk)..][..dk];
                    let dot: f64 = qv
                        .iter()
                        .zip(kv)
                        .map(|(&a, &b)| f64::from(a) * f64::from(b))
                        .sum();
                    dot * f64::from(scale) + f64::from(mask[j + nkv * t])
                })
                .collect();
            let p = ref_softmax_rows(&scores, nkv);
            for e in 0..dv {
                out[e + dv * (h + nh * t)] = (0..nkv)
                    .map(|j| p[j] * f64::from(v[e + dv * (j + nkv * hk)]))
                    .sum();
            }
        }
    }
    out
}

#[test]
fn flash_attn_ext_matches_naive_attention() {
    let (dk, dv, nb, nh, nkv, nhkv) = (16usize, 8usize, 3usize, 4usize, 6usize, 2usize);
    let scale = 1.0 / (dk as f32).sqrt();
    let mut mask = vec![0f32; nkv * nb];
    for t in 0..nb {
        for j in 0..nkv {
            if j > t + 3 {
                mask[j + nkv * t] = f32::NEG_INFINITY;
            }
        }
    }
    let vq = rand_vec(14, dk * nb * nh);
    let vk = rand_vec(15, dk * nkv * nhkv);
    let vv = rand_vec(16, dv * nkv * nhkv);

    for kv_ty in [GgmlType::F32, GgmlType::F16] {
        let ctx = Context::metadata(16).unwrap();
        let q = input(&ctx, GgmlType::F32, &[dk as i64, nb as i64, nh as i64]);
        let k = input(&ctx, kv_ty, &[dk as i64, nkv as i64, nhkv as i64]);
        let v = input(&ctx, kv_ty, &[dv as i64, nkv as i64, nhkv as i64]);
        let m = input(&ctx, GgmlType::F16, &[nkv as i64, nb as i64]);
        let r = ctx
            .flash_attn_ext(q, k, v, Some(m), scale, 0.0, 0.0)
            .unwrap();
        assert_eq!(r.ne(), [dv as i64, nh as i64, nb as i64, 1]);
        ctx.set_precision(r, Precision::F32).unwrap();
        let out = eval(&ctx, &[r], || {
            q.set_f32(&vq)?;
            m.set_f32_as_f16(&mask)?;
            if kv_ty == GgmlType::F32 {
                k.set_f32(&vk)?;
                v.set_f32(&vv)
            } else {
                k.set_f32_as_f16(&vk)?;
                v.set_f32_as_f16(&vv)
            }
        })
        .unwrap();
        if kv_ty == GgmlType::F32 {
            let want = ref_attention(&vq, &vk, &vv, &mask, dk, dv, nb, nh, nkv, nhkv, scale);
            assert_close("flash_attn_ext f32", &out[0], &want, 1e-5, 1e-6);
        } else {
            // With F16 K/V ggml rounds q, k and v to half precision.
            let (q16, k16, v16) = (f16_round(&vq), f16_round(&vk), f16_round(&vv));
            let want = ref_attention(&q16, &k16, &v16, &mask, dk, dv, nb, nh, nkv, nhkv, scale);
            assert_close("flash_attn_ext f16", &out[0], &want, 2e-3, 1e-3);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Convolutions and state-space kernels
// ---------------------------------------------------------------------------------------------

#[test]
fn ssm_conv_depthwise_causal() {
    let (d_conv, d_inner, n_t, n_s) = (4usize, 5usize, 6usize, 2usize);
    let width = d_conv - 1 + n_t;
    let ctx = Context::metadata(8).unwrap();
    let sx = input(
        &ctx,
        GgmlType::F32,
        &[width as i64, d_inner as i64, n_s as i64],
    );
    let c = input(&ctx, GgmlType::F32, &[d_conv as i64, d_inner as i64]);
    let r = ctx.ssm_conv(sx, c).unwrap();
    assert_eq!(r.ne(), [d_inner as i64, n_t as i64, n_s as i64, 1]);
    let (vs, vc) = (
        rand_vec(17, width * d_inner * n_s),
        rand_vec(18, d_conv * d_inner),
    );
    let out = eval(&ctx, &[r], || {
        sx.set_f32(&vs)?;
        c.set_f32(&vc)
    })
    .unwrap();
    let mut want = vec![0f64; d_inner * n_t * n_s];
    for s in 0..n_s {
        for t in 0..n_t {
            for ch in 0..d_inner {
                want[ch + d_inner * (t + n_t * s)] = (0..d_conv)
                    .map(|i| {
                        f64::from(vs[(t + i) + width * (ch + d_inner * s)])
                            * f64::from(vc[i + d_conv * ch])
                    })
                    .sum();
            }
        }
    }
    assert_close("ssm_conv", &out[0], &want, 1e-5, 1e-6);
}

#[test]
fn conv_1d_dw_matches_reference() {
    let (k, c, l) = (3usize, 4usize, 10usize);
    for (s0, p0, d0) in [(1i64, 1i64, 1i64), (2, 2, 2)] {
        let ctx = Context::metadata(16).unwrap();
        let w = input(&ctx, GgmlType::F32, &[k as i64, 1, c as i64]);
        let x = input(&ctx, GgmlType::F32, &[l as i64, c as i64]);
        let r = ctx.conv_1d_dw(w, x, s0, p0, d0).unwrap();
        let ol = ((l as i64 + 2 * p0 - d0 * (k as i64 - 1) - 1) / s0 + 1) as usize;
        assert_eq!(r.ne(), [ol as i64, c as i64, 1, 1]);
        let (vw, vx) = (rand_vec(19, k * c), rand_vec(20, l * c));
        let out = eval(&ctx, &[r], || {
            w.set_f32(&vw)?;
            x.set_f32(&vx)
        })
        .unwrap();
        // ggml routes the data through an F16 im2col and multiplies in F16.
        let (w16, x16) = (f16_round(&vw), f16_round(&vx));
        let mut want = vec![0f64; ol * c];
        for ch in 0..c {
            for t in 0..ol {
                want[t + ol * ch] = (0..k)
                    .filter_map(|kk| {
                        let pos = t as i64 * s0 + kk as i64 * d0 - p0;
                        (0..l as i64).contains(&pos).then(|| {
                            f64::from(x16[pos as usize + l * ch]) * f64::from(w16[kk + k * ch])
                        })
                    })
                    .sum();
            }
        }
        assert_close(
            &format!("conv_1d_dw s{s0} p{p0} d{d0}"),
            &out[0],
            &want,
            1e-5,
            1e-6,
        );
    }
}

#[test]
fn reductions_norms_and_activations() {
    let (n, rows) = (6usize, 4usize);
    let eps = 1e-6f32;
    let ctx = Context::metadata(64).unwrap();
    let a = input(&ctx, GgmlType::F32, &[n as i64, rows as i64]);
    let g = input(&ctx, GgmlType::F32, &[3, 2, 4]);
    let outs = vec![
        ctx.sum_rows(a).unwrap(),
        ctx.mean(a).unwrap(),
        ctx.argmax(a).unwrap(),
        ctx.norm(a, eps).unwrap(),
        ctx.l2_norm(a, eps).unwrap(),
        ctx.scale_bias(a, 2.0, -0.5).unwrap(),
        ctx.clamp(a, -0.5, 0.25).unwrap(),
        ctx.sqr(a).unwrap(),
        ctx.sqrt(ctx.abs(a).unwrap()).unwrap(),
        ctx.gelu_erf(a).unwrap(),
        ctx.relu(a).unwrap(),
        ctx.tanh(a).unwrap(),
        ctx.neg(ctx.exp(a).unwrap()).unwrap(),
        ctx.group_norm(g, 2, eps).unwrap(),
        ctx.diag_mask_inf(ctx.cont_4d(a, [4, 6, 1, 1]).unwrap(), 1)
            .unwrap(),
    ];
    let va = rand_vec(31, n * rows);
    let vg = rand_vec(32, 24);
    let out = eval(&ctx, &outs, || {
        a.set_f32(&va)?;
        g.set_f32(&vg)
    })
    .unwrap();
    let x = to_f64(&va);
    let rows_of =
        |f: &dyn Fn(&[f64]) -> Vec<f64>| -> Vec<f64> { x.chunks(n).flat_map(f).collect() };
    let map = |f: &dyn Fn(f64) -> f64| -> Vec<f64> { x.iter().map(|&v| f(v)).collect() };
    assert_close(
        "sum_rows",
        &out[0],
        &rows_of(&|r| vec![r.iter().sum()]),
        1e-6,
        1e-7,
    );
    assert_close(
        "mean",
        &out[1],
        &rows_of(&|r| vec![r.iter().sum::<f64>() / n as f64]),
        1e-6,
        1e-7,
    );
    let argmax = rows_of(&|r| {
        let i = (0..r.len()).fold(0, |b, i| if r[i] > r[b] { i } else { b });
        vec![i as f64]
    });
    assert_close("argmax", &out[2], &argmax, 0.0, 0.0);
    let norm = rows_of(&|r| {
        let m = r.iter().sum::<f64>() / n as f64;
        let v = r.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        r.iter()
            .map(|x| (x - m) / (v + f64::from(eps)).sqrt())
            .collect()
    });
    assert_close("norm", &out[3], &norm, 1e-5, 1e-6);
    let l2 = rows_of(&|r| {
        let s = r
            .iter()
            .map(|x| x * x)
            .sum::<f64>()
            .sqrt()
            .max(f64::from(eps));
        r.iter().map(|x| x / s).collect()
    });
    assert_close("l2_norm", &out[4], &l2, 1e-5, 1e-6);
    assert_close("scale_bias", &out[5], &map(&|v| 2.0 * v - 0.5), 1e-6, 1e-7);
    assert_close("clamp", &out[6], &map(&|v| v.clamp(-0.5, 0.25)), 0.0, 1e-7);
    assert_close("sqr", &out[7], &map(&|v| v * v), 1e-6, 1e-7);
    assert_close("sqrt", &out[8], &map(&|v| v.abs().sqrt()), 1e-6, 1e-7);
    let erf = |v: f64| {
        // Abramowitz-Stegun 7.1.26 is too coarse; integrate the series instead.
        let mut sum = 0.0;
        let mut term = v;
        for k in 0..60 {
            sum += term / (2 * k + 1) as f64;
            term *= -v * v / (k + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    };
    assert_close(
        "gelu_erf",
        &out[9],
        &map(&|v| 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2))),
        1e-4,
        1e-5,
    );
    assert_close("relu", &out[10], &map(&|v| v.max(0.0)), 0.0, 0.0);
    assert_close("tanh", &out[11], &map(&f64::tanh), 1e-5, 1e-6);
    assert_close("neg exp", &out[12], &map(&|v| -v.exp()), 1e-5, 1e-6);
    // group_norm over [3, 2, 4] with 2 groups of 2 channels (12 values each).
    let gn: Vec<f64> = to_f64(&vg)
        .chunks(12)
        .flat_map(|grp| {
            let m = grp.iter().sum::<f64>() / 12.0;
            let v = grp.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 12.0;
            grp.iter()
                .map(|x| (x - m) / (v + f64::from(eps)).sqrt())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_close("group_norm", &out[13], &gn, 1e-5, 1e-6);
    // diag_mask_inf on [4, 6] with n_past 1: column i of row j is masked when i > j + 1.
    for j in 0..6 {
        for i in 0..4 {
            let got = out[14][i + 4 * j];
            if i > j + 1 {
                assert_eq!(got, f32::NEG_INFINITY, "diag_mask_inf[{i},{j}]");
            } else {
                assert_eq!(got, va[i + 4 * j], "diag_mask_inf[{i},{j}]");
            }
        }
    }
}

#[test]
fn set_rows_pad_repeat_arange_glu_split() {
    let ctx = Context::metadata(64).unwrap();
    let dst = input(&ctx, GgmlType::F32, &[4, 5]);
    let src = input(&ctx, GgmlType::F32, &[4, 2]);
    let idx = input(&ctx, GgmlType::I64, &[2]);
    let small = input(&ctx, GgmlType::F32, &[3, 2]);
    let gate = input(&ctx, GgmlType::F32, &[4, 2]);
    let dst_vals = vec![0.5f32; 20];
    let (vs, vsmall, vgate) = (rand_vec(33, 8), rand_vec(34, 6), rand_vec(35, 8));
    let set = ctx.set_rows(dst, src, idx).unwrap();
    let padded = ctx.pad(small, [2, 1, 0, 0]).unwrap();
    let tiled_target = ctx.new_tensor_2d(GgmlType::F32, 6, 4).unwrap();
    let tiled = ctx.repeat(small, tiled_target).unwrap();
    let ar = ctx.arange(0.0, 5.0, 1.0).unwrap();
    let sw = ctx.swiglu_split(gate, src).unwrap();
    let out = eval(&ctx, &[set, padded, tiled, ar, sw], || {
        dst.set_f32(&dst_vals)?;
        src.set_f32(&vs)?;
        idx.set_i64(&[3, 1])?;
        small.set_f32(&vsmall)?;
        gate.set_f32(&vgate)
    })
    .unwrap();
    let mut want = to_f64(&dst_vals);
    for (r, &row) in [3usize, 1].iter().enumerate() {
        for c in 0..4 {
            want[c + 4 * row] = f64::from(vs[c + 4 * r]);
        }
    }
    assert_close("set_rows", &out[0], &want, 0.0, 0.0);
    let mut wp = vec![0f64; 15];
    for r in 0..2 {
        for c in 0..3 {
            wp[c + 5 * r] = f64::from(vsmall[c + 3 * r]);
        }
    }
    assert_close("pad", &out[1], &wp, 0.0, 0.0);
    let wt: Vec<f64> = (0..4)
        .flat_map(|r| (0..6).map(move |c| (r, c)))
        .map(|(r, c)| f64::from(vsmall[(c % 3) + 3 * (r % 2)]))
        .collect();
    assert_close("repeat", &out[2], &wt, 0.0, 0.0);
    assert_close("arange", &out[3], &[0.0, 1.0, 2.0, 3.0, 4.0], 0.0, 0.0);
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let wsw: Vec<f64> = vgate
        .iter()
        .zip(&vs)
        .map(|(&g, &v)| f64::from(g) * sig(f64::from(g)) * f64::from(v))
        .collect();
    assert_close("swiglu_split", &out[4], &wsw, 1e-5, 1e-6);
}

/// Reference 2-d convolution in ggml's layouts: kernel `[kw, kh, ic, oc]`, input `[w, h, ic]`.
#[allow(clippy::too_many_arguments)]
fn ref_conv_2d(
    k: &[f32],
    x: &[f32],
    [kw, kh, ic, oc]: [usize; 4],
    [w, h]: [usize; 2],
    s: [i64; 2],
    p: [i64; 2],
    d: [i64; 2],
    depthwise: bool,
) -> (Vec<f64>, [usize; 2]) {
    let ow = ((w as i64 + 2 * p[0] - d[0] * (kw as i64 - 1) - 1) / s[0] + 1) as usize;
    let oh = ((h as i64 + 2 * p[1] - d[1] * (kh as i64 - 1) - 1) / s[1] + 1) as usize;
    let mut out = vec![0f64; ow * oh * oc];
    for o in 0..oc {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut acc = 0f64;
                let channels: Vec<usize> = if depthwise {
                    vec![o]
                } else {
                    (0..ic).collect()
                };
                for (ki, &c) in channels.iter().enumerate() {
                    let kc = if depthwise { 0 } else { ki };
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let ix = ox as i64 * s[0] + kx as i64 * d[0] - p[0];
                            let iy = oy as i64 * s[1] + ky as i64 * d[1] - p[1];
                            if ix < 0 || iy < 0 || ix >= w as i64 || iy >= h as i64 {
                                continue;
                            }
                            let kv = k[kx + kw * (ky + kh * (kc + ic * o))];
                            let xv = x[ix as usize + w * (iy as usize + h * c)];
                            acc += f64::from(kv) * f64::from(xv);
                        }
                    }
                }
                out[ox + ow * (oy + oh * o)] = acc;
            }
        }
    }
    (out, [ow, oh])
}

#[test]
fn conv_1d_and_2d_match_reference() {
    // conv_1d: kernel [3, 2, 4], data [8, 2, 1], stride 2, padding 1, dilation 1.
    let ctx = Context::metadata(64).unwrap();
    let k1 = input(&ctx, GgmlType::F32, &[3, 2, 4]);
    let x1 = input(&ctx, GgmlType::F32, &[8, 2, 1]);
    let c1 = ctx.conv_1d(k1, x1, 2, 1, 1).unwrap();
    assert_eq!(c1.ne(), [4, 4, 1, 1]);
    // conv_2d: kernel [3, 2, 2, 3], data [5, 4, 2, 1], stride 1, padding (1, 0).
    let k2 = input(&ctx, GgmlType::F32, &[3, 2, 2, 3]);
    let x2 = input(&ctx, GgmlType::F32, &[5, 4, 2, 1]);
    let c2 = ctx.conv_2d(k2, x2, [1, 1], [1, 0], [1, 1]).unwrap();
    // conv_2d_dw: F16 kernel [3, 3, 1, 2], data [5, 4, 2, 1], padding 1.
    let k3 = input(&ctx, GgmlType::F16, &[3, 3, 1, 2]);
    let c3 = ctx.conv_2d_dw(k3, x2, [1, 1], [1, 1], [1, 1]).unwrap();
    assert!(matches!(
        ctx.conv_2d_dw(k2, x2, [1, 1], [1, 1], [1, 1]),
        Err(GgmlError::TypeMismatch { .. })
    ));
    let (vk1, vx1) = (rand_vec(36, 24), rand_vec(37, 16));
    let (vk2, vx2, vk3) = (rand_vec(38, 36), rand_vec(39, 40), rand_vec(40, 18));
    let out = eval(&ctx, &[c1, c2, c3], || {
        k1.set_f32(&vk1)?;
        x1.set_f32(&vx1)?;
        k2.set_f32(&vk2)?;
        x2.set_f32(&vx2)?;
        k3.set_f32_as_f16(&vk3)
    })
    .unwrap();
    // The composite convolutions run through an F16 im2col and F16 products.
    let (k1r, x1r) = (f16_round(&vk1), f16_round(&vx1));
    let (w1, _) = ref_conv_2d(
        &k1r,
        &x1r,
        [3, 1, 2, 4],
        [8, 1],
        [2, 1],
        [1, 0],
        [1, 1],
        false,
    );
    assert_close("conv_1d", &out[0], &w1, 1e-5, 1e-6);
    let (k2r, x2r) = (f16_round(&vk2), f16_round(&vx2));
    let (w2, [ow, oh]) = ref_conv_2d(
        &k2r,
        &x2r,
        [3, 2, 2, 3],
        [5, 4],
        [1, 1],
        [1, 0],
        [1, 1],
        false,
    );
    assert_eq!(c2.ne(), [ow as i64, oh as i64, 3, 1]);
    assert_close("conv_2d", &out[1], &w2, 1e-5, 1e-6);
    let (w3, [ow, oh]) = ref_conv_2d(
        &f16_round(&vk3),
        &x2r,
        [3, 3, 1, 2],
        [5, 4],
        [1, 1],
        [1, 1],
        [1, 1],
        true,
    );
    assert_eq!(c3.ne(), [ow as i64, oh as i64, 2, 1]);
    assert_close("conv_2d_dw", &out[2], &w3, 1e-5, 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Gathers, concatenation, layout
// ---------------------------------------------------------------------------------------------

#[test]
fn get_rows_f32_f16_q8_0() {
    let (n, rows) = (32usize, 6usize);
    let idx = [5i32, 0, 2, 2];
    let data = rand_vec(21, n * rows);
    let q = quant::quantize(GgmlType::Q8_0, &data, n).unwrap();
    let ctx = Context::metadata(16).unwrap();
    let a32 = input(&ctx, GgmlType::F32, &[n as i64, rows as i64]);
    let a16 = input(&ctx, GgmlType::F16, &[n as i64, rows as i64]);
    let aq = input(&ctx, GgmlType::Q8_0, &[n as i64, rows as i64]);
    let i = input(&ctx, GgmlType::I32, &[idx.len() as i64]);
    let r32 = ctx.get_rows(a32, i).unwrap();
    let r16 = ctx.get_rows(a16, i).unwrap();
    let rq = ctx.get_rows(aq, i).unwrap();
    assert_eq!(r32.ne(), [n as i64, idx.len() as i64, 1, 1]);
    let out = eval(&ctx, &[r32, r16, rq], || {
        a32.set_f32(&data)?;
        a16.set_f32_as_f16(&data)?;
        aq.set_bytes(0, &q)?;
        i.set_i32(&idx)
    })
    .unwrap();
    let gather = |src: &[f32]| -> Vec<f64> {
        idx.iter()
            .flat_map(|&r| src[r as usize * n..][..n].iter().map(|&v| f64::from(v)))
            .collect()
    };
    assert_close("get_rows f32", &out[0], &gather(&data), 0.0, 0.0);
    assert_close(
        "get_rows f16",
        &out[1],
        &gather(&f16_round(&data)),
        0.0,
        0.0,
    );
    let dq = quant::dequantize(GgmlType::Q8_0, &q, n * rows).unwrap();
    assert_close("get_rows q8_0", &out[2], &gather(&dq), 0.0, 0.0);
}

#[test]
fn concat_along_dims() {
    let ctx = Context::metadata(16).unwrap();
    let a = input(&ctx, GgmlType::F32, &[3, 2, 2]);
    let b = input(&ctx, GgmlType::F32, &[3, 4, 2]);
    let c = input(&ctx, GgmlType::F32, &[5, 2, 2]);
    let r1 = ctx.concat(a, b, 1).unwrap();
    let r0 = ctx.concat(a, c, 0).unwrap();
    assert_eq!(r1.ne(), [3, 6, 2, 1]);
    assert_eq!(r0.ne(), [8, 2, 2, 1]);
    let (va, vb, vc) = (rand_vec(22, 12), rand_vec(23, 24), rand_vec(24, 20));
    let out = eval(&ctx, &[r1, r0], || {
        a.set_f32(&va)?;
        b.set_f32(&vb)?;
        c.set_f32(&vc)
    })
    .unwrap();
    let mut w1 = Vec::new();
    for z in 0..2 {
        w1.extend_from_slice(&va[z * 6..(z + 1) * 6]);
        w1.extend_from_slice(&vb[z * 12..(z + 1) * 12]);
    }
    let mut w0 = Vec::new();
    for row in 0..4 {
        w0.extend_from_slice(&va[row * 3..(row + 1) * 3]);
        w0.extend_from_slice(&vc[row * 5..(row + 1) * 5]);
    }
    assert_close("concat dim 1", &out[0], &to_f64(&w1), 0.0, 0.0);
    assert_close("concat dim 0", &out[1], &to_f64(&w0), 0.0, 0.0);
}

#[test]
fn views_permute_cont_and_cpy() {
    let ctx = Context::metadata(32).unwrap();
    let a = input(&ctx, GgmlType::F32, &[4, 3]);
    // Transposed copy: [3, 4].
    let t = ctx.cont(ctx.transpose(a).unwrap()).unwrap();
    // Second row as a 1-d view.
    let row = ctx.cont(ctx.view_1d(a, 4, 4 * 4).unwrap()).unwrap();
    // Column 1 via a strided 2-d view ([1, 3] with row stride 16 bytes).
    let col = ctx.cont(ctx.view_2d(a, 1, 3, 16, 4).unwrap()).unwrap();
    // Round trip through F16.
    let h = ctx.cast(a, GgmlType::F16).unwrap();
    let back = ctx.cast(h, GgmlType::F32).unwrap();
    let p = ctx
        .cont(
            ctx.permute(ctx.reshape_3d(a, 2, 2, 3).unwrap(), [2, 0, 1, 3])
                .unwrap(),
        )
        .unwrap();
    assert_eq!(p.ne(), [2, 3, 2, 1]);
    let va = rand_vec(25, 12);
    let out = eval(&ctx, &[t, row, col, back, p], || a.set_f32(&va)).unwrap();
    let wt: Vec<f64> = (0..4)
        .flat_map(|c| (0..3).map(move |r| (r, c)))
        .map(|(r, c)| f64::from(va[c + 4 * r]))
        .collect();
    assert_close("transpose", &out[0], &wt, 0.0, 0.0);
    assert_close("view_1d", &out[1], &to_f64(&va[4..8]), 0.0, 0.0);
    assert_close(
        "view_2d",
        &out[2],
        &to_f64(&[va[1], va[5], va[9]]),
        0.0,
        0.0,
    );
    assert_close("cast f16", &out[3], &to_f64(&f16_round(&va)), 0.0, 0.0);
    // permute [2,0,1,3]: source dim 0 -> dim 2, dim 1 -> dim 0, dim 2 -> dim 1.
    let mut wp = vec![0f64; 12];
    for i2 in 0..3 {
        for i1 in 0..2 {
            for i0 in 0..2 {
                let src = i0 + 2 * (i1 + 2 * i2);
                let dst = i1 + 2 * (i2 + 3 * i0);
                wp[dst] = f64::from(va[src]);
            }
        }
    }
    assert_close("permute", &out[4], &wp, 0.0, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Errors instead of aborts
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_shapes_return_errors() {
    let ctx = Context::metadata(64).unwrap();
    let a = ctx.new_tensor_2d(GgmlType::F32, 8, 4).unwrap();
    let b = ctx.new_tensor_2d(GgmlType::F32, 7, 4).unwrap();
    let v3 = ctx.new_tensor_1d(GgmlType::F32, 3).unwrap();
    let idx_f = ctx.new_tensor_1d(GgmlType::F32, 2).unwrap();
    let idx = ctx.new_tensor_1d(GgmlType::I32, 2).unwrap();
    let pos = ctx.new_tensor_1d(GgmlType::I32, 3).unwrap();

    let shape = |r: Result<Tensor<'_>>| matches!(r, Err(GgmlError::ShapeMismatch { .. }));
    let ty = |r: Result<Tensor<'_>>| matches!(r, Err(GgmlError::TypeMismatch { .. }));

    assert!(shape(ctx.mul_mat(a, b)));
    assert!(shape(ctx.add(a, b)));
    assert!(shape(ctx.add(a, v3)));
    assert!(ty(ctx.get_rows(a, idx_f)));
    assert!(shape(ctx.concat(a, b, 1)));
    assert!(matches!(
        ctx.concat(a, a, 4),
        Err(GgmlError::InvalidArgument { .. })
    ));
    assert!(shape(ctx.reshape_2d(a, 5, 7)));
    assert!(matches!(
        ctx.view_1d(a, 32, 4),
        Err(GgmlError::OutOfBounds { .. })
    ));
    assert!(matches!(
        ctx.view_2d(a, 8, 4, 64, 0),
        Err(GgmlError::OutOfBounds { .. })
    ));
    assert!(matches!(
        ctx.permute(a, [0, 0, 1, 2]),
        Err(GgmlError::InvalidArgument { .. })
    ));
    assert!(matches!(
        ctx.new_tensor_1d(GgmlType::Q8_0, 33),
        Err(GgmlError::ShapeMismatch { .. })
    ));
    assert!(ctx.new_tensor_1d(GgmlType::F32, -1).is_err());
    assert!(ctx.new_tensor(GgmlType::F32, &[1, 1, 1, 1, 1]).is_err());

    // RoPE: 4 tokens but 3 positions; odd n_dims; n_dims beyond the head.
    let x = ctx.new_tensor_3d(GgmlType::F32, 8, 2, 4).unwrap();
    assert!(shape(ctx.rope_ext(
        x,
        pos,
        None,
        RopeParams::new(8, RopeMode::Neox, 1e4)
    )));
    let pos4 = ctx.new_tensor_1d(GgmlType::I32, 4).unwrap();
    assert!(ctx
        .rope_ext(x, pos4, None, RopeParams::new(3, RopeMode::Neox, 1e4))
        .is_err());
    assert!(ctx
        .rope_ext(x, pos4, None, RopeParams::new(10, RopeMode::Normal, 1e4))
        .is_err());
    assert!(ctx
        .rope_ext(x, pos4, None, RopeParams::new(8, RopeMode::Normal, 1e4))
        .is_ok());

    // Softmax mask too short; max_bias without a mask.
    let m = ctx.new_tensor_2d(GgmlType::F32, 8, 2).unwrap();
    assert!(shape(ctx.soft_max_ext(a, Some(m), 1.0, 0.0)));
    assert!(ctx.soft_max_ext(a, None, 1.0, 1.0).is_err());
    assert!(ctx.rms_norm(a, -1.0).is_err());
    assert!(ty(ctx.rms_norm(idx, 1e-5)));

    // Attention: head size mismatch, and F32 mask (ggml wants F16).
    let q = ctx.new_tensor_3d(GgmlType::F32, 16, 2, 4).unwrap();
    let k = ctx.new_tensor_3d(GgmlType::F32, 8, 5, 2).unwrap();
    assert!(shape(ctx.flash_attn_ext(q, k, k, None, 1.0, 0.0, 0.0)));
    let k16 = ctx.new_tensor_3d(GgmlType::F32, 16, 5, 2).unwrap();
    let m32 = ctx.new_tensor_2d(GgmlType::F32, 5, 2).unwrap();
    assert!(ty(ctx.flash_attn_ext(
        q,
        k16,
        k16,
        Some(m32),
        1.0,
        0.0,
        0.0
    )));

    // ssm_conv: channel mismatch; convolution with zero stride.
    let sx = ctx.new_tensor_3d(GgmlType::F32, 6, 4, 1).unwrap();
    let c = ctx.new_tensor_2d(GgmlType::F32, 3, 5).unwrap();
    assert!(shape(ctx.ssm_conv(sx, c)));
    let w = ctx.new_tensor_3d(GgmlType::F32, 3, 1, 4).unwrap();
    let data = ctx.new_tensor_2d(GgmlType::F32, 10, 4).unwrap();
    assert!(matches!(
        ctx.conv_1d_dw(w, data, 0, 0, 1),
        Err(GgmlError::InvalidArgument { .. })
    ));
    let short = ctx.new_tensor_2d(GgmlType::F32, 1, 4).unwrap();
    assert!(shape(ctx.conv_1d_dw(w, short, 1, 0, 4)));
    // Transposed first operand of mul_mat.
    let at = ctx.transpose(a).unwrap();
    assert!(ctx.mul_mat(at, b).is_err());
}

#[test]
fn context_and_graph_capacity_errors() {
    // Room for exactly two tensors and no graph.
    let ctx = Context::metadata_with_graph(2, 0).unwrap();
    let a = ctx.new_tensor_1d(GgmlType::F32, 4).unwrap();
    let _b = ctx.add(a, a).unwrap();
    assert!(matches!(
        ctx.new_tensor_1d(GgmlType::F32, 4),
        Err(GgmlError::ContextFull { .. })
    ));
    assert!(matches!(
        ctx.new_graph(16),
        Err(GgmlError::ContextFull { .. })
    ));

    // A pool that holds metadata but not 4 KiB of data.
    let small = Context::with_memory(2048).unwrap();
    assert!(matches!(
        small.new_tensor_1d(GgmlType::F32, 1024),
        Err(GgmlError::ContextFull { .. })
    ));
    assert!(small.new_tensor_1d(GgmlType::F32, 16).is_ok());

    // A graph with room for two nodes.
    let ctx = Context::metadata(16).unwrap();
    let x = ctx.new_tensor_1d(GgmlType::F32, 4).unwrap();
    let y = ctx.neg(ctx.abs(ctx.exp(x).unwrap()).unwrap()).unwrap();
    let mut g = ctx.new_graph(2).unwrap();
    assert!(matches!(
        g.build_forward_expand(y),
        Err(GgmlError::GraphFull { .. })
    ));
    assert_eq!(g.n_nodes(), 0);
    let mut g = ctx.new_graph(3).unwrap();
    g.build_forward_expand(y).unwrap();
    assert_eq!((g.n_nodes(), g.n_leafs()), (3, 1));
    // Expanding again adds nothing.
    g.build_forward_expand(y).unwrap();
    assert_eq!(g.n_nodes(), 3);
    assert!(g.node(2).unwrap().same_as(y));
}

#[test]
fn compute_errors_instead_of_aborts() {
    let be = cpu();
    // Unallocated graph.
    let ctx = Context::metadata(16).unwrap();
    let a = ctx.new_tensor_1d(GgmlType::F32, 4).unwrap();
    let r = ctx.neg(a).unwrap();
    let mut g = ctx.new_graph(8).unwrap();
    g.build_forward_expand(r).unwrap();
    assert!(matches!(
        be.compute(&g),
        Err(GgmlError::NotAllocated { .. })
    ));
    assert!(matches!(r.get_f32(), Err(GgmlError::NotAllocated { .. })));

    // Out-of-range row index.
    let ctx = Context::metadata(16).unwrap();
    let data = input(&ctx, GgmlType::F32, &[4, 3]);
    let idx = input(&ctx, GgmlType::I32, &[2]);
    let rows = ctx.get_rows(data, idx).unwrap();
    let mut g = ctx.new_graph(8).unwrap();
    g.build_forward_expand(rows).unwrap();
    let alloc = GraphAllocator::new(&be).unwrap();
    alloc.alloc_graph(&g).unwrap();
    data.set_f32(&[0.0; 12]).unwrap();
    idx.set_i32(&[1, 3]).unwrap();
    assert!(matches!(be.compute(&g), Err(GgmlError::OutOfBounds { .. })));
    idx.set_i32(&[-1, 0]).unwrap();
    assert!(be.compute(&g).is_err());
    idx.set_i32(&[2, 0]).unwrap();
    be.compute(&g).unwrap();

    // Typed access mismatches.
    assert!(matches!(
        data.set_f32(&[0.0; 11]),
        Err(GgmlError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        data.set_i32(&[0; 12]),
        Err(GgmlError::TypeMismatch { .. })
    ));
    assert!(matches!(
        data.set_bytes(40, &[0; 16]),
        Err(GgmlError::OutOfBounds { .. })
    ));
    assert!(data.set_name(&"x".repeat(64)).is_err());
    data.set_name("data").unwrap();
    assert_eq!(data.name(), "data");
}

// ---------------------------------------------------------------------------------------------
// Buffers and allocation
// ---------------------------------------------------------------------------------------------

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

#[test]
fn host_memory_buffer_round_trip() {
    let be = cpu();
    let vals = rand_vec(26, 16);

    // Caller memory with data already in place (as in a mapped model file).
    let mut mem = AlignedBytes::zeroed(4096).unwrap();
    mem.as_mut_slice()[256..256 + 64].copy_from_slice(&f32_bytes(&vals));
    let buf = BackendBuffer::from_host_memory(mem).unwrap();
    assert_eq!(buf.base_offset(), 0);
    assert_eq!(buf.size(), 4096);
    assert!(buf.is_host());

    let weights = Context::metadata(8).unwrap();
    let w = weights.new_tensor_1d(GgmlType::F32, 16).unwrap();
    w.set_name("w").unwrap();
    buf.alloc_tensor_at(&weights, w, 256).unwrap();
    assert_eq!(w.get_f32().unwrap(), vals);

    // Sequential placement after it, in the same buffer.
    let b = weights.new_tensor_1d(GgmlType::F32, 16).unwrap();
    buf.alloc_tensor(&weights, b).unwrap();
    b.set_f32(&vals.iter().map(|v| v * 2.0).collect::<Vec<_>>())
        .unwrap();

    // Errors: twice, out of range, wrong context, too big.
    assert!(matches!(
        buf.alloc_tensor(&weights, w),
        Err(GgmlError::AlreadyAllocated { .. })
    ));
    let late = weights.new_tensor_1d(GgmlType::F32, 16).unwrap();
    assert!(matches!(
        buf.alloc_tensor_at(&weights, late, 4090),
        Err(GgmlError::OutOfBounds { .. })
    ));
    let other = Context::metadata(4).unwrap();
    assert!(matches!(
        buf.alloc_tensor(&other, late),
        Err(GgmlError::IncompatibleTensor { .. })
    ));
    let huge = weights.new_tensor_1d(GgmlType::F32, 2048).unwrap();
    assert!(matches!(
        buf.alloc_tensor(&weights, huge),
        Err(GgmlError::OutOfBounds { .. })
    ));

    // The context keeps the buffer (and its memory) alive after the handle is gone.
    drop(buf);
    assert_eq!(w.get_f32().unwrap(), vals);
    assert!(weights.tensor_by_name("w").unwrap().same_as(w));

    // Compute with the host-buffer tensors as inputs.
    let ctx = Context::metadata(8).unwrap();
    let s = ctx.add(w, b).unwrap();
    s.set_name("sum").unwrap();
    let mut g = ctx.new_graph(8).unwrap();
    g.build_forward_expand(s).unwrap();
    let alloc = GraphAllocator::new(&be).unwrap();
    alloc.alloc_graph(&g).unwrap();
    be.compute(&g).unwrap();
    let want: Vec<f64> = vals.iter().map(|&v| f64::from(v) * 3.0).collect();
    assert_close("host add", &s.get_f32().unwrap(), &want, 1e-6, 0.0);
    // Tensors that depend on another context are not reachable by name.
    assert!(ctx.tensor_by_name("sum").is_none());

    // A plain Vec and an anonymous mapping work too.
    for mem in [
        BackendBuffer::from_host_memory(vec![0u8; 1000]).unwrap(),
        BackendBuffer::from_host_memory(memmap2::MmapMut::map_anon(4096).unwrap()).unwrap(),
    ] {
        let c = Context::metadata(2).unwrap();
        let t = c.new_tensor_2d(GgmlType::F32, 4, 4).unwrap();
        mem.alloc_tensor(&c, t).unwrap();
        t.set_f32(&vals).unwrap();
        assert_eq!(t.get_f32().unwrap(), vals);
    }
    assert!(BackendBuffer::from_host_memory(Vec::new()).is_err());
}

#[test]
fn alloc_ctx_tensors_and_graph_allocator_leases() {
    let be = cpu();
    let weights = Context::metadata(8).unwrap();
    let w = weights.new_tensor_2d(GgmlType::F32, 8, 4).unwrap();
    let wv = weights.view_1d(w, 8, 32).unwrap();
    let buf = weights.alloc_tensors(&be).unwrap();
    assert!(buf.size() >= 8 * 4 * 4);
    let vw = rand_vec(27, 32);
    w.set_f32(&vw).unwrap();
    assert_eq!(wv.get_f32().unwrap(), vw[8..16].to_vec());
    // Nothing left to allocate; own-memory contexts cannot be bulk-allocated.
    assert!(matches!(
        weights.alloc_tensors(&be),
        Err(GgmlError::WrongContextKind { .. })
    ));
    let own = Context::with_memory(1 << 16).unwrap();
    own.new_tensor_1d(GgmlType::F32, 4).unwrap();
    assert!(matches!(
        own.alloc_tensors(&be),
        Err(GgmlError::WrongContextKind { .. })
    ));

    let alloc = GraphAllocator::new(&be).unwrap();
    let step = |alloc: &GraphAllocator| -> Result<Vec<f32>> {
        let ctx = Context::metadata(8)?;
        let x = input(&ctx, GgmlType::F32, &[8, 1]);
        let y = ctx.mul_mat(w, x)?;
        let mut g = ctx.new_graph(8)?;
        g.build_forward_expand(y)?;
        alloc.alloc_graph(&g)?;
        x.set_f32(&[1.0; 8])?;
        be.compute(&g)?;
        y.get_f32()
    };
    let first = step(&alloc).unwrap();
    let want: Vec<f64> = (0..4)
        .map(|r| vw[r * 8..][..8].iter().map(|&v| f64::from(v)).sum())
        .collect();
    assert_close("weights matvec", &first, &want, 1e-5, 1e-6);

    // While a context holds the allocator's buffer, it cannot be reused.
    let ctx1 = Context::metadata(8).unwrap();
    let x1 = ctx1.new_tensor_1d(GgmlType::F32, 8).unwrap();
    let y1 = ctx1.neg(x1).unwrap();
    let mut g1: Graph<'_> = ctx1.new_graph(8).unwrap();
    g1.build_forward_expand(y1).unwrap();
    alloc.alloc_graph(&g1).unwrap();
    assert!(matches!(step(&alloc), Err(GgmlError::AllocatorInUse)));
    drop(g1);
    drop(ctx1);
    assert_eq!(step(&alloc).unwrap(), first);
    assert!(alloc.buffer_size() > 0);
}

#[test]
fn own_memory_context_computes_on_cpu() {
    let be = cpu();
    let ctx = Context::with_memory(1 << 20).unwrap();
    let a = ctx.new_tensor_1d(GgmlType::F32, 8).unwrap();
    let b = ctx.new_tensor_1d(GgmlType::F32, 8).unwrap();
    let (va, vb) = (rand_vec(28, 8), rand_vec(29, 8));
    a.set_f32(&va).unwrap();
    b.set_f32(&vb).unwrap();
    let c = ctx.sub(a, b).unwrap();
    let d = ctx.sum(c).unwrap();
    let mut g = ctx.new_graph(8).unwrap();
    g.build_forward_expand(d).unwrap();
    be.compute(&g).unwrap();
    let want: Vec<f64> = va
        .iter()
        .zip(&vb)
        .map(|(&x, &y)| f64::from(x) - f64::from(y))
        .collect();
    assert_close("sub", &c.get_f32().unwrap(), &want, 1e-6, 1e-7);
    assert_close(
        "sum",
        &d.get_f32().unwrap(),
        &[want.iter().sum()],
        1e-5,
        1e-6,
    );
    assert_eq!(ctx.tensors().len(), 4);
}

// ---------------------------------------------------------------------------------------------
// Quantization and types
// ---------------------------------------------------------------------------------------------

#[test]
fn quantize_dequantize_error_bounds() {
    let n = 32 * 16;
    let mut x = rand_vec(30, n);
    x[40] = 7.5; // one block with a large outlier
    for (ty, bound) in [
        (GgmlType::Q8_0, 1.0 / 127.0 * 0.51),
        (GgmlType::Q4_0, 1.0 / 8.0 * 1.01),
    ] {
        let q = quant::quantize(ty, &x, 64).unwrap();
        assert_eq!(q.len(), ty.row_size(n as u64).unwrap());
        let y = quant::dequantize(ty, &q, n).unwrap();
        for (b, (xb, yb)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            // f16 storage of the scale adds a relative error of 2^-11.
            let tol = f64::from(amax) * (bound + 1.0 / 1024.0);
            for (&a, &b2) in xb.iter().zip(yb) {
                let err = f64::from((a - b2).abs());
                assert!(
                    err <= tol,
                    "{ty} block {b}: {a} -> {b2} (error {err} > {tol})"
                );
            }
        }
        // ggml's quantizer and the pure-Rust reference quantizer agree bit for bit.
        let mut reference = vec![0u8; q.len()];
        match ty {
            GgmlType::Q8_0 => dtype::quantize_q8_0(&x, &mut reference).unwrap(),
            _ => dtype::quantize_q4_0(&x, &mut reference).unwrap(),
        }
        assert_eq!(q, reference, "{ty}: ggml and dtype.rs quantizers differ");
        let mut deq = vec![0f32; n];
        dtype::dequantize(ty, &q, &mut deq).unwrap();
        assert_eq!(deq, y, "{ty}: ggml and dtype.rs dequantizers differ");
    }
    // Argument errors.
    assert!(quant::quantize(GgmlType::Q8_0, &x, 33).is_err());
    assert!(quant::quantize(GgmlType::Q8_0, &x[..100], 64).is_err());
    assert!(quant::quantize(GgmlType::I32, &x, 64).is_err());
    assert!(quant::quantize(GgmlType::IQ2_XXS, &vec![0.0; 256], 256).is_err());
    assert!(quant::dequantize(GgmlType::Q8_0, &[0u8; 33], 32).is_err());
}

#[test]
fn ggml_type_sizes_match_dtype_table() {
    for &ty in GgmlType::ALL {
        let t = quant::type_traits(ty);
        assert_eq!(t.block_size, ty.block_size(), "ggml_blck_size({ty})");
        assert_eq!(t.type_size, ty.type_size(), "ggml_type_size({ty})");
        assert_eq!(t.is_quantized, ty.is_quantized(), "ggml_is_quantized({ty})");
        assert_eq!(t.name, ty.name(), "ggml_type_name({ty})");
    }
}

#[test]
fn device_registry_lists_cpu() {
    let devs = audio_engine::ggml::devices();
    assert!(devs.iter().any(|d| d.kind == DeviceKind::Cpu), "{devs:?}");
    let cpu_name = devs
        .iter()
        .find(|d| d.kind == DeviceKind::Cpu)
        .unwrap()
        .name
        .clone();
    let be = Backend::from_device_name(&cpu_name).unwrap();
    assert!(be.is_cpu());
    assert!(Backend::from_device_name("no-such-device").is_err());
    let best = Backend::best_available().unwrap();
    assert!(!best.name().is_empty());
    // Handles are Send + Sync.
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Backend>();
    assert_send_sync::<BackendBuffer>();
    assert_send_sync::<GraphAllocator>();
    fn assert_send<T: Send>() {}
    assert_send::<Context>();
}
