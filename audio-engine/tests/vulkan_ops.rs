//! The ops the LFM2-Audio graphs use, computed on ggml's Vulkan backend through the backend
//! scheduler (Vulkan first, the CPU as fallback) and compared with the same graph on the CPU.
//!
//! Each case builds its graph twice with the same code: once with its operands (weights,
//! activations, caches) in a Vulkan buffer and once in a CPU buffer; the small inputs that a
//! model step feeds in (positions, row indices, masks) are graph inputs, which the scheduler
//! places in host memory and copies to the device. The error of a case is the largest
//! difference from the CPU's result over the largest magnitude of the CPU's result (its
//! normalised max error); it is printed for every case and asserted under the case's stated
//! tolerance. Every case also checks the scheduler's fallback report: which nodes ran on the CPU.
//!
//! Runs on any Vulkan device; CI uses Mesa's lavapipe (`mesa-vulkan-drivers`), which ggml only
//! lists when `GGML_VK_VISIBLE_DEVICES` names it (set to `0` here when unset). Without a Vulkan
//! device every test prints why and passes.
#![cfg(feature = "vulkan")]

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use audio_engine::ggml::{
    quant, Backend, Context, Device, DeviceError, FallbackReport, GgmlError, GgmlType, GluOp,
    Result, RopeMode, RopeParams, Scheduler, Tensor,
};

/// The Vulkan backend, or `None` (with the reason printed) when there is no Vulkan device.
fn vulkan() -> Option<Backend> {
    static VK: OnceLock<Option<Backend>> = OnceLock::new();
    VK.get_or_init(|| {
        if std::env::var_os("GGML_VK_VISIBLE_DEVICES").is_none() {
            // why: ggml's Vulkan backend skips CPU-type devices (lavapipe) unless listed here.
            // Every test calls this first, so no other thread is inside ggml yet (the
            // OnceLock holds them until this returns).
            std::env::set_var("GGML_VK_VISIBLE_DEVICES", "0");
        }
        match Backend::for_device(&Device::Vulkan(0)) {
            Ok(b) => {
                let desc = b.device().map(|d| d.description).unwrap_or_default();
                println!("vulkan_ops: device {} ({desc})", b.name());
                Some(b)
            }
            Err(GgmlError::Device(e @ DeviceError::NotFound { .. })) => {
                common::skip_without_device(&format!("vulkan_ops: skipped, no Vulkan device: {e}"));
                None
            }
            Err(e) => panic!("vulkan:0 is listed but does not start: {e}"),
        }
    })
    .clone()
}

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

/// What to write into a tensor before computing.
enum Fill {
    F32(Vec<f32>),
    F16(Vec<f32>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bytes(Vec<u8>),
}

impl Fill {
    fn write(&self, t: Tensor<'_>) -> Result<()> {
        match self {
            Fill::F32(v) => t.set_f32(v),
            Fill::F16(v) => t.set_f32_as_f16(v),
            Fill::I32(v) => t.set_i32(v),
            Fill::I64(v) => t.set_i64(v),
            Fill::Bytes(b) => t.set_bytes(0, b),
        }
    }
}

/// One case's graph: the tensors to fill and the outputs to compare.
struct Built<'a> {
    fills: Vec<(Tensor<'a>, Fill)>,
    outs: Vec<Tensor<'a>>,
}

/// Makes tensors for a case: `data` ones live in the backend's buffer (like weights and
/// caches), `input` ones are graph inputs (host memory, copied to the device by the scheduler).
struct Maker<'a> {
    data: &'a Context,
    graph: &'a Context,
    fills: Vec<(Tensor<'a>, Fill)>,
}

impl<'a> Maker<'a> {
    fn data(&mut self, ty: GgmlType, ne: &[i64], fill: Fill) -> Tensor<'a> {
        let t = self.data.new_tensor(ty, ne).expect("data tensor");
        self.fills.push((t, fill));
        t
    }

