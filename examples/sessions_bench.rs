//! Sessions side by side on one model: speech-to-speech requests run by one session each at the
//! same time, against the same requests one after the other, on
//! the built-in demo package and (with `--full`) on a full-size synthetic package (the published
//! LFM2-Audio dimensions, random weights). Prints the wall-time ratio (side by side / one after
//! the other; 0.5 would be perfect scaling on two cores) and the memory an extra session takes
//! (peak RSS growth: its caches and graph memory, not a copy of the weights). Per phase it also
//! prints the CPU time the requests' threads used and how long they waited runnable for a core
//! (`/proc/thread-self/schedstat`): on a shared machine other processes' load shows there, not
//! as lock waits.
//!
//! ```text
//! cargo run --release --example sessions_bench -- [--full] [--no-demo] [--quant Q4_0]
//!     [--rounds N] [--steps N] [--full-dir DIR] [--threads N] [--requests N]
//!     [--compare-unbudgeted]
//! ```
//! `--threads N` is the model's thread count, which every session computes with (default 1);
//! `--requests N` runs N requests together (default 2). The model's compute threads are one
//! budget for all its sessions (`ModelOptions::max_compute_threads`); `--compare-unbudgeted`
//! also runs each package with a budget of threads x requests, so that every session computes
//! on its own threads at once (the engine before the budget), in the same run. `serve`'s
//! defaults on a 2-core machine are `--threads 2 --requests 2`.
//! The full-size package is generated deterministically (seed 11) the first time and cached in
//! `--full-dir` (default `$XDG_CACHE_HOME/lfm2-engine/full-synthetic-11-<quant>`, shared with
//! the `bench` example; see `examples/common/full.rs`); writing it takes minutes and about 7 GB
//! of memory and 7 GB of disk for the intermediate F32 checkpoint.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    EngineError, Lfm2Audio, ModelOptions, S2sOptions, S2sRequest, Session, SessionOptions,
    TurnResult,
};
use audio_engine::lfm2_audio::{ModelPackage, PackagePaths, Quant, SamplerConfig};
use audio_tooling::{default_demo_dir, ensure_demo_package};
use common::full::{default_full_dir, ensure_full_package};

/// A 16 kHz mono WAV: a deterministic integer waveform, different per `i` (about 1.5-2 s).
fn question(i: usize) -> Vec<u8> {
    let n = 24_000 + 8_000 * i;
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).expect("in-memory WAV");
    for t in 0..n {
        let v = ((t * (7 + 3 * i)) % 400) as i32 - 200;
        w.write_sample((v * 60) as i16).expect("in-memory WAV");
    }
    w.finalize().expect("in-memory WAV");
    out.into_inner()
}

