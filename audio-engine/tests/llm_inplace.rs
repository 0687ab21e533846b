//! Multi-sequence decode of tiny random hybrid models: the in-place gated-delta-net state update
//! gives the same logits, byte for byte, as the gathered path (`GGML_GDN_STATE_GATHER=1`).
//!
//! libllama reads the switch once per process, so each path runs in a child process (this test
//! binary re-run with `LLM_SCRIPT_DUMP` set); the parent compares the dumps.
//!
//! In a `vulkan` build the same script also runs with the layers and the recurrent state on a
//! Vulkan device (ggml-sys/upstream/patches/0006 runs the in-place update there), against the gathered path
//! on the device and against the CPU.

mod common;

use lfm2_llm::{Decoder, DecoderConfig, EvalObserver, RandomModel, Sampler, SeqId};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const GGML_OP_GATED_DELTA_NET: u32 = ggml_sys::GGML_OP_GATED_DELTA_NET;

/// Counts computed gated-delta-net nodes in cache-writing form (op_params[2] = 1) and plain form.
struct GdnCounter {
    inplace: Arc<AtomicUsize>,
    gathered: Arc<AtomicUsize>,
}

impl EvalObserver for GdnCounter {
    fn wants(&mut self, op: u32, _name: &str, _p: &[i32; 16]) -> bool {
        op == GGML_OP_GATED_DELTA_NET
    }
    fn computed(&mut self, op: u32, _name: &str, p: &[i32; 16]) {
        if op == GGML_OP_GATED_DELTA_NET {
            let c = if p[2] != 0 {
                &self.inplace
            } else {
                &self.gathered
            };
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Everything a script run produced: logits bytes per step, the tokens sampled, and how the
/// states were updated.
struct Run {
    logits: Vec<u8>,
    /// Where each step's logits end in `logits`.
    step_ends: Vec<usize>,
    /// (sequence, token) sampled at each step, in `step`'s order.
    tokens: Vec<Vec<(SeqId, i32)>>,
    inplace: usize,
    gathered: usize,
    /// Layers libllama put on a GPU device (its log's `offloaded N/M layers`).
    offloaded: usize,
}

impl Run {
    fn steps(&self) -> usize {
        self.step_ends.len()
    }

    /// The logits bytes of step `i` (read by the device comparison only).
    #[cfg_attr(not(feature = "vulkan"), allow(dead_code))]
    fn step_logits(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.step_ends[i - 1] };
        &self.logits[start..self.step_ends[i]]
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut put = |v: usize| out.extend_from_slice(&(v as u64).to_le_bytes());
        for v in [self.inplace, self.gathered, self.offloaded, self.steps()] {
            put(v);
        }
        for (end, tokens) in self.step_ends.iter().zip(&self.tokens) {
            put(*end);
            put(tokens.len());
            for &(seq, token) in tokens {
                put(seq as usize);
                put(token as usize);
            }
        }
        out.extend_from_slice(&self.logits);
        out
    }

    fn from_bytes(bytes: &[u8]) -> Run {
        let mut at = 0;
        let mut num = || {
            let v = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            at += 8;
            v
        };
        let (inplace, gathered, offloaded, steps) = (num(), num(), num(), num());
        let (mut step_ends, mut tokens) = (Vec::new(), Vec::new());
        for _ in 0..steps {
            step_ends.push(num());
            let n = num();
            tokens.push((0..n).map(|_| (num() as SeqId, num() as i32)).collect());
        }
        Run {
            logits: bytes[at..].to_vec(),
            step_ends,
            tokens,
            inplace,
            gathered,
            offloaded,
        }
    }
}

fn record(dec: &Decoder, out: &mut Vec<u8>) {
    for seq in dec.active() {
        out.extend_from_slice(&seq.to_le_bytes());
        for v in dec.logits(seq).unwrap() {
            out.extend_from_slice(&v.to_bits().to_le_bytes());
        }
    }
}

/// The scripted decode: `n` sequences join with different prompts and decode together; then one
/// joins late, one leaves, one forks into two (seq_cp fan-out), and (with snapshots) one drafts
/// three tokens and rolls two back.
fn script(model: &RandomModel, n: u32, n_rs_seq: u32) -> Run {
    let inplace = Arc::new(AtomicUsize::new(0));
    let gathered = Arc::new(AtomicUsize::new(0));
    let obs = GdnCounter {
        inplace: inplace.clone(),
        gathered: gathered.clone(),
    };
    let llm = model.build().expect("build model");
    let cfg = DecoderConfig {
        n_seq_max: n + 3,
        n_ctx_per_seq: 64,
        n_batch: 64,
        n_threads: 2,
        n_rs_seq,
    };
    let mut dec = Decoder::with_observer(&llm, cfg, Some(Box::new(obs))).unwrap();
    let mut logits = Vec::new();
    let (mut step_ends, mut tokens) = (Vec::new(), Vec::new());
    let mut step = |dec: &mut Decoder, logits: &mut Vec<u8>| {
        let out = dec.step().unwrap();
        tokens.push(out.iter().map(|o| (o.seq, o.token)).collect::<Vec<_>>());
        record(dec, logits);
        step_ends.push(logits.len());
    };

    let seqs: Vec<SeqId> = (0..n)
        .map(|i| {
            let prompt: Vec<i32> = (0..(2 + i as i32 % 3))
                .map(|t| (7 * i as i32 + 3 * t + 1) % 128)
                .collect();
            let sampler = if i % 2 == 0 {
                Sampler::greedy()
            } else {
                Sampler::top_k(0.9, 8, 100 + i as u64)
            };
            dec.join(&prompt, sampler).unwrap()
        })
        .collect();
    for _ in 0..4 {
        step(&mut dec, &mut logits);
    }
    let late = dec.join(&[5, 9, 11], Sampler::greedy()).unwrap();
    for _ in 0..3 {
        step(&mut dec, &mut logits);
    }
    if n > 1 {
        dec.leave(seqs[0]).unwrap();
        step(&mut dec, &mut logits);
    }
    let src = *seqs.last().unwrap();
    let a = dec.fork(src, Sampler::top_k(1.0, 16, 7)).unwrap();
    let b = dec.fork(src, Sampler::greedy()).unwrap();
    dec.feed(b, &[42]).unwrap();
    for _ in 0..3 {
        step(&mut dec, &mut logits);
    }
    if n_rs_seq > 0 {
        // Draft three tokens on `late`, keep the first, roll back two, continue with another.
        dec.feed(late, &[17, 18, 19]).unwrap();
        step(&mut dec, &mut logits);
        dec.rollback(late, 2).unwrap();
        dec.feed(late, &[23]).unwrap();
        for _ in 0..3 {
            step(&mut dec, &mut logits);
        }
    }
    let _ = (a, b);
    for _ in 0..2 {
        step(&mut dec, &mut logits);
    }
    Run {
        logits,
        step_ends,
        tokens,
        inplace: inplace.load(Ordering::Relaxed),
        gathered: gathered.load(Ordering::Relaxed),
        offloaded: 0,
    }
}

fn model_for(name: &str) -> RandomModel {
    match name {
        "qwen35" => RandomModel::tiny_qwen35(11),
        "qwen3next" => RandomModel::tiny_qwen3next(12),
        other => panic!("unknown model {other}"),
    }
}

/// Child side: run the script named by the environment and write the dump.
fn child_main(path: &str) {
    let spec = std::env::var("LLM_SCRIPT_SPEC").unwrap();
    let parts: Vec<&str> = spec.split(',').collect();
    let offloaded = Arc::new(AtomicUsize::new(0));
    let seen = offloaded.clone();
    lfm2_llm::add_log_hook(move |line| {
        // "load_tensors: offloaded 3/3 layers to GPU"
        if let Some(rest) = line.split("offloaded ").nth(1) {
            if let Some(Ok(n)) = rest.split('/').next().map(str::parse::<usize>) {
                seen.store(n, Ordering::Relaxed);
            }
        }
    });
    let mut run = script(
        &model_for(parts[0]),
        parts[1].parse().unwrap(),
        parts[2].parse().unwrap(),
    );
    run.offloaded = offloaded.load(Ordering::Relaxed);
    std::fs::write(path, run.to_bytes()).unwrap();
}

/// Where a child runs libllama's layers: wherever libllama puts them in this build, or (Vulkan
/// builds) on the Vulkan devices named as `GGML_VK_VISIBLE_DEVICES` names them ("" is none).
#[derive(Clone, Copy)]
enum Devices<'a> {
    Inherited,
    #[cfg_attr(not(feature = "vulkan"), allow(dead_code))]
    Vulkan(&'a str),
}

fn run_child(spec: &str, gather: bool) -> Run {
    run_child_on(spec, gather, Devices::Inherited)
}

fn run_child_on(spec: &str, gather: bool, devices: Devices<'_>) -> Run {
    let dir = std::env::temp_dir();
    let place = match devices {
        Devices::Inherited => "inherited".to_string(),
        Devices::Vulkan(d) => format!("vk{}", d.replace(',', "_")),
    };
    let path = dir.join(format!(
        "llm-inplace-{}-{}-{}-{place}.bin",
        std::process::id(),
        spec.replace(',', "_"),
        gather
    ));
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "inplace_matches_gathered_path",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("LLM_SCRIPT_DUMP", &path)
    .env("LLM_SCRIPT_SPEC", spec)
    .env_remove("GGML_GDN_STATE_GATHER");
    if gather {
        cmd.env("GGML_GDN_STATE_GATHER", "1");
    }
    if let Devices::Vulkan(d) = devices {
        cmd.env("GGML_VK_VISIBLE_DEVICES", d);
    }
    // Captured, so the child's own libtest summary does not mix into ours.
    let out = cmd.output().expect("spawn child");
    assert!(
        out.status.success(),
        "child for {spec} (gather={gather}) failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&path).expect("child dump");
    let _ = std::fs::remove_file(&path);
    Run::from_bytes(&bytes)
}

#[test]
fn inplace_matches_gathered_path() {
    if let Ok(path) = std::env::var("LLM_SCRIPT_DUMP") {
        return child_main(&path);
    }
    let mut cases = 0;
    for model in ["qwen35", "qwen3next"] {
        for n in [1u32, 4, 8] {
            // Snapshots for rollback (K = 3) on qwen35; the plain path everywhere.
            let rs_options: &[u32] = if model == "qwen35" { &[0, 2] } else { &[0] };
            for &n_rs in rs_options {
                let spec = format!("{model},{n},{n_rs}");
                let a = run_child(&spec, false);
                let b = run_child(&spec, true);
                assert_eq!(a.steps(), b.steps());
                assert!(!a.logits.is_empty());
                if let Some(i) = a.logits.iter().zip(&b.logits).position(|(x, y)| x != y) {
                    panic!("{spec}: logits differ at byte {i} of {}", a.logits.len());
                }
                assert_eq!(
                    a.logits.len(),
                    b.logits.len(),
                    "{spec}: dump lengths differ"
                );
                assert!(a.inplace > 0, "{spec}: the in-place op never ran");
                assert_eq!(
                    b.inplace, 0,
                    "{spec}: GGML_GDN_STATE_GATHER=1 still ran the in-place op"
                );
                assert!(b.gathered > 0, "{spec}: the gathered path never ran");
                println!(
                    "{spec}: {} steps, {} logits bytes equal; in-place nodes {} (gathered {}), gather-mode nodes {}",
                    a.steps(),
                    a.logits.len(),
                    a.inplace,
                    a.gathered,
                    b.gathered
                );
                cases += 1;
            }
        }
    }
    println!("{cases} scripted cases, all byte-identical");
}

/// The comparison above can fail: a different seed changes the bytes.
#[test]
fn different_weights_change_the_logits() {
    if std::env::var("LLM_SCRIPT_DUMP").is_ok() {
        return;
    }
    let a = script(&RandomModel::tiny_qwen35(1), 2, 0);
    let b = script(&RandomModel::tiny_qwen35(2), 2, 0);
    assert_ne!(a.logits, b.logits);
}

/// On a Vulkan device (lavapipe in CI; `GGML_VK_VISIBLE_DEVICES`, default 0): every layer and
/// the recurrent state on the device. The in-place update runs there (ggml-sys/upstream/patches/0006) and
/// gives the same logits, byte for byte, as the gathered path on the same device (the same
/// kernel arithmetic; only the addresses differ). Against the CPU, logits agree within the
/// device's rounding while the sampled tokens agree (the device sums in another order), and the
/// tokens agree for most of the script.
#[cfg(feature = "vulkan")]
#[test]
fn on_vulkan_inplace_matches_gathered_path() {
    if std::env::var("LLM_SCRIPT_DUMP").is_ok() {
        return;
    }
    let device = std::env::var("GGML_VK_VISIBLE_DEVICES").unwrap_or_else(|_| "0".into());
    let probe = run_child_on("qwen35,1,0", false, Devices::Vulkan(&device));
    if probe.offloaded == 0 {
        common::skip_without_device(&format!(
            "llm on Vulkan: skipped, no Vulkan device {device:?} took the layers"
        ));
        return;
    }
    for spec in ["qwen35,4,0", "qwen35,4,2", "qwen3next,4,0"] {
        let a = run_child_on(spec, false, Devices::Vulkan(&device));
        let b = run_child_on(spec, true, Devices::Vulkan(&device));
        let cpu = run_child_on(spec, false, Devices::Vulkan(""));
        assert!(
            a.offloaded > 0 && b.offloaded > 0,
            "{spec}: layers not on the device"
        );
        assert_eq!(cpu.offloaded, 0, "{spec}: the CPU run offloaded layers");
        assert!(
            a.inplace > 0,
            "{spec}: the in-place op never ran on the device"
        );
        assert_eq!(
            b.inplace, 0,
            "{spec}: GGML_GDN_STATE_GATHER=1 still ran the in-place op"
        );
        assert_eq!(
            a.tokens, b.tokens,
            "{spec}: tokens differ between the paths"
        );
        if let Some(i) = a.logits.iter().zip(&b.logits).position(|(x, y)| x != y) {
            panic!("{spec}: device logits differ from the gathered path at byte {i}");
        }
        assert_eq!(a.logits.len(), b.logits.len());

        // against the CPU: step by step while every sampled token agrees
        let mut agreed = 0;
        let mut max_err = 0f32;
        while agreed < a.steps() && agreed < cpu.steps() {
            let floats = |b: &[u8]| -> Vec<f32> {
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect()
            };
            let (x, y) = (
                floats(a.step_logits(agreed)),
                floats(cpu.step_logits(agreed)),
            );
            assert_eq!(x.len(), y.len(), "{spec}: step {agreed} shapes differ");
            // the sequence ids are stored as i32 in the same slots: exact where both agree
            let err = x
                .iter()
                .zip(&y)
                .map(|(p, q)| (p - q).abs() / (1.0 + q.abs()))
                .fold(0f32, f32::max);
            max_err = max_err.max(err);
            if a.tokens[agreed] != cpu.tokens[agreed] {
                break;
            }
            agreed += 1;
        }
        println!(
            "{spec} on Vulkan: in place = gathered ({} logits bytes, {} in-place nodes); against \
             the CPU, tokens agree for {agreed}/{} steps, max relative logit error {max_err:e}",
            a.logits.len(),
            a.inplace,
            a.steps()
        );
        assert!(max_err < 1e-2, "{spec}: device logits far from the CPU's");
        assert!(
            agreed * 2 >= a.steps(),
            "{spec}: tokens agree for {agreed} steps only"
        );
    }
}
