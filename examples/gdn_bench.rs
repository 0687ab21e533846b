//! Multi-sequence decode throughput of a random qwen35 with real delta-net shapes (S_v 128,
//! 32 value heads, 16 key heads): the in-place recurrent-state update against the gathered path
//! (`GGML_GDN_STATE_GATHER=1`), and the RS buffer's resident size, lazy against eager
//! (`LLAMA_RS_EAGER_ZERO=1`).
//!
//! `cargo run --release --features llm --example gdn_bench -- [--layers 8] [--steps 32] [--runs 5] [--seqs 1,4,8,16]`
//!
//! Both switches are read once per process, so every measurement runs in a child process; A and
//! B alternate within each round and the median over rounds is reported.

use anyhow::{bail, Context, Result};
use clap::Parser;
use lfm2_llm::{add_log_hook, resident_bytes, Decoder, DecoderConfig, RandomModel, Sampler};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Multi-sequence decode throughput of a random qwen35: in-place against gathered state update.
#[derive(Parser)]
struct Args {
    /// Layers of the random model.
    #[arg(long, default_value_t = 8)]
    layers: u32,
    /// Timed decode steps per run.
    #[arg(long, default_value_t = 32)]
    steps: usize,
    /// Rounds (A and B alternate within each; the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Sequence counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16")]
    seqs: Vec<u32>,
    /// Decode threads.
    #[arg(long, default_value_t = 2)]
    threads: i32,
}

/// Child: decode `steps` tokens on `n` sequences, print tokens/s and resident RS bytes.
fn child(n: u32, a: &Args) -> Result<()> {
    let maps = Arc::new(Mutex::new(Vec::<(usize, usize)>::new()));
    let sink = maps.clone();
    add_log_hook(move |l| {
        if let Some(r) = l
            .split("RS mapping ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
        {
            if let Some((x, y)) = r.split_once('-') {
                if let (Ok(x), Ok(y)) = (usize::from_str_radix(x, 16), usize::from_str_radix(y, 16))
                {
                    sink.lock().unwrap().push((x, y - x));
                }
            }
        }
    });
    let model = RandomModel::bench_qwen35(a.layers, 1).build()?;
    let rss0 = process_rss();
    let cfg = DecoderConfig {
        n_seq_max: 16,
        n_ctx_per_seq: (a.steps + 16) as u32,
        n_batch: 256,
        n_threads: a.threads,
        n_rs_seq: 0,
    };
    let mut dec = Decoder::new(&model, cfg)?;
    let rss_create = process_rss().saturating_sub(rss0);
    for s in 0..n {
        dec.join(&[1 + s as i32, 2, 3], Sampler::greedy())?;
    }
    dec.step()?; // prompts
    dec.step()?; // first single-token step (graph warm-up)
    let t = Instant::now();
    for _ in 0..a.steps {
        dec.step()?;
    }
    let secs = t.elapsed().as_secs_f64();
    let lazy: usize = maps
        .lock()
        .unwrap()
        .iter()
        .map(|&(x, len)| resident_bytes(x, len).unwrap_or(0))
        .sum();
    let resident = if maps.lock().unwrap().is_empty() {
        rss_create
    } else {
        lazy
    };
    println!(
        "RESULT {} {}",
        (n as usize * a.steps) as f64 / secs,
        resident
    );
    Ok(())
}

fn process_rss() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .map_or(0, |kb: usize| kb * 1024)
}

fn run_child(n: u32, env: &[(&str, &str)]) -> Result<(f64, usize)> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(std::env::args().skip(1))
        .env("GDN_BENCH_CHILD", n.to_string());
    for k in ["GGML_GDN_STATE_GATHER", "LLAMA_RS_EAGER_ZERO"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("child failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .context("no RESULT line")?;
    let mut it = line.split_whitespace();
    Ok((
        it.next().context("tok/s")?.parse()?,
        it.next().context("bytes")?.parse()?,
    ))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let a = Args::parse();
    if let Ok(n) = std::env::var("GDN_BENCH_CHILD") {
        return child(n.parse()?, &a);
    }
    println!(
        "random qwen35: {} layers, S_v 128, H_v 32, H_k 16; {} steps x {} rounds, {} threads; 16-sequence context",
        a.layers, a.steps, a.runs, a.threads
    );
    println!(
        "| seqs | in-place tok/s | gathered tok/s | speed-up | RS resident lazy MiB | eager MiB |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &n in &a.seqs {
        let (mut ip, mut ga, mut lazy, mut eager) = (vec![], vec![], vec![], vec![]);
        for _ in 0..a.runs {
            let (t, r) = run_child(n, &[])?;
            ip.push(t);
            lazy.push(r as f64);
            let (t, _) = run_child(n, &[("GGML_GDN_STATE_GATHER", "1")])?;
            ga.push(t);
            let (_, r) = run_child(n, &[("LLAMA_RS_EAGER_ZERO", "1")])?;
            eager.push(r as f64);
        }
        let (ip, ga) = (median(&mut ip), median(&mut ga));
        println!(
            "| {n} | {ip:.1} | {ga:.1} | {:.3} | {:.1} | {:.1} |",
            ip / ga,
            median(&mut lazy) / 1048576.0,
            median(&mut eager) / 1048576.0
        );
    }
    Ok(())
}