fn request(i: usize, steps: usize) -> S2sRequest {
    S2sRequest {
        question: question(i).into(),
        s2s: S2sOptions {
            max_new_tokens: steps,
            text: SamplerConfig::GREEDY,
            audio: SamplerConfig::s2s_audio(7 + i as u64),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A fresh session computing on the model's thread count.
fn session(model: &Lfm2Audio) -> Session {
    Session::new(model.clone(), SessionOptions::default())
}

/// `VmRSS` or `VmHWM` of this process in bytes (Linux).
fn status_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak RSS to the current RSS (Linux `clear_refs` 5).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// This thread's CPU time and run-queue wait so far, in seconds (Linux; zeros elsewhere).
fn sched() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut f = s
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(0.0) * 1e-9);
    (f.next().unwrap_or(0.0), f.next().unwrap_or(0.0))
}

/// One phase: wall time, the requests' threads' CPU time and run-queue wait, the results.
struct Phase {
    wall: f64,
    cpu: f64,
    wait: f64,
    out: Vec<TurnResult>,
}

/// Runs `r` in a fresh session on this thread, with this thread's CPU time and wait.
fn timed(model: &Lfm2Audio, r: &S2sRequest) -> (f64, f64, Result<TurnResult, EngineError>) {
    let mut s = session(model);
    let (c0, w0) = sched();
    let out = s.s2s(r);
    let (c1, w1) = sched();
    (c1 - c0, w1 - w0, out)
}

/// Runs the requests one after the other, each in a fresh session.
fn one_after_the_other(model: &Lfm2Audio, reqs: &[S2sRequest]) -> Result<Phase> {
    let t0 = Instant::now();
    let (mut cpu, mut wait, mut out) = (0.0, 0.0, Vec::new());
    for r in reqs {
        let (c, w, o) = timed(model, r);
        cpu += c;
        wait += w;
        out.push(o?);
    }
    Ok(Phase {
        wall: t0.elapsed().as_secs_f64(),
        cpu,
        wait,
        out,
    })
}

/// Runs the requests side by side, one fresh session each on its own thread.
fn side_by_side(model: &Lfm2Audio, reqs: &[S2sRequest]) -> Result<Phase> {
    let barrier = Arc::new(Barrier::new(reqs.len() + 1));
    let (wall, results) = std::thread::scope(|sc| {
        let handles: Vec<_> = reqs
            .iter()
            .map(|r| {
                let (model, barrier) = (model.clone(), barrier.clone());
                sc.spawn(move || {
                    barrier.wait();
                    timed(&model, r)
                })
            })
            .collect();
        barrier.wait();
        let t0 = Instant::now();
        let out: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("worker"))
            .collect();
        (t0.elapsed().as_secs_f64(), out)
    });
    let (mut cpu, mut wait, mut out) = (0.0, 0.0, Vec::new());
    for (c, w, o) in results {
        cpu += c;
        wait += w;
        out.push(o?);
    }
    Ok(Phase {
        wall,
        cpu,
        wait,
        out,
    })
}

fn same(a: &[TurnResult], b: &[TurnResult]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.reply.steps == y.reply.steps
                && x.reply.text == y.reply.text
                && x.reply.audio.len() == y.reply.audio.len()
                && x.reply
                    .audio
                    .iter()
                    .zip(&y.reply.audio)
                    .all(|(p, q)| p.to_bits() == q.to_bits())
        })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// How the bench runs: the model's threads, whether they are a shared budget, the requests.
#[derive(Clone, Copy)]
struct Setup {
    rounds: usize,
    /// `ModelOptions::n_threads` (every session computes with it).
    threads: usize,
    /// `false`: `ModelOptions::max_compute_threads` so high that every session computes on
    /// its own `threads` at once (the engine before the shared budget).
    budget: bool,
    /// Requests run together.
    requests: usize,
}

