//! Multi-sequence decode of tiny random hybrid models: the in-place gated-delta-net state update
//! gives the same logits, byte for byte, as the gathered path (`GGML_GDN_STATE_GATHER=1`).
//!
//! libllama reads the switch once per process, so each path runs in a child process (this test
//! binary re-run with `LLM_SCRIPT_DUMP` set); the parent compares the dumps.

use audio_engine::llm::{Decoder, DecoderConfig, EvalObserver, RandomModel, Sampler, SeqId};
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

/// Everything a script run produced: logits bytes per step, and how the states were updated.
struct Run {
    logits: Vec<u8>,
    steps: usize,
    inplace: usize,
    gathered: usize,
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
    let mut steps = 0;
    let mut step = |dec: &mut Decoder, logits: &mut Vec<u8>| {
        dec.step().unwrap();
        record(dec, logits);
        steps += 1;
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
        steps,
        inplace: inplace.load(Ordering::Relaxed),
        gathered: gathered.load(Ordering::Relaxed),
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
    let run = script(
        &model_for(parts[0]),
        parts[1].parse().unwrap(),
        parts[2].parse().unwrap(),
    );
    let mut out = Vec::new();
    for v in [run.steps, run.inplace, run.gathered] {
        out.extend_from_slice(&(v as u64).to_le_bytes());
    }
    out.extend_from_slice(&run.logits);
    std::fs::write(path, out).unwrap();
}

fn run_child(spec: &str, gather: bool) -> Run {
    let dir = std::env::temp_dir();
    let path = dir.join(format!(
        "llm-inplace-{}-{}-{}.bin",
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
    let num = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap()) as usize;
    Run {
        steps: num(0),
        inplace: num(1),
        gathered: num(2),
        logits: bytes[24..].to_vec(),
    }
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
                assert_eq!(a.steps, b.steps);
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
                    a.steps,
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