    /// An F32 data tensor of random values.
    fn f32(&mut self, seed: u64, ne: &[i64]) -> Tensor<'a> {
        let n = ne.iter().product::<i64>() as usize;
        self.data(GgmlType::F32, ne, Fill::F32(rand_vec(seed, n)))
    }

    fn input(&mut self, ty: GgmlType, ne: &[i64], fill: Fill) -> Tensor<'a> {
        let t = self.graph.new_tensor(ty, ne).expect("input tensor");
        t.set_input();
        self.fills.push((t, fill));
        t
    }

    fn done(self, outs: Vec<Tensor<'a>>) -> Built<'a> {
        Built {
            fills: self.fills,
            outs,
        }
    }
}

/// Reads an output as F32.
fn read(t: Tensor<'_>) -> Vec<f32> {
    match t.ty() {
        GgmlType::F16 => t.get_f16_as_f32().expect("read f16"),
        GgmlType::I32 => t
            .get_i32()
            .expect("read i32")
            .into_iter()
            .map(|v| v as f32)
            .collect(),
        _ => t.get_f32().expect("read f32"),
    }
}

/// Builds the case with `build`, computes it through a scheduler over `backend` and returns the
/// outputs and the scheduler's fallback report.
fn run<F>(backend: &Backend, build: &F) -> (Vec<Vec<f32>>, FallbackReport)
where
    F: for<'a> Fn(&mut Maker<'a>) -> Vec<Tensor<'a>>,
{
    let data = Context::metadata_with_graph(64, 0).unwrap();
    let graph_ctx = Context::metadata_with_graph(256, 1024).unwrap();
    let mut maker = Maker {
        data: &data,
        graph: &graph_ctx,
        fills: Vec::new(),
    };
    let outs = build(&mut maker);
    let built = maker.done(outs);
    let _buffer = if data.tensors().is_empty() {
        None
    } else {
        Some(data.alloc_tensors(backend).expect("data buffer"))
    };
    let mut g = graph_ctx.new_graph(1024).unwrap();
    for &o in &built.outs {
        o.set_output();
        g.build_forward_expand(o).unwrap();
    }
    let sched = Scheduler::new(backend, 4096, 2).unwrap();
    sched.alloc_graph(&g).unwrap();
    for (t, fill) in &built.fills {
        fill.write(*t).unwrap();
    }
    sched.compute(&g).unwrap();
    let report = sched.fallback(&g).unwrap();
    (built.outs.iter().map(|&o| read(o)).collect(), report)
}

/// Largest |got - want| over the largest |want| (1 when `want` is all zeros).
fn normalised_max_error(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want
        .iter()
        .fold(0f64, |m, &w| m.max(f64::from(w).abs()))
        .max(f64::MIN_POSITIVE);
    let scale = if scale == f64::MIN_POSITIVE {
        1.0
    } else {
        scale
    };
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_nan() != w.is_nan() {
                f64::INFINITY
            } else if g == w || (g.is_nan() && w.is_nan()) {
                0.0
            } else {
                (f64::from(g) - f64::from(w)).abs() / scale
            }
        })
        .fold(0f64, f64::max)
}

/// Which nodes a case expects on the CPU fallback.
enum Expect {
    /// Every computing node on the device.
    AllOnDevice,
    /// Exactly these ops (with counts) on the CPU.
    OnCpu(&'static [(&'static str, usize)]),
}

/// Runs one case on Vulkan and on the CPU and checks the error and the fallback report.
fn check<F>(name: &str, tol: f64, expect: Expect, build: F)
where
    F: for<'a> Fn(&mut Maker<'a>) -> Vec<Tensor<'a>>,
{
    let Some(vk) = vulkan() else { return };
    let cpu = Backend::cpu().unwrap();
    let (want, cpu_report) = run(&cpu, &build);
    let (got, report) = run(&vk, &build);
    assert!(
        cpu_report.is_empty(),
        "{name}: a CPU-only scheduler has no fallback"
    );
    let errs: Vec<f64> = got
        .iter()
        .zip(&want)
        .map(|(g, w)| normalised_max_error(g, w))
        .collect();
    let err = errs.iter().copied().fold(0f64, f64::max);
    let per_output: Vec<String> = errs.iter().map(|e| format!("{e:.1e}")).collect();
    println!(
        "vulkan_ops: {name:<40} max rel error {err:.2e} [{}] (tolerance {tol:.0e}); {report}",
        per_output.join(" ")
    );
    assert!(
        err <= tol,
        "{name}: Vulkan differs from the CPU by {err:e} (normalised), over {tol:e}"
    );
    assert!(
        report.device_nodes > 0,
        "{name}: nothing ran on the device: {report}"
    );
    match expect {
        Expect::AllOnDevice => assert!(report.is_empty(), "{name}: fell back: {report}"),
        Expect::OnCpu(ops) => {
            let want: BTreeMap<String, usize> =
                ops.iter().map(|&(op, n)| (op.to_owned(), n)).collect();
            assert_eq!(report.cpu_ops, want, "{name}: {report}");
        }
    }
}

