//! The recurrent-state (RS) buffer of a 16-sequence context is lazily zeroed: with one sequence
//! active only its cells become resident, and clearing returns the pages. `LLAMA_RS_EAGER_ZERO=1`
//! (read once per process, so run in a child) keeps the old allocate + memset: fully resident.

use audio_engine::ggml::lazy_memory::resident_bytes;
use lfm2_llm::llama::add_log_hook;
use lfm2_llm::{Decoder, DecoderConfig, RandomModel, Sampler};
use std::sync::{Arc, Mutex};

const N_SEQ: u32 = 16;

/// `RS mapping <start>-<end> (<n> bytes)` lines logged by libllama (lazy mode only).
fn parse_mapping(line: &str) -> Option<(usize, usize)> {
    let rest = line.split("RS mapping ").nth(1)?;
    let range = rest.split_whitespace().next()?;
    let (a, b) = range.split_once('-')?;
    let a = usize::from_str_radix(a, 16).ok()?;
    let b = usize::from_str_radix(b, 16).ok()?;
    Some((a, b - a))
}

/// `... RS buffer size = <x> MiB ...`
fn parse_size_mib(line: &str) -> Option<f64> {
    let rest = line.split("RS buffer size =").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

fn process_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

struct Measured {
    size: usize,
    mappings: Vec<(usize, usize)>,
    rss_growth_at_create: usize,
}

fn create_and_measure(model: &lfm2_llm::LlmModel) -> (Decoder, Measured) {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    add_log_hook(move |l| sink.lock().unwrap().push(l.to_string()));
    let before = process_rss();
    let cfg = DecoderConfig {
        n_seq_max: N_SEQ,
        n_ctx_per_seq: 32,
        n_batch: 32,
        n_threads: 2,
        n_rs_seq: 0,
    };
    let dec = Decoder::new(model, cfg).unwrap();
    let growth = process_rss().saturating_sub(before);
    let lines = lines.lock().unwrap();
    let size_mib: f64 = lines.iter().filter_map(|l| parse_size_mib(l)).sum();
    let mappings = lines.iter().filter_map(|l| parse_mapping(l)).collect();
    (
        dec,
        Measured {
            size: (size_mib * 1024.0 * 1024.0) as usize,
            mappings,
            rss_growth_at_create: growth,
        },
    )
}

fn resident(m: &Measured) -> usize {
    m.mappings
        .iter()
        .map(|&(a, n)| resident_bytes(a, n).unwrap())
        .sum()
}

#[test]
fn rs_buffer_is_lazily_zeroed() {
    if std::env::var("RS_EAGER_CHILD").is_ok() {
        return eager_child();
    }
    // Delta-net shapes of the real models: 2 MiB of state per sequence per recurrent layer.
    let model = RandomModel::bench_qwen35(4, 3).build().unwrap();
    let (mut dec, m) = create_and_measure(&model);
    assert!(m.size > 64 << 20, "RS buffer only {} bytes", m.size);
    assert!(
        !m.mappings.is_empty(),
        "no lazily zeroed RS mapping was logged"
    );
    let mapped: usize = m.mappings.iter().map(|&(_, n)| n).sum();
    assert!(
        mapped >= m.size,
        "mapping {mapped} smaller than the buffer {}",
        m.size
    );
    let at_create = resident(&m);
    println!(
        "RS buffer {:.1} MiB; resident after creation {:.2} MiB",
        mib(m.size),
        mib(at_create)
    );
    assert!(
        at_create < m.size / 16,
        "resident right after creation: {at_create}"
    );

    dec.join(&[1, 2, 3, 4], Sampler::greedy()).unwrap();
    for _ in 0..4 {
        dec.step().unwrap();
    }
    let one_active = resident(&m);
    println!(
        "one of {N_SEQ} sequences active: {:.2} MiB resident",
        mib(one_active)
    );
    assert!(one_active > 0, "decoding touched no RS page");
    assert!(
        one_active <= m.size / 4,
        "one active sequence made {one_active} of {} resident",
        m.size
    );

    dec.clear();
    let cleared = resident(&m);
    println!("after clear: {:.2} MiB resident", mib(cleared));
    assert!(cleared < m.size / 16, "clear left {cleared} resident");
    // Decoding still works after the pages were dropped (they read as zeros again).
    dec.join(&[1, 2, 3, 4], Sampler::greedy()).unwrap();
    dec.step().unwrap();

    // Eager mode in a child process: the whole buffer becomes resident at creation.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "rs_buffer_is_lazily_zeroed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RS_EAGER_CHILD", "1")
        .env("LLAMA_RS_EAGER_ZERO", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "eager child failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let growth: usize = text
        .lines()
        // libtest may print "test <name> ... " on the same line before the child's output.
        .find_map(|l| l.split("EAGER_GROWTH ").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .expect("child reports its RSS growth");
    println!(
        "eager mode: process RSS grew {:.1} MiB at creation (lazy: {:.1} MiB)",
        mib(growth),
        mib(m.rss_growth_at_create)
    );
    assert!(
        growth >= m.size * 9 / 10,
        "eager mode grew only {growth} for a {} buffer",
        m.size
    );
    assert!(m.rss_growth_at_create < growth / 4);
}

fn eager_child() {
    let model = RandomModel::bench_qwen35(4, 3).build().unwrap();
    let (_dec, m) = create_and_measure(&model);
    assert!(m.mappings.is_empty(), "eager mode still mapped lazily");
    println!("EAGER_GROWTH {}", m.rss_growth_at_create);
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}