fn bench(label: &str, paths: PackagePaths, setup: Setup, steps: usize) -> Result<()> {
    let Setup {
        rounds,
        threads,
        budget,
        requests,
    } = setup;
    let rss0 = status_kb("VmRSS:").unwrap_or(0);
    let model = Lfm2Audio::from_package(
        ModelPackage::open_paths(paths)?,
        ModelOptions {
            n_threads: threads,
            max_compute_threads: if budget { 0 } else { threads * requests },
            // why: the documented `LFM2_*` variables apply to the examples (binaries).
            ..ModelOptions::default().with_vars(&|name| std::env::var(name).ok())
        },
    )?;
    let label = &format!(
        "{label} {requests} x {threads} thread(s), {}",
        if budget { "shared budget" } else { "no budget" }
    );
    let rss_model = status_kb("VmRSS:").unwrap_or(0);
    let reqs: Vec<S2sRequest> = (0..requests).map(|i| request(i, steps)).collect();
    // Warm-up (and the reference outputs).
    let want = one_after_the_other(&model, &reqs)?.out;
    let steps_done: Vec<usize> = want.iter().map(|t| t.reply.steps.len()).collect();

    // Memory: peak RSS growth while one session runs, then while two run side by side.
    let base = status_kb("VmRSS:").unwrap_or(0);
    reset_peak();
    session(&model).s2s(&reqs[0])?;
    let one = status_kb("VmHWM:").unwrap_or(0).saturating_sub(base);
    let base2 = status_kb("VmRSS:").unwrap_or(0);
    reset_peak();
    side_by_side(&model, &reqs)?;
    let all = status_kb("VmHWM:").unwrap_or(0).saturating_sub(base2);

    let (mut seq, mut par, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cpu_ratios, mut waits) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        // why: alternate which runs first, so drift in the machine's load hits both alike.
        let (s, p) = if r % 2 == 0 {
            let s = one_after_the_other(&model, &reqs)?;
            (s, side_by_side(&model, &reqs)?)
        } else {
            let p = side_by_side(&model, &reqs)?;
            (one_after_the_other(&model, &reqs)?, p)
        };
        if !same(&s.out, &want) || !same(&p.out, &want) {
            bail!("{label}: outputs differ between runs");
        }
        println!(
            "{label} round {}: one after the other {:.3} s (cpu {:.3} s, waited for a core \
             {:.3} s), side by side {:.3} s (cpu {:.3} s, waited {:.3} s), ratio {:.3}",
            r + 1,
            s.wall,
            s.cpu,
            s.wait,
            p.wall,
            p.cpu,
            p.wait,
            p.wall / s.wall
        );
        seq.push(s.wall);
        par.push(p.wall);
        ratios.push(p.wall / s.wall);
        cpu_ratios.push(p.cpu / s.cpu);
        waits.push((p.wait + s.wait) / (p.wall + s.wall));
    }
    println!(
        "{label}: {steps_done:?} steps per request; model {:.1} MiB RSS; median of {rounds} rounds: \
         one after the other {:.3} s, side by side {:.3} s, ratio {:.3}; peak RSS growth: one \
         session {:.1} MiB, all side by side {:.1} MiB, so {:.1} MiB per extra session; cpu \
         time side by side / one after the other {:.3}; the threads waited for a core {:.0}% of \
         the wall time",
        mib(rss_model.saturating_sub(rss0)),
        median(seq),
        median(par),
        median(ratios),
        mib(one),
        mib(all),
        mib(all.saturating_sub(one) / (requests as u64 - 1)),
        median(cpu_ratios),
        100.0 * median(waits),
    );
    Ok(())
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut full, mut rounds, mut steps) = (false, 3usize, None::<usize>);
    let (mut threads, mut requests, mut compare) = (1usize, 2usize, false);
    let mut quant = Quant::Q4_0;
    let mut full_dir: Option<PathBuf> = None;
    let mut demo = true;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--full" => full = true,
            "--no-demo" => demo = false,
            "--rounds" => rounds = args.next().context("--rounds N")?.parse()?,
            "--threads" => threads = args.next().context("--threads N")?.parse()?,
            "--requests" => requests = args.next().context("--requests N")?.parse()?,
            "--compare-unbudgeted" => compare = true,
            "--steps" => steps = Some(args.next().context("--steps N")?.parse()?),
            "--full-dir" => full_dir = Some(args.next().context("--full-dir DIR")?.into()),
            "--quant" => {
                quant = match args
                    .next()
                    .context("--quant Q")?
                    .to_ascii_uppercase()
                    .as_str()
                {
                    "F32" => Quant::F32,
                    "F16" => Quant::F16,
                    "Q8_0" => Quant::Q8_0,
                    "Q4_0" => Quant::Q4_0,
                    q => bail!("unknown quantization {q}"),
                }
            }
            other => bail!("unknown argument {other}"),
        }
    }
    if rounds == 0 || threads == 0 || requests < 2 {
        bail!("--rounds and --threads must be positive, --requests at least 2");
    }
    let budgets: &[bool] = if compare { &[true, false] } else { &[true] };
    let mut runs = Vec::new();
    if demo {
        runs.push((
            "demo".to_owned(),
            ensure_demo_package(&default_demo_dir())?,
            300,
        ));
    }
    if full {
        let dir = full_dir.unwrap_or_else(|| default_full_dir(quant));
        let paths = ensure_full_package(&dir, quant)?;
        runs.push((format!("full {quant:?}"), paths, 24));
    }
    for (label, paths, default_steps) in runs {
        for &budget in budgets {
            let setup = Setup {
                rounds,
                threads,
                budget,
                requests,
            };
            bench(&label, paths.clone(), setup, steps.unwrap_or(default_steps))?;
        }
    }
    Ok(())
}