#[test]
fn device_is_listed() {
    let Some(vk) = vulkan() else { return };
    let devices = audio_engine::ggml::devices();
    for d in &devices {
        println!(
            "vulkan_ops: registry device {} ({}), {:?}",
            d.name, d.description, d.kind
        );
    }
    assert!(devices.iter().any(|d| d.name == vk.name()), "{devices:?}");
    assert!(!vk.is_cpu());
    let e = Backend::for_device(&Device::Vulkan(99)).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("vulkan:99: no such device; Vulkan devices found: "),
        "{msg}"
    );
    assert!(msg.contains(vk.name()), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// Matrix products with device-resident weights of each type the packages use
// ---------------------------------------------------------------------------------------------

fn mul_mat_case(ty: GgmlType, tol: f64) {
    let (k, n, m) = (256i64, 48i64, 7i64);
    check(
        &format!("mul_mat {ty:?} weights"),
        tol,
        Expect::AllOnDevice,
        move |mk| {
            let w = rand_vec(11, (k * n) as usize);
            let fill = match ty {
                GgmlType::F32 => Fill::F32(w),
                GgmlType::F16 => Fill::F16(w),
                q => Fill::Bytes(quant::quantize(q, &w, k as usize).unwrap()),
            };
            let wt = mk.data(ty, &[k, n], fill);
            let x = mk.f32(12, &[k, m]);
            vec![mk.graph.mul_mat(wt, x).unwrap()]
        },
    );
}

#[test]
fn mul_mat_f32() {
    mul_mat_case(GgmlType::F32, 1e-3);
}

#[test]
fn mul_mat_f16() {
    mul_mat_case(GgmlType::F16, 1e-3);
}

#[test]
fn mul_mat_q8_0() {
    mul_mat_case(GgmlType::Q8_0, 2e-2);
}

#[test]
fn mul_mat_q4_0() {
    mul_mat_case(GgmlType::Q4_0, 2e-2);
}

/// A decode-step product: one column, the shape whose kernel differs (matrix-vector).
#[test]
fn mul_mat_one_column_q4_0() {
    check("mul_mat Q4_0 one column", 2e-2, Expect::AllOnDevice, |mk| {
        let (k, n) = (512i64, 64i64);
        let w = rand_vec(13, (k * n) as usize);
        let wt = mk.data(
            GgmlType::Q4_0,
            &[k, n],
            Fill::Bytes(quant::quantize(GgmlType::Q4_0, &w, k as usize).unwrap()),
        );
        let x = mk.f32(14, &[k, 1]);
        vec![mk.graph.mul_mat(wt, x).unwrap()]
    });
}

// ---------------------------------------------------------------------------------------------
// Norms, elementwise, activations
// ---------------------------------------------------------------------------------------------

#[test]
fn rms_norm_mul_add() {
    check("rms_norm * w + b", 1e-5, Expect::AllOnDevice, |mk| {
        let g = mk.graph;
        let x = mk.f32(21, &[128, 9]);
        let w = mk.f32(22, &[128]);
        let b = mk.f32(23, &[128, 9]);
        let n = g.rms_norm(x, 1e-5).unwrap();
        vec![g.add(g.mul(n, w).unwrap(), b).unwrap()]
    });
}

#[test]
fn norm_scale_sub_div() {
    check("norm, scale, sub, div", 1e-5, Expect::AllOnDevice, |mk| {
        let g = mk.graph;
        let x = mk.f32(24, &[64, 5]);
        let y = mk.f32(25, &[64, 5]);
        let n = g.norm(x, 1e-5).unwrap();
        let s = g.scale(n, 0.5).unwrap();
        let d = g.sub(s, y).unwrap();
        let ones = mk.data(GgmlType::F32, &[64, 5], Fill::F32(vec![2.0; 320]));
        vec![g.div(d, ones).unwrap()]
    });
}

/// GELU differs most: ggml's CPU backend looks it up in a table of F16 inputs
/// (`GGML_GELU_FP16`), Vulkan computes the tanh form in F32.
#[test]
fn activations() {
    check(
        "silu, gelu, gelu_erf, sigmoid, tanh",
        1e-3,
        Expect::AllOnDevice,
        |mk| {
            let g = mk.graph;
            let x = mk.f32(31, &[96, 4]);
            vec![
                g.silu(x).unwrap(),
                g.gelu(x).unwrap(),
                g.gelu_erf(x).unwrap(),
                g.sigmoid(x).unwrap(),
                g.tanh(x).unwrap(),
            ]
        },
    );
}

#[test]
fn glu_variants() {
    check("swiglu, glu_split(silu)", 1e-5, Expect::AllOnDevice, |mk| {
        let g = mk.graph;
        let x = mk.f32(32, &[64, 6]);
        let a = mk.f32(33, &[32, 6]);
        let b = mk.f32(34, &[32, 6]);
        vec![
            g.swiglu(x).unwrap(),
            g.glu_split(a, b, GluOp::Swiglu).unwrap(),
        ]
    });
}

// ---------------------------------------------------------------------------------------------
// Convolutions: the LFM2 short conv (ssm_conv), the encoder's im2col convolutions
// ---------------------------------------------------------------------------------------------

#[test]
fn ssm_conv_short_conv() {
    check(
        "ssm_conv (LFM2 short conv)",
        1e-5,
        Expect::AllOnDevice,
        |mk| {
            // sx: [d_conv - 1 + n_t, d_inner, n_s], c: [d_conv, d_inner]
            let sx = mk.f32(41, &[2 + 6, 64, 2]);
            let c = mk.f32(42, &[3, 64]);
            vec![mk.graph.ssm_conv(sx, c).unwrap()]
        },
    );
}

#[test]
fn conv_1d_im2col() {
    check(
        "conv_1d (im2col + mul_mat)",
        1e-3,
        Expect::AllOnDevice,
        |mk| {
            // kernel [k, c_in, c_out], input [len, c_in]
            let kernel = mk.data(
                GgmlType::F16,
                &[3, 16, 8],
                Fill::F16(rand_vec(43, 3 * 16 * 8)),
            );
            let x = mk.f32(44, &[40, 16]);
            vec![mk.graph.conv_1d(kernel, x, 2, 1, 1).unwrap()]
        },
    );
}

#[test]
fn conv_1d_depthwise() {
    check("conv_1d_dw", 1e-3, Expect::AllOnDevice, |mk| {
        let kernel = mk.data(GgmlType::F16, &[9, 1, 32], Fill::F16(rand_vec(45, 9 * 32)));
        let x = mk.f32(46, &[50, 32]);
        vec![mk.graph.conv_1d_dw(kernel, x, 1, 4, 1).unwrap()]
    });
}

// ---------------------------------------------------------------------------------------------
// Attention without flash attention: mul_mat + soft_max_ext (mask, scale) + mul_mat, and rope
// ---------------------------------------------------------------------------------------------

#[test]
fn attention_mul_mat_soft_max_ext() {
    check(
        "attention (mul_mat, soft_max_ext)",
        1e-3,
        Expect::AllOnDevice,
        |mk| {
            let g = mk.graph;
            let (hd, nh, nq, nkv) = (32i64, 4i64, 5i64, 12i64);
            let q = mk.f32(51, &[hd, nq, nh]);
            let k = mk.f32(52, &[hd, nkv, nh]);
            let v = mk.f32(53, &[nkv, hd, nh]);
            // A causal mask over the cache (the last nq positions are the new ones), F16 as the
            // backbone builds it, padded to the row count soft_max_ext expects.
            let mask: Vec<f32> = (0..nq)
                .flat_map(|i| {
                    (0..nkv).map(move |j| {
                        if j <= nkv - nq + i {
                            0.0
                        } else {
                            f32::NEG_INFINITY
                        }
                    })
                })
                .collect();
            let m = mk.input(GgmlType::F16, &[nkv, nq], Fill::F16(mask));
            let kq = g.mul_mat(k, q).unwrap();
            let p = g
                .soft_max_ext(kq, Some(m), 1.0 / (hd as f32).sqrt(), 0.0)
                .unwrap();
            vec![g.mul_mat(v, p).unwrap()]
        },
    );
}

/// Positions up to 4095: the angles reach thousands of radians, where the CPU's and the shader's
/// F32 `sin`/`cos` differ by about 2e-4 of the magnitude.
#[test]
fn rope_neox_and_normal() {
    check("rope_ext (neox, normal)", 5e-4, Expect::AllOnDevice, |mk| {
        let g = mk.graph;
        let (hd, nh, nt) = (64i64, 4i64, 6i64);
        let x = mk.f32(61, &[hd, nh, nt]);
        let pos = mk.input(
            GgmlType::I32,
            &[nt],
            Fill::I32(vec![0, 1, 2, 17, 100, 4095]),
        );
        vec![
            g.rope_ext(
                x,
                pos,
                None,
                RopeParams::new(hd as usize, RopeMode::Neox, 1e6),
            )
            .unwrap(),
            g.rope_ext(
                x,
                pos,
                None,
                RopeParams::new(hd as usize, RopeMode::Normal, 1e4),
            )
            .unwrap(),
        ]
    });
}

// ---------------------------------------------------------------------------------------------
// Rows, layout, caches
// ---------------------------------------------------------------------------------------------

#[test]
fn get_rows_f32_f16_q8_0() {
    check(
        "get_rows (F32, F16, Q8_0)",
        1e-6,
        Expect::AllOnDevice,
        |mk| {
            let g = mk.graph;
            let (d, rows) = (64i64, 20i64);
            let table = rand_vec(71, (d * rows) as usize);
            let a = mk.data(GgmlType::F32, &[d, rows], Fill::F32(table.clone()));
            let b = mk.data(GgmlType::F16, &[d, rows], Fill::F16(table.clone()));
            let c = mk.data(
                GgmlType::Q8_0,
                &[d, rows],
                Fill::Bytes(quant::quantize(GgmlType::Q8_0, &table, d as usize).unwrap()),
            );
            let idx = mk.input(GgmlType::I32, &[5], Fill::I32(vec![3, 0, 19, 3, 7]));
            vec![
                g.get_rows(a, idx).unwrap(),
                g.get_rows(b, idx).unwrap(),
                g.get_rows(c, idx).unwrap(),
            ]
        },
    );
}

#[test]
fn concat_permute_cont_cpy() {
    check(
        "concat, permute+cont, cpy to F16",
        1e-3,
        Expect::AllOnDevice,
        |mk| {
            let g = mk.graph;
            let a = mk.f32(81, &[16, 3, 4]);
            let b = mk.f32(82, &[16, 5, 4]);
            let c = g.concat(a, b, 1).unwrap();
            let p = g.cont(g.permute(c, [1, 0, 2, 3]).unwrap()).unwrap();
            vec![c, p, g.cast(p, GgmlType::F16).unwrap()]
        },
    );
}

/// A decode step writing its keys into a device-resident cache with `set_rows` (the cache is
/// the output, read back whole).
#[test]
fn set_rows_into_a_device_cache() {
    check(
        "set_rows into a cache (F16)",
        1e-3,
        Expect::AllOnDevice,
        |mk| {
            let g = mk.graph;
            let (d, cells) = (32i64, 10i64);
            let cache = mk.data(
                GgmlType::F16,
                &[d, cells],
                Fill::F16(rand_vec(91, (d * cells) as usize)),
            );
            let src = mk.f32(92, &[d, 3]);
            let idx = mk.input(GgmlType::I64, &[3], Fill::I64(vec![9, 2, 5]));
            vec![g.set_rows(cache, src, idx).unwrap()]
        },
    );
}

#[test]
fn reductions() {
    check("sum_rows, mean, argmax", 1e-5, Expect::AllOnDevice, |mk| {
        let g = mk.graph;
        let x = mk.f32(101, &[100, 7]);
        vec![
            g.sum_rows(x).unwrap(),
            g.mean(x).unwrap(),
            g.argmax(x).unwrap(),
        ]
    });
}

// ---------------------------------------------------------------------------------------------
// Fallbacks
// ---------------------------------------------------------------------------------------------

/// A product broadcast over dimension 3, which ggml-vulkan has no kernel for (it needs equal
/// `ne[3]`): the scheduler runs it on the CPU, copying its device-resident weight and its
/// input (a scale computed on the device) over. The SILU after it follows it to the CPU (ggml
/// gives a node no weight pins to the backend that holds most of its inputs). The result must
/// still be the CPU's.
#[test]
fn an_op_vulkan_lacks_falls_back_to_the_cpu() {
    check(
        "mul_mat broadcast over dim 3 (fallback)",
        1e-4,
        Expect::OnCpu(&[("MUL_MAT", 1), ("SILU", 1)]),
        |mk| {
            let g = mk.graph;
            let w = mk.f32(111, &[64, 8]);
            let x = mk.f32(112, &[64, 3, 1, 2]);
            let xs = g.scale(x, 0.5).unwrap();
            let p = g.mul_mat(w, xs).unwrap();
            vec![g.silu(p).unwrap()]
        },
    );
}

/// A node whose memory is already in a Vulkan buffer (a copy into a device-resident cache) with
/// a conversion Vulkan has no kernel for (F32 to Q4_K): no backend can both run it and use that
/// buffer, which ggml's scheduler aborts on. The wrapper refuses it with an error first.
#[test]
fn a_device_resident_node_no_backend_can_run_is_an_error() {
    let Some(vk) = vulkan() else { return };
    let data = Context::metadata_with_graph(4, 0).unwrap();
    let cache = data.new_tensor(GgmlType::Q4_K, &[256, 2]).unwrap();
    let _buffer = data.alloc_tensors(&vk).unwrap();
    let ctx = Context::metadata_with_graph(16, 64).unwrap();
    let src = ctx.new_tensor(GgmlType::F32, &[256, 2]).unwrap();
    src.set_input();
    let c = ctx.cpy(src, cache).unwrap();
    let mut g = ctx.new_graph(64).unwrap();
    g.build_forward_expand(c).unwrap();
    let sched = Scheduler::new(&vk, 256, 1).unwrap();
    let e = sched.alloc_graph(&g).unwrap_err();
    println!("vulkan_ops: refused as expected: {e}");
    assert!(
        matches!(&e, GgmlError::UnsupportedOp { op, .. } if op == "CPY"),
        "{e:?}"
    );
    assert!(e.to_string().contains(vk.name()), "{e}");
}

/// The scheduler's lease: a second graph cannot be allocated while the first one's context
/// lives, and computing a graph that is not the current allocation is an error.
#[test]
fn scheduler_allocations_are_leased() {
    let Some(vk) = vulkan() else { return };
    let sched = Scheduler::new(&vk, 256, 1).unwrap();
    fn make(ctx: &Context) -> audio_engine::ggml::Graph<'_> {
        let a = ctx.new_tensor(GgmlType::F32, &[8]).unwrap();
        a.set_input();
        let mut g = ctx.new_graph(16).unwrap();
        g.build_forward_expand(ctx.scale(a, 2.0).unwrap()).unwrap();
        g
    }
    let c1 = Context::metadata_with_graph(8, 16).unwrap();
    let g1 = make(&c1);
    sched.alloc_graph(&g1).unwrap();
    let c2 = Context::metadata_with_graph(8, 16).unwrap();
    let g2 = make(&c2);
    assert_eq!(
        sched.alloc_graph(&g2).unwrap_err(),
        GgmlError::AllocatorInUse
    );
    assert!(sched.compute(&g2).is_err());
    drop(g1);
    drop(c1);
    sched.alloc_graph(&g2).unwrap();
    c2.tensors()[0].set_f32(&[1.0; 8]).unwrap();
    sched.compute(&g2).unwrap();
    let out = g2.node(g2.n_nodes() - 1).unwrap().get_f32().unwrap();
    assert_eq!(out, vec![2.0; 8]);
}
