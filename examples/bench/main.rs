//! Speed at full size (issue #12): the S2S conversation protocol on a full-size synthetic
//! LFM2.5-Audio package (the published dimensions, random weights), against llama.cpp's own
//! `lfm2` run on the very same backbone GGUF file.
//!
//! ```text
//! cargo run --release --example bench --features llm -- [--quant Q4_0|Q8_0|F16|F32]
//!     [--turns 4|10] [--threads N] [--frame-threads N] [--sessions N] [--load-core]
//!     [--rounds R] [--json] [--liquid-python PATH] [--hf REPO[:QUANT] [--offline]]
//!     [--prefill-ab CONTEXTS [--prefill-len N]]
//! ```
//!
//! - The package is written once per quantization (deterministic, seed 11) and cached (see
//!   `examples/common/full.rs`; `--package-dir` overrides the place). Writing it takes minutes
//!   and ~7 GB of memory; F32 runs need ~12 GB.
//! - Ours: a client-carried conversation, as `serve` and the C ABI run it: each turn sends a
//!   ~6 s question (deterministic speech-like audio, 16 kHz) with every earlier question and
//!   reply artifact as history (`return_codes`), and asks for 48 reply steps. Per turn it prints
//!   the prompt positions, the positions restored from the session's prefill blocks, the earlier
//!   questions whose encoder output was reused, the stage times, per-step medians (text step;
//!   audio frame as backbone + depthformer; detokenizer per frame), the real-time factor
//!   (generation time / seconds of audio produced) and the RSS. After each reply the session
//!   prefills it ahead for the next turn (`SessionOptions::prefill_ahead`); the bench waits for
//!   that before the next question (the user listening and speaking) and reports its positions
//!   and time as "ahead". A new session first prefills its system prompt's head
//!   (`SessionOptions::prefill_head`, as a server's pooled sessions do before their first
//!   request); the bench waits for that too before turn 1 (`--no-prefill-head`: a cold turn 1).
//! - llama.cpp: a child process (so its memory and threads stay out of our RSS and timings)
//!   loads the package's backbone file with libllama's default model parameters (mmap, the CPU
//!   backend's extra buffer types: repacked weights) and the same thread count, prefills token
//!   batches of random valid ids of each turn's prompt length, and times single-token decode
//!   after each. Ratios ours / llama.cpp follow.
//! - Rounds alternate which of the two runs first, so drift in the machine's load hits both;
//!   the tables show medians over rounds (and over sessions with `--sessions`).
//! - Contention is shown, not hidden: per phase the computing thread's run-queue wait
//!   (`/proc/thread-self/schedstat`) and the machine's CPU pressure (`/proc/pressure/cpu`, the
//!   share of time some runnable task waited for a core). `--load-core` adds a child process
//!   busy on one core for the whole run.

#[path = "../common/mod.rs"]
mod common;
mod encoder;
mod floor;
mod prefill_ab;
mod sweep;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use audio_engine::ggml::vnni_q4_0_built;
use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    Lfm2Audio, ModelOptions, ModelPackage, Quant, S2sOptions, S2sRequest, SamplerConfig, Session,
    SessionOptions, TurnResult,
};
use clap::{value_parser, Parser};
use common::full::{complete, default_full_dir, ensure_full_package};
use lfm2_llm::llama::{ContextOptions, LlamaBatch, LlamaContext, LlamaModel};
use serde_json::{json, Value};

/// The S2S conversation protocol at full size, against llama.cpp on the same backbone file.
#[derive(Parser, Debug, Clone)]
#[command(name = "bench")]
struct Args {
    /// Quantization of the synthetic package (F32 needs ~12 GB of memory).
    #[arg(long, default_value = "Q4_0")]
    quant: Quant,
    /// Turns of the conversation (the issue's protocols: 4 and 10).
    #[arg(long, default_value_t = 4, value_parser = value_parser!(u32).range(1..=20))]
    turns: u32,
    /// CPU threads per session (and for llama.cpp).
    #[arg(long, default_value_t = 2, value_parser = value_parser!(u32).range(1..=512))]
    threads: u32,
    /// CPU threads of the per-frame graphs (`ModelOptions::frame_threads`: 0, the default,
    /// measures and picks between `--threads` and one as the load changes; N fixes it).
    #[arg(long, default_value_t = 0, value_parser = value_parser!(u32).range(0..=512))]
    frame_threads: u32,
    /// CPU threads of the backbone's single-position steps (`ModelOptions::step_threads`: 0,
    /// the default, runs `--threads`; N fixes it).
    #[arg(long, default_value_t = 0, value_parser = value_parser!(u32).range(0..=512))]
    step_threads: u32,
    /// The most sessions whose steps one tick batches (`ModelOptions::max_batch`; 1: every
    /// step on its own).
    #[arg(long, default_value_t = env_defaults().max_batch as u32,
          value_parser = value_parser!(u32).range(1..=64))]
    batch: u32,
    /// Sessions generating at once from which their steps batch (`ModelOptions::batch_from`).
    #[arg(long, default_value_t = env_defaults().batch_from as u32,
          value_parser = value_parser!(u32).range(1..=64))]
    batch_from: u32,
    /// Device the model runs on: cpu, vulkan:N, cuda:N or metal (the build needs its feature;
    /// default: CUDA or Metal when built in, otherwise the CPU). On a device, the run ends with
    /// each component's CPU-fallback ops and the bytes its graphs move between host and device.
    #[arg(long, value_name = "DEVICE")]
    device: Option<audio_engine::ggml::Device>,
    /// Sessions running the same conversation side by side, one thread each driving it.
    #[arg(long, default_value_t = 1, value_parser = value_parser!(u32).range(1..=16))]
    sessions: u32,
    /// Session counts to sweep (e.g. `1,2,4,8`): per count, that many staggered streamed
    /// conversations at once, with the batched-step and llama.cpp parallel-decode anchors
    /// (see `examples/bench/sweep.rs`); replaces the per-turn tables.
    #[arg(long, value_delimiter = ',', value_parser = value_parser!(u32).range(1..=16))]
    sweep: Vec<u32>,
    /// Context lengths (e.g. `0,160,320,480,640`) at which to time our prefill of one block
    /// against llama.cpp's, back to back and interleaved over `--rounds` (see
    /// `examples/bench/prefill_ab.rs`); replaces the conversation.
    #[arg(long, value_delimiter = ',', value_parser = value_parser!(u32).range(0..=32768))]
    prefill_ab: Vec<u32>,
    /// (profiling) Run only one side of `--prefill-ab`: `ours` or `llama` (for `perf record`).
    #[arg(long, hide = true, value_parser = ["ours", "llama"])]
    prefill_side: Option<String>,
    /// Positions of the block `--prefill-ab` times (the issue's question block: 81).
    #[arg(long, default_value_t = 81, value_parser = value_parser!(u32).range(1..=512))]
    prefill_len: u32,
    /// Seconds between the starts of the sweep's sessions.
    #[arg(long, default_value_t = 1.5)]
    stagger: f64,
    /// Keep one core busy (a child process spinning) during the whole run.
    #[arg(long)]
    load_core: bool,
    /// Rounds (ours and llama.cpp alternate which runs first; medians are reported).
    #[arg(long, default_value_t = 2, value_parser = value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Reply steps per turn (`max_new_tokens`: text tokens and audio frames).
    #[arg(long, default_value_t = 48, value_parser = value_parser!(u32).range(1..=1024))]
    steps: u32,
    /// Seconds of each question.
    #[arg(long, default_value_t = 6.0, value_parser = parse_seconds)]
    question_seconds: f64,
    /// llama.cpp single-token decode steps timed after each prompt.
    #[arg(long, default_value_t = 32, value_parser = value_parser!(u32).range(1..=1024))]
    decode_steps: u32,
    /// Skip the llama.cpp comparison.
    #[arg(long)]
    no_llama: bool,
    /// Do not prefill the system prompt's head when a session is created
    /// (`SessionOptions::prefill_head`): turn 1 then runs its whole prompt (a cold start).
    #[arg(long)]
    no_prefill_head: bool,
    /// Seconds of the question the encoder figure encodes (the issue's: 10).
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    encoder_seconds: f64,
    /// Timed repetitions of the encoder figure.
    #[arg(long, default_value_t = 5, value_parser = value_parser!(u32).range(1..=100))]
    encoder_reps: u32,
    /// Only the encoder figure and the bandwidth floor (no conversation, no llama.cpp).
    #[arg(long)]
    encoder_only: bool,
    /// A Python with liquid-audio, to time its encoder in the same run
    /// (`scripts/liquid_encoder_bench.py`; default: `$XDG_CACHE_HOME` or `~/.cache` +
    /// `lfm2-engine/liquid-venv/bin/python` when it exists).
    #[arg(long)]
    liquid_python: Option<PathBuf>,
    /// Where the package is cached (default: `$XDG_CACHE_HOME/lfm2-engine/...`).
    #[arg(long, conflicts_with = "hf")]
    package_dir: Option<PathBuf>,
    /// `--hf REPO[:QUANT]` (without `:QUANT`, `--quant`): bench a package from the Hugging Face
    /// Hub instead of the synthetic one.
    #[command(flatten)]
    hub: common::hub::HubArgs,
    /// Also print every number as one JSON line (prefixed `BENCH_JSON `).
    #[arg(long)]
    json: bool,
    /// (internal) Write the package into this directory and exit.
    #[arg(long, hide = true)]
    write_package: Option<PathBuf>,
    /// (internal) Spin on one core until the process with this id is gone.
    #[arg(long, hide = true)]
    busy: Option<u32>,
    /// (internal) Run the llama.cpp measurement on this backbone file and print it as JSON.
    #[arg(long, hide = true)]
    llama_child: Option<PathBuf>,
    /// (internal) Time the batched backbone step at the `--sweep` widths on this file.
    #[arg(long, hide = true)]
    steps_child: Option<PathBuf>,
    /// (internal) Time llama.cpp's parallel decode at the `--sweep` widths on this file.
    #[arg(long, hide = true)]
    llama_parallel_child: Option<PathBuf>,
    /// (internal) llama.cpp's children put every layer on the CPU (ours runs there).
    #[arg(long, hide = true)]
    llama_cpu: bool,
    /// (internal) Prompt lengths for `--llama-child`.
    #[arg(long, hide = true, value_delimiter = ',')]
    lengths: Vec<u32>,
}

/// This program, for the child processes (llama.cpp, the busy core, the package writer).
///
/// why `/proc/self/exe` first: it names the running binary's file even after a rebuild
/// replaced the path (`current_exe` would then give a deleted path, or a different binary).
fn self_exe() -> Result<PathBuf> {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Ok(proc_exe.to_path_buf());
    }
    std::env::current_exe().context("locating this program")
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.5..=30.0).contains(&v) {
        Ok(v)
    } else {
        Err("must be between 0.5 and 30 seconds".into())
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements of the process and the machine.

/// A `/proc/self/status` field (`VmRSS:`, `VmHWM:`) in bytes (Linux; `None` elsewhere).
fn status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// This thread's CPU time and run-queue wait so far, in seconds (Linux; zeros elsewhere).
///
/// why: ggml's CPU backend starts its worker threads per graph and they are gone before they
/// can be read, but the calling thread computes a share of every graph, so its wait shows how
/// long the computation stood waiting for a core.
fn sched() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut f = s
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(0.0) * 1e-9);
    (f.next().unwrap_or(0.0), f.next().unwrap_or(0.0))
}

/// The machine's cumulative CPU pressure: seconds during which some runnable task waited for a
/// core (`/proc/pressure/cpu`, "some total"; `None` without PSI).
fn cpu_pressure() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let line = s.lines().find(|l| l.starts_with("some"))?;
    let total = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    Some(total.parse::<f64>().ok()? * 1e-6)
}

/// The 1-minute load average.
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Wall time, the calling thread's CPU time and run-queue wait, and the machine's CPU pressure
/// over one phase.
#[derive(Debug, Clone, Copy, Default)]
struct Load {
    wall: f64,
    cpu: f64,
    wait: f64,
    pressure: Option<f64>,
}

struct LoadMeter {
    t0: Instant,
    sched0: (f64, f64),
    psi0: Option<f64>,
}

impl LoadMeter {
    fn start() -> LoadMeter {
        LoadMeter {
            t0: Instant::now(),
            sched0: sched(),
            psi0: cpu_pressure(),
        }
    }

    fn stop(&self) -> Load {
        let (c, w) = sched();
        Load {
            wall: self.t0.elapsed().as_secs_f64(),
            cpu: c - self.sched0.0,
            wait: w - self.sched0.1,
            pressure: match (self.psi0, cpu_pressure()) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            },
        }
    }
}

impl Load {
    fn json(&self) -> Value {
        json!({"wall_s": self.wall, "cpu_s": self.cpu, "wait_s": self.wait,
               "cpu_pressure_s": self.pressure})
    }

    fn from_json(v: &Value) -> Load {
        Load {
            wall: v["wall_s"].as_f64().unwrap_or(0.0),
            cpu: v["cpu_s"].as_f64().unwrap_or(0.0),
            wait: v["wait_s"].as_f64().unwrap_or(0.0),
            pressure: v["cpu_pressure_s"].as_f64(),
        }
    }
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn secs(d: &[Duration]) -> Vec<f64> {
    d.iter().map(Duration::as_secs_f64).collect()
}

/// FNV-1a, to tell whether two runs produced the same bytes.
fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

/// A small deterministic generator (64-bit LCG, high bits out).
struct Lcg(u64);

impl Lcg {
    fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    fn unit(&mut self) -> f64 {
        f64::from(self.next_u32()) / f64::from(1u32 << 31)
    }
}

// ---------------------------------------------------------------------------------------------
// The conversation.

/// Question `turn`: `seconds` of deterministic speech-like 16 kHz mono audio as WAV bytes.
///
/// why speech-like: syllables of a voiced source (harmonics of a gliding pitch shaped by three
/// formant resonances) with pauses and a little noise give the features and the encoder the
/// kind of spectrum they see in use; their cost does not depend on it, but a constant tone
/// would make a degenerate log-mel normalisation.
fn question_wav(turn: usize, seconds: f64) -> Vec<u8> {
    const RATE: f64 = 16_000.0;
    let n = (seconds * RATE).round() as usize;
    let mut rng = Lcg(0x5EED_0000 + turn as u64);
    let mut x = Vec::with_capacity(n);
    let mut phase = 0.0f64;
    while x.len() < n {
        let dur = 0.12 + 0.2 * rng.unit();
        let len = ((dur * RATE) as usize).min(n - x.len()).max(1);
        if rng.unit() < 0.18 {
            // A pause: faint noise.
            x.extend((0..len).map(|_| 0.005 * (rng.unit() - 0.5)));
            continue;
        }
        let f0a = 95.0 + 90.0 * rng.unit();
        let f0b = f0a * (0.8 + 0.35 * rng.unit());
        let formants = [
            (280.0 + 520.0 * rng.unit(), 90.0),
            (850.0 + 1400.0 * rng.unit(), 120.0),
            (2300.0 + 800.0 * rng.unit(), 180.0),
        ];
        for k in 0..len {
            let u = k as f64 / len as f64;
            let env = (std::f64::consts::PI * u).sin().powf(0.6);
            let f0 = f0a + (f0b - f0a) * u;
            phase += 2.0 * std::f64::consts::PI * f0 / RATE;
            let mut v = 0.0;
            let mut h = 1.0;
            while h * f0 < 4000.0 {
                let f = h * f0;
                let gain: f64 = formants
                    .iter()
                    .map(|&(fc, bw)| 1.0 / (1.0 + ((f - fc) / bw).powi(2)))
                    .sum();
                v += gain * (h * phase).sin() / h.sqrt();
                h += 1.0;
            }
            x.push(env * v + 0.01 * (rng.unit() - 0.5));
        }
    }
    let peak = x.iter().fold(1e-9f64, |m, v| m.max(v.abs()));
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).expect("in-memory WAV");
    for v in x {
        w.write_sample((v / peak * 0.5 * 32767.0).round() as i16)
            .expect("in-memory WAV");
    }
    w.finalize().expect("in-memory WAV");
    out.into_inner()
}

/// One turn of ours, as measured.
#[derive(Debug, Clone)]
struct Turn {
    prompt: usize,
    resumed: usize,
    reused: usize,
    encode: f64,
    prefill: f64,
    first_audio: Option<f64>,
    text_step: Option<f64>,
    frame: Option<f64>,
    frame_backbone: Option<f64>,
    frame_depth: Option<f64>,
    detok: Option<f64>,
    /// Text steps and audio frames of the reply.
    text_steps: usize,
    frames: usize,
    generate: f64,
    audio_secs: f64,
    steps: usize,
    total: f64,
    rss: u64,
    load: Load,
    /// Positions the session prefilled ahead after the previous turn, and the worker's time.
    ahead_positions: usize,
    ahead: f64,
    /// Of the reply's steps, text and audio: whether two runs made the same bytes.
    digest: u64,
}

impl Turn {
    fn of(r: &TurnResult, load: Load) -> Turn {
        let t = &r.reply.timings;
        let st = &t.steps;
        let frames: Vec<f64> = st
            .depthformer
            .iter()
            .zip(&st.frame_backbone)
            .map(|(a, b)| (*a + *b).as_secs_f64())
            .collect();
        let mut digest = 0xcbf2_9ce4_8422_2325;
        if let Some(a) = &r.artifact {
            fnv(&mut digest, &a.payload);
        }
        fnv(&mut digest, r.reply.text.as_bytes());
        for s in &r.reply.audio {
            fnv(&mut digest, &s.to_bits().to_le_bytes());
        }
        let audio_secs = r.reply.audio.len() as f64 / 24_000.0;
        Turn {
            prompt: r.reply.prompt_positions,
            resumed: r.reply.resumed_prefill_steps,
            reused: r.reused_questions,
            encode: t.encode.as_secs_f64(),
            prefill: t.prefill.as_secs_f64(),
            first_audio: t.first_audio.map(|d| d.as_secs_f64()),
            text_step: median(&secs(&st.text)),
            frame: median(&frames),
            frame_backbone: median(&secs(&st.frame_backbone)),
            frame_depth: median(&secs(&st.depthformer)),
            detok: median(&secs(&st.detokenizer)),
            text_steps: st.text.len(),
            frames: st.frame_backbone.len(),
            generate: t.generate.as_secs_f64(),
            audio_secs,
            steps: r.reply.steps.len(),
            total: t.total.as_secs_f64(),
            rss: status_bytes("VmRSS:").unwrap_or(0),
            load,
            ahead_positions: r.background.as_ref().map_or(0, |b| b.prefilled_positions),
            ahead: r
                .background
                .as_ref()
                .map_or(0.0, |b| b.elapsed.as_secs_f64()),
            digest,
        }
    }

    /// Positions the prefill ran (the rest were restored).
    fn prefilled(&self) -> usize {
        self.prompt - self.resumed
    }

    fn prefill_rate(&self) -> f64 {
        self.prefilled() as f64 / self.prefill.max(1e-9)
    }

    /// Generation time per second of audio produced.
    fn rtf(&self) -> Option<f64> {
        (self.audio_secs > 0.0).then(|| self.generate / self.audio_secs)
    }
}

/// Runs the whole conversation in a fresh session, carrying the history as a client does.
/// A session as the conversation runs it: the bench's threads, its head prefilled unless
/// `--no-prefill-head`.
fn bench_session(model: &Lfm2Audio, a: &Args) -> Session {
    Session::new(
        model.clone(),
        SessionOptions {
            n_threads: Some(a.threads as usize),
            prefill_head: !a.no_prefill_head,
            ..Default::default()
        },
    )
}

/// Turn `t`'s request: the question with the conversation so far, as a client carries it.
fn turn_request(a: &Args, history: &[Artifact], q: &[u8], t: usize) -> S2sRequest {
    S2sRequest {
        question: q.to_vec().into(),
        history: history.to_vec(),
        return_codes: true,
        s2s: S2sOptions {
            max_new_tokens: a.steps as usize,
            text: SamplerConfig::GREEDY,
            audio: SamplerConfig::s2s_audio(7 + t as u64),
            ..Default::default()
        },
    }
}

/// Adds a finished turn (its question and reply artifact) to the history the client carries.
fn remember_turn(history: &mut Vec<Artifact>, q: &[u8], reply: Option<Artifact>) -> Result<()> {
    history.push(Artifact {
        id: QUESTION_ID.to_owned(),
        kind: ArtifactKind::Custom,
        payload: q.to_vec(),
        meta: BTreeMap::new(),
    });
    history.push(reply.context("no reply artifact despite return_codes")?);
    Ok(())
}

fn conversation(model: &Lfm2Audio, a: &Args, questions: &[Vec<u8>]) -> Result<Vec<Turn>> {
    let mut session = bench_session(model, a);
    let mut history: Vec<Artifact> = Vec::new();
    let mut turns = Vec::new();
    for (t, q) in questions.iter().enumerate() {
        // why: the session prefills each reply ahead while the user listens and speaks (2.4 s
        // of reply audio here, far longer than the work), and a new session its system
        // prompt's head (as a server's pooled sessions do before their first request); waiting
        // for it stands for that time, and the work's own time is reported apart (columns
        // "ahead"; `--no-prefill-head` for a cold first turn).
        let ahead = session.wait_background().cloned();
        let req = turn_request(a, &history, q, t);
        let meter = LoadMeter::start();
        let r = session
            .s2s(&req)
            .with_context(|| format!("turn {}", t + 1))?;
        let mut turn = Turn::of(&r, meter.stop());
        if let Some(b) = ahead {
            turn.ahead_positions = b.prefilled_positions;
            turn.ahead = b.elapsed.as_secs_f64();
        }
        // Progress on stderr: on a loaded machine a round can take minutes.
        eprintln!(
            "  turn {}: prompt {}, resumed {}, prefilled ahead {} in {:.2} s, total {:.2} s, \
             thread waited {:.2} s",
            t + 1,
            turn.prompt,
            turn.resumed,
            turn.ahead_positions,
            turn.ahead,
            turn.total,
            turn.load.wait
        );
        turns.push(turn);
        remember_turn(&mut history, q, r.artifact)?;
    }
    Ok(turns)
}

/// One round of ours: every session runs the conversation, side by side.
struct OursRound {
    /// Per session, per turn.
    sessions: Vec<Vec<Turn>>,
    wall: f64,
}

fn ours_round(model: &Lfm2Audio, a: &Args, questions: &[Vec<u8>]) -> Result<OursRound> {
    let n = a.sessions as usize;
    let barrier = Arc::new(Barrier::new(n + 1));
    let (wall, results) = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (model, barrier) = (model.clone(), barrier.clone());
                sc.spawn(move || {
                    barrier.wait();
                    conversation(&model, a, questions)
                })
            })
            .collect();
        barrier.wait();
        let t0 = Instant::now();
        let out: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (t0.elapsed().as_secs_f64(), out)
    });
    let mut sessions = Vec::new();
    for r in results {
        match r {
            Ok(r) => sessions.push(r?),
            Err(_) => bail!("a session thread panicked"),
        }
    }
    Ok(OursRound { sessions, wall })
}

// ---------------------------------------------------------------------------------------------
// llama.cpp, in a child process.

/// llama.cpp's measurement of one prompt length.
#[derive(Debug, Clone)]
struct LlamaLen {
    len: usize,
    prefill: f64,
    decode: f64,
    load: Load,
}

struct LlamaRun {
    lens: Vec<LlamaLen>,
    load_s: f64,
    peak_rss: u64,
}

/// The child: loads the backbone with libllama's defaults and times prefill and decode.
fn llama_child(a: &Args, backbone: &Path) -> Result<()> {
    let lengths: Vec<usize> = a.lengths.iter().map(|&l| l as usize).collect();
    let max_len = lengths.iter().copied().max().context("no --lengths")?;
    if max_len == 0 {
        bail!("prompt lengths must be positive");
    }
    let decode_steps = a.decode_steps as usize;
    let t0 = Instant::now();
    let model = load_llama(a, backbone)?;
    let load_s = t0.elapsed().as_secs_f64();
    let n_ctx = (max_len + decode_steps + 16).div_ceil(256) * 256;
    let opts = ContextOptions {
        n_ctx: n_ctx as u32,
        // One logical batch per prompt; libllama's default physical micro-batch.
        n_batch: max_len.max(32) as u32,
        n_ubatch: 512,
        n_seq_max: 1,
        n_rs_seq: 0,
        n_threads: a.threads as i32,
        exact_attention: false,
    };
    let mut ctx = LlamaContext::new(&model, &opts, None).context("libllama context")?;
    let n_vocab = model.n_vocab() as u32;
    let mut rng = Lcg(0x5EED_11A3);
    let mut batch = LlamaBatch::new();
    let mut run = |ctx: &mut LlamaContext, len: usize, rng: &mut Lcg| -> Result<(f64, Vec<f64>)> {
        ctx.clear(true);
        batch.clear();
        for i in 0..len {
            batch.push((rng.next_u32() % n_vocab) as i32, i as i32, 0, i + 1 == len);
        }
        let t = Instant::now();
        ctx.decode(&batch)?;
        let prefill = t.elapsed().as_secs_f64();
        let mut steps = Vec::with_capacity(decode_steps);
        for i in 0..decode_steps {
            batch.clear();
            batch.push((rng.next_u32() % n_vocab) as i32, (len + i) as i32, 0, true);
            let t = Instant::now();
            ctx.decode(&batch)?;
            steps.push(t.elapsed().as_secs_f64());
        }
        Ok((prefill, steps))
    };
    // Warm-up: first graphs, page faults of the mapping.
    run(&mut ctx, 32.min(max_len), &mut rng)?;
    let mut out = Vec::new();
    for &len in &lengths {
        let meter = LoadMeter::start();
        let (prefill, steps) = run(&mut ctx, len, &mut rng)?;
        out.push(json!({"len": len, "prefill_s": prefill,
                        "decode_s": median(&steps), "load": meter.stop().json()}));
    }
    println!(
        "LLAMA_RESULT {}",
        json!({"load_s": load_s, "peak_rss": status_bytes("VmHWM:"), "lens": out})
    );
    Ok(())
}

/// Whether ours computes `Q4_0` products with the VNNI column kernel (vendor patch 0007: built,
/// and not turned off by `LFM2_NO_VNNI_Q4_0`), so that a side with ggml's kernel is worth timing.
fn vnni_kernel_on() -> bool {
    env_defaults().vnni_q4_0 && vnni_q4_0_built()
}

/// The model options with the environment's `LFM2_*` variables applied (README,
/// "Environment"): the bench is a binary, and the engine library reads no environment.
fn env_defaults() -> ModelOptions {
    ModelOptions::default().with_vars(&|name| std::env::var(name).ok())
}

/// libllama's model for a llama.cpp child: on the CPU when ours runs there (`--llama-cpu`),
/// else with libllama's defaults (every layer on the GPU it finds, as ours on a GPU).
fn load_llama(a: &Args, backbone: &Path) -> Result<LlamaModel> {
    let model = if a.llama_cpu {
        LlamaModel::load_cpu(backbone)
    } else {
        LlamaModel::load(backbone)
    };
    model.with_context(|| format!("libllama loading {}", backbone.display()))
}

fn llama_round(a: &Args, backbone: &Path, lengths: &[usize]) -> Result<LlamaRun> {
    let lens: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
    let mut cmd = Command::new(self_exe()?);
    if a.llama_cpu {
        cmd.arg("--llama-cpu");
    }
    let out = cmd
        .arg("--llama-child")
        .arg(backbone)
        .arg("--lengths")
        .arg(lens.join(","))
        .arg("--threads")
        .arg(a.threads.to_string())
        .arg("--decode-steps")
        .arg(a.decode_steps.to_string())
        .stdin(Stdio::null())
        .output()
        .context("starting the llama.cpp child")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(20).collect();
        bail!(
            "the llama.cpp child failed ({}):\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("LLAMA_RESULT "))
        .context("the llama.cpp child printed no result")?;
    let v: Value = serde_json::from_str(line)?;
    let lens: Vec<LlamaLen> = v["lens"]
        .as_array()
        .context("lens")?
        .iter()
        .map(|l| LlamaLen {
            len: l["len"].as_u64().unwrap_or(0) as usize,
            prefill: l["prefill_s"].as_f64().unwrap_or(f64::NAN),
            decode: l["decode_s"].as_f64().unwrap_or(f64::NAN),
            load: Load::from_json(&l["load"]),
        })
        .collect();
    let got: Vec<usize> = lens.iter().map(|l| l.len).collect();
    if got != lengths {
        bail!("the llama.cpp child measured lengths {got:?}, asked for {lengths:?}");
    }
    Ok(LlamaRun {
        lens,
        load_s: v["load_s"].as_f64().unwrap_or(f64::NAN),
        peak_rss: v["peak_rss"].as_u64().unwrap_or(0),
    })
}

// ---------------------------------------------------------------------------------------------
// The busy core.

/// Spins until the parent is gone (checked every few tens of milliseconds, so an aborted bench
/// leaves no spinner behind).
fn busy(parent: u32) -> Result<()> {
    let mut x = 1u64;
    loop {
        for _ in 0..20_000_000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
        }
        std::hint::black_box(x);
        if std::os::unix::process::parent_id() != parent {
            return Ok(());
        }
    }
}

/// The spinning child, killed when dropped.
struct BusyCore(Child);

impl BusyCore {
    fn start() -> Result<BusyCore> {
        let child = Command::new(self_exe()?)
            .arg("--busy")
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the busy-core child")?;
        Ok(BusyCore(child))
    }
}

impl Drop for BusyCore {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Reporting.

fn ms(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{:.1}", v * 1e3))
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}x"))
}

fn med_of<F: Fn(&Turn) -> Option<f64>>(samples: &[&Turn], f: F) -> Option<f64> {
    median(&samples.iter().filter_map(|t| f(t)).collect::<Vec<_>>())
}

fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.0}%", 100.0 * part / whole)
    } else {
        "–".into()
    }
}

fn pressure_pct(l: &Load) -> String {
    l.pressure.map_or("–".into(), |p| pct(p, l.wall))
}

fn main() -> Result<()> {
    audio_engine::ggml::set_log_level(audio_engine::lfm2_audio::vars::log_level_from_vars(
        &|name| std::env::var(name).ok(),
    ));
    let mut a = Args::parse();
    if let Some(parent) = a.busy {
        return busy(parent);
    }
    if let Some(backbone) = &a.llama_child {
        return llama_child(&a, backbone);
    }
    if let Some(backbone) = &a.steps_child {
        return sweep::steps_child(&a, backbone);
    }
    if let Some(backbone) = &a.llama_parallel_child {
        return sweep::llama_parallel_child(&a, backbone);
    }
    if let Some(dir) = &a.write_package {
        return ensure_full_package(dir, a.quant).map(|_| ());
    }

    let hub_paths = a.hub.fetch(Some(a.quant))?;
    let dir = a
        .package_dir
        .clone()
        .unwrap_or_else(|| default_full_dir(a.quant));
    if hub_paths.is_none() && complete(&dir, a.quant).is_none() {
        // why a child: writing takes ~7 GB; in this process it would stay in the peak RSS
        // (VmHWM) and partly in the RSS the bench reports.
        let status = Command::new(self_exe()?)
            .arg("--write-package")
            .arg(&dir)
            .arg("--quant")
            .arg(a.quant.to_string())
            .stdin(Stdio::null())
            .status()
            .context("starting the package writer")?;
        if !status.success() {
            bail!("writing the package failed ({status})");
        }
    }
    let paths = match hub_paths {
        Some(p) => p,
        None => complete(&dir, a.quant).context("the package is incomplete")?,
    };
    let backbone = paths.backbone.clone();
    if !a.prefill_ab.is_empty() {
        return prefill_ab::run(&a, &backbone);
    }
    let step_bytes = floor::step_bytes(&paths)?;
    let machine = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "bench: {} ({:?}), {} turns of {:.1} s questions, {} reply steps, {} thread(s) ({} for \
         frame graphs) x {} session(s), {} round(s){}; {machine}, {cores} cores; load average \
         {:.2}",
        dir.display(),
        a.quant,
        a.turns,
        a.question_seconds,
        a.steps,
        a.threads,
        a.frame_threads,
        a.sessions,
        a.rounds,
        if a.load_core {
            ", one core kept busy"
        } else {
            ""
        },
        loadavg().unwrap_or(f64::NAN),
    );

    let _busy = if a.load_core {
        Some(BusyCore::start()?)
    } else {
        None
    };

    let rss0 = status_bytes("VmRSS:").unwrap_or(0);
    let t_load = Instant::now();
    let paths_again = paths.clone();
    let model = Lfm2Audio::from_package(
        ModelPackage::open_paths(paths)?,
        ModelOptions {
            n_threads: a.threads as usize,
            frame_threads: a.frame_threads as usize,
            step_threads: a.step_threads as usize,
            max_batch: a.batch as usize,
            batch_from: a.batch_from as usize,
            device: a.device,
            ..env_defaults()
        },
    )?;
    let load_s = t_load.elapsed().as_secs_f64();
    // llama.cpp's children run where ours does: on the CPU unless ours is on a GPU
    a.llama_cpu = model.device_name() == "CPU";
    let rss_model = status_bytes("VmRSS:").unwrap_or(0);
    println!(
        "load: {:.2} s, RSS {:.0} MiB after load ({:.0} MiB before)",
        load_s,
        mib(rss_model),
        mib(rss0)
    );
    if a.encoder_only {
        // ours again with ggml's Q4_0 kernel, to read the VNNI kernel's share in this run
        let ggml_kernel = if vnni_kernel_on() {
            Some(Lfm2Audio::from_package(
                ModelPackage::open_paths(paths_again)?,
                ModelOptions {
                    n_threads: a.threads as usize,
                    vnni_q4_0: false,
                    device: a.device,
                    ..env_defaults()
                },
            )?)
        } else {
            None
        };
        let extra = encoder_and_floor(&a, &model, ggml_kernel.as_ref(), step_bytes, None)?;
        if a.json {
            println!(
                "BENCH_JSON {}",
                json!({ "quant": a.quant.to_string(), "threads": a.threads, "encoder_and_floor": extra })
            );
        }
        print_device_report(&model);
        return Ok(());
    }
    let questions: Vec<Vec<u8>> = (0..a.turns as usize)
        .map(|t| question_wav(t, a.question_seconds))
        .collect();
    if !a.sweep.is_empty() {
        return sweep::run(&a, &model, &backbone, &questions);
    }

    let mut ours: Vec<OursRound> = Vec::new();
    let mut llama: Vec<LlamaRun> = Vec::new();
    let mut lengths: Vec<usize> = Vec::new();
    for r in 0..a.rounds as usize {
        // why: alternate who goes first (ours must go first once to know the prompt lengths).
        let llama_first = r % 2 == 1 && !lengths.is_empty() && !a.no_llama;
        if llama_first {
            llama.push(llama_round(&a, &backbone, &lengths)?);
        }
        let o = ours_round(&model, &a, &questions)?;
        lengths = o.sessions[0].iter().map(|t| t.prompt).collect();
        println!(
            "round {}: ours {:.2} s wall ({} session(s)); per turn prompt {:?}",
            r + 1,
            o.wall,
            a.sessions,
            lengths
        );
        ours.push(o);
        if !llama_first && !a.no_llama {
            llama.push(llama_round(&a, &backbone, &lengths)?);
        }
    }
    let peak = status_bytes("VmHWM:").unwrap_or(0);

    // Byte identity across rounds and sessions (an engine invariant; a benchmark that changed
    // outputs would be measuring something else).
    let reference: Vec<u64> = ours[0].sessions[0].iter().map(|t| t.digest).collect();
    let identical = ours.iter().all(|o| {
        o.sessions
            .iter()
            .all(|s| s.iter().map(|t| t.digest).eq(reference.iter().copied()))
    });

    let n_turns = a.turns as usize;
    let samples = |t: usize| -> Vec<&Turn> {
        ours.iter()
            .flat_map(|o| o.sessions.iter().map(move |s| &s[t]))
            .collect()
    };
    let llama_at = |t: usize, f: fn(&LlamaLen) -> f64| -> Option<f64> {
        median(&llama.iter().map(|l| f(&l.lens[t])).collect::<Vec<_>>())
    };

    println!();
    println!(
        "ours, per turn (medians over {} round(s) x {} session(s)); times in ms; frame = \
         backbone + depthformer; RTF = generation time / audio produced",
        a.rounds, a.sessions
    );
    println!(
        "| turn | prompt | resumed | prefilled | ahead pos | ahead | reused q | encode | prefill | \
         pos/s | first audio | text step | frame | frame backbone | frame depthformer | \
         detok/frame | steps | audio s | RTF | total | RSS MiB | thread waited | CPU pressure |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut per_turn_json = Vec::new();
    for t in 0..n_turns {
        let s = samples(t);
        let first = s[0];
        let wall = med_of(&s, |x| Some(x.load.wall)).unwrap_or(0.0);
        let wait = med_of(&s, |x| Some(x.load.wait)).unwrap_or(0.0);
        let press = med_of(&s, |x| x.load.pressure);
        let row = json!({
            "turn": t + 1, "prompt": first.prompt, "resumed": first.resumed,
            "reused_questions": first.reused,
            "ahead_positions": first.ahead_positions,
            "ahead_s": med_of(&s, |x| Some(x.ahead)),
            "encode_s": med_of(&s, |x| Some(x.encode)),
            "prefill_s": med_of(&s, |x| Some(x.prefill)),
            "prefill_pos_per_s": med_of(&s, |x| Some(x.prefill_rate())),
            "first_audio_s": med_of(&s, |x| x.first_audio),
            "text_step_s": med_of(&s, |x| x.text_step),
            "frame_s": med_of(&s, |x| x.frame),
            "frame_backbone_s": med_of(&s, |x| x.frame_backbone),
            "frame_depthformer_s": med_of(&s, |x| x.frame_depth),
            "detok_per_frame_s": med_of(&s, |x| x.detok),
            "steps": first.steps, "audio_s": first.audio_secs,
            "rtf": med_of(&s, |x| x.rtf()),
            "total_s": med_of(&s, |x| Some(x.total)),
            "rss": s.iter().map(|x| x.rss).max(),
            "thread_wait_s": wait, "cpu_pressure_s": press, "wall_s": wall,
        });
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | \
             {} | {:.2} | {} | {} | {:.0} | {} | {} |",
            t + 1,
            first.prompt,
            first.resumed,
            first.prefilled(),
            first.ahead_positions,
            ms(med_of(&s, |x| Some(x.ahead))),
            first.reused,
            ms(med_of(&s, |x| Some(x.encode))),
            ms(med_of(&s, |x| Some(x.prefill))),
            med_of(&s, |x| Some(x.prefill_rate())).unwrap_or(0.0),
            ms(med_of(&s, |x| x.first_audio)),
            ms(med_of(&s, |x| x.text_step)),
            ms(med_of(&s, |x| x.frame)),
            ms(med_of(&s, |x| x.frame_backbone)),
            ms(med_of(&s, |x| x.frame_depth)),
            ms(med_of(&s, |x| x.detok)),
            first.steps,
            first.audio_secs,
            med_of(&s, |x| x.rtf()).map_or("–".into(), |v| format!("{v:.3}")),
            ms(med_of(&s, |x| Some(x.total))),
            mib(s.iter().map(|x| x.rss).max().unwrap_or(0)),
            pct(wait, wall),
            press.map_or("–".into(), |p| pct(p, wall)),
        );
        per_turn_json.push(row);
    }

    // Every round apart: on a shared machine one round can be quiet and the next contended,
    // and the medians alone would hide which.
    println!();
    println!("ours, every round and session apart (times in ms)");
    println!(
        "| round | session | turn | prefill | first audio | text step | frame | RTF | total | \
         thread waited | CPU pressure |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (r, o) in ours.iter().enumerate() {
        for (si, sess) in o.sessions.iter().enumerate() {
            for (t, x) in sess.iter().enumerate() {
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r + 1,
                    si + 1,
                    t + 1,
                    ms(Some(x.prefill)),
                    ms(x.first_audio),
                    ms(x.text_step),
                    ms(x.frame),
                    x.rtf().map_or("–".into(), |v| format!("{v:.3}")),
                    ms(Some(x.total)),
                    pct(x.load.wait, x.load.wall),
                    pressure_pct(&x.load),
                );
            }
        }
    }
    if !llama.is_empty() {
        println!();
        println!("llama.cpp, every run apart (times in ms)");
        println!("| run | turn | prompt | prefill | decode | thread waited | CPU pressure |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for (r, l) in llama.iter().enumerate() {
            for (t, x) in l.lens.iter().enumerate() {
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    r + 1,
                    t + 1,
                    x.len,
                    ms(Some(x.prefill)),
                    ms(Some(x.decode)),
                    pct(x.load.wait, x.load.wall),
                    pressure_pct(&x.load),
                );
            }
        }
    }

    // Aggregate throughput (all sessions together).
    let walls: Vec<f64> = ours.iter().map(|o| o.wall).collect();
    let audio_total: f64 = ours[0]
        .sessions
        .iter()
        .flat_map(|s| s.iter().map(|t| t.audio_secs))
        .sum();
    let steps_total: usize = ours[0]
        .sessions
        .iter()
        .flat_map(|s| s.iter().map(|t| t.steps))
        .sum();
    let wall_med = median(&walls).unwrap_or(f64::NAN);
    println!();
    println!(
        "ours, whole conversation x {} session(s): median wall {:.2} s; {} reply steps and \
         {:.2} s of audio in all: {:.1} steps/s, {:.2} s of audio per wall second; outputs \
         identical across rounds and sessions: {}",
        a.sessions,
        wall_med,
        steps_total,
        audio_total,
        steps_total as f64 / wall_med,
        audio_total / wall_med,
        if identical { "yes" } else { "NO" }
    );
    let ticks = model.step_stats();
    println!(
        "step ticks: {} ticks ran {} steps (mean width {:.2}, widest {}; --batch {})",
        ticks.ticks,
        ticks.steps,
        ticks.steps as f64 / ticks.ticks.max(1) as f64,
        ticks.max_width,
        a.batch
    );
    println!(
        "ours: load {:.2} s; peak RSS (VmHWM) {:.0} MiB ({:.2} GB)",
        load_s,
        mib(peak),
        peak as f64 / 1e9
    );

    let mut llama_json = Vec::new();
    let (mut r_prefill, mut r_text, mut r_frame) = (Vec::new(), Vec::new(), Vec::new());
    if !llama.is_empty() {
        println!();
        println!(
            "llama.cpp lfm2 on {} (default model params: mmap + CPU extra buffer types; {} \
             threads; medians over {} run(s)), and ours / llama.cpp",
            backbone.display(),
            a.threads,
            llama.len()
        );
        println!(
            "| turn | prompt | llama prefill ms | llama tok/s | ours pos/s | prefill ratio (>= 1.0) \
             | llama decode ms | ours text step ms | text/decode (<= 1.1) | ours frame ms | \
             frame/decode (<= 1.5) | llama thread waited | CPU pressure |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (t, &len) in lengths.iter().enumerate() {
            let s = samples(t);
            let lp = llama_at(t, |l| l.prefill);
            let ld = llama_at(t, |l| l.decode);
            let lrate = lp.map(|p| len as f64 / p);
            let orate = med_of(&s, |x| Some(x.prefill_rate()));
            let text = med_of(&s, |x| x.text_step);
            let frame = med_of(&s, |x| x.frame);
            let rp = orate.zip(lrate).map(|(o, l)| o / l);
            let rt = text.zip(ld).map(|(o, l)| o / l);
            let rf = frame.zip(ld).map(|(o, l)| o / l);
            r_prefill.extend(rp);
            r_text.extend(rt);
            r_frame.extend(rf);
            let loads: Vec<Load> = llama.iter().map(|l| l.lens[t].load).collect();
            let lw = median(&loads.iter().map(|l| l.wall).collect::<Vec<_>>()).unwrap_or(0.0);
            let lwait = median(&loads.iter().map(|l| l.wait).collect::<Vec<_>>()).unwrap_or(0.0);
            let lpress = median(&loads.iter().filter_map(|l| l.pressure).collect::<Vec<_>>());
            println!(
                "| {} | {} | {} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
                t + 1,
                len,
                ms(lp),
                lrate.unwrap_or(f64::NAN),
                orate.unwrap_or(f64::NAN),
                ratio(rp),
                ms(ld),
                ms(text),
                ratio(rt),
                ms(frame),
                ratio(rf),
                pct(lwait, lw),
                lpress.map_or("–".into(), |p| pct(p, lw)),
            );
            llama_json.push(json!({"turn": t + 1, "len": len, "prefill_s": lp,
                "decode_s": ld, "prefill_ratio": rp, "text_ratio": rt, "frame_ratio": rf,
                "thread_wait_s": lwait, "cpu_pressure_s": lpress, "wall_s": lw}));
        }
        let ll: Vec<f64> = llama.iter().map(|l| l.load_s).collect();
        let lpeak = llama.iter().map(|l| l.peak_rss).max().unwrap_or(0);
        println!(
            "llama.cpp: load {:.2} s (median), peak RSS {:.0} MiB",
            median(&ll).unwrap_or(f64::NAN),
            mib(lpeak)
        );
    }

    // The issue's targets.
    let t1 = samples(0);
    let rtf = median(
        &(0..n_turns)
            .filter_map(|t| med_of(&samples(t), |x| x.rtf()))
            .collect::<Vec<_>>(),
    );
    let first_audio = med_of(&t1, |x| x.first_audio);
    let check = |ok: Option<bool>| match ok {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "–",
    };
    println!();
    println!("targets (issue #12); a per-turn figure is the median over the turns' medians:");
    println!("| target | measured | |");
    println!("|---|---:|---|");
    let rp1 = r_prefill.first().copied();
    let rpm = median(&r_prefill);
    println!(
        "| prefill >= 1.0x llama.cpp (turn 1 / median of turns) | {} / {} | {} |",
        ratio(rp1),
        ratio(rpm),
        check(rp1.map(|v| v >= 1.0))
    );
    let rtm = median(&r_text);
    println!(
        "| text step <= 1.1x llama.cpp decode | {} | {} |",
        ratio(rtm),
        check(rtm.map(|v| v <= 1.1))
    );
    let rfm = median(&r_frame);
    println!(
        "| audio frame <= 1.5x llama.cpp decode | {} | {} |",
        ratio(rfm),
        check(rfm.map(|v| v <= 1.5))
    );
    println!(
        "| real-time factor <= 0.6 | {} | {} |",
        rtf.map_or("–".into(), |v| format!("{v:.3}")),
        check(rtf.map(|v| v <= 0.6))
    );
    println!(
        "| turn-1 first audio <= 1.0 s | {} s | {} |",
        first_audio.map_or("–".into(), |v| format!("{v:.2}")),
        check(first_audio.map(|v| v <= 1.0))
    );
    println!(
        "| peak RSS <= 1.4 GB (Q4_0, 4 turns) | {:.2} GB | {} |",
        peak as f64 / 1e9,
        check((a.quant == Quant::Q4_0).then_some(peak as f64 <= 1.4e9))
    );
    if n_turns >= 2 {
        let fl = med_of(&samples(n_turns - 1), |x| x.first_audio);
        let r = fl.zip(first_audio).map(|(l, f)| l / f);
        println!(
            "| turn-{n_turns} first audio <= 1.3x turn 1 | {} | {} |",
            ratio(r),
            check(r.map(|v| v <= 1.3))
        );
    }
    let overall = ours
        .iter()
        .flat_map(|o| o.sessions.iter().flatten())
        .map(|t| t.load)
        .fold(Load::default(), |acc, l| Load {
            wall: acc.wall + l.wall,
            cpu: acc.cpu + l.cpu,
            wait: acc.wait + l.wait,
            pressure: match (acc.pressure, l.pressure) {
                (None, p) | (p, None) => p,
                (Some(x), Some(y)) => Some(x + y),
            },
        });
    println!(
        "contention during our turns: the computing thread waited for a core {} of the time; \
         CPU pressure (some task waiting) {}; load average now {:.2}",
        pct(overall.wait, overall.wall),
        pressure_pct(&overall),
        loadavg().unwrap_or(f64::NAN)
    );

    let steady = |f: fn(&Turn) -> Option<f64>| {
        median(
            &(0..n_turns)
                .filter_map(|t| med_of(&samples(t), f))
                .collect::<Vec<_>>(),
        )
    };
    let measured = StepMix {
        text_step: steady(|x| x.text_step),
        frame: steady(|x| x.frame),
        rtf,
        text_steps: t1[0].text_steps as f64,
        frames: t1[0].frames as f64,
        audio_s: t1[0].audio_secs,
    };
    // why last: the encoder's 10 s graph and the bandwidth probe's 1 GiB buffer would otherwise
    // count in the conversation's peak RSS.
    let extra = encoder_and_floor(&a, &model, None, step_bytes, Some(measured))?;

    if a.json {
        let v = json!({
            "quant": a.quant.to_string(), "turns": a.turns, "threads": a.threads, "frame_threads": a.frame_threads, "step_threads": a.step_threads,
            "sessions": a.sessions, "rounds": a.rounds, "load_core": a.load_core,
            "steps": a.steps, "question_seconds": a.question_seconds,
            "load_s": load_s, "peak_rss": peak, "identical": identical,
            "wall_s": walls, "per_turn": per_turn_json, "llama": llama_json,
            "encoder_and_floor": extra,
        });
        println!("BENCH_JSON {v}");
    }
    if !identical {
        bail!("outputs differed between rounds or sessions");
    }
    print_device_report(&model);
    Ok(())
}

/// On a device: each component's ops on the CPU fallback and the bytes its widest graph moves
/// between host and device (inputs in, outputs back, and across fallback splits).
fn print_device_report(model: &Lfm2Audio) {
    let fallbacks = audio_engine::ggml::fallbacks();
    if fallbacks.is_empty() {
        return;
    }
    println!();
    println!(
        "device {}: graph placement per component",
        model.device_name()
    );
    println!(
        "| component | graphs | device nodes | CPU fallback ops | splits | bytes across (fewest) | \
         bytes across (most) |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|");
    for (label, f) in fallbacks {
        let w = &f.widest;
        let ops: Vec<String> = w
            .cpu_ops
            .iter()
            .map(|(op, n)| format!("{op} x{n}"))
            .collect();
        println!(
            "| {label} | {} | {} | {} | {} | {} | {} |",
            f.graphs,
            w.device_nodes,
            if ops.is_empty() {
                "none".to_owned()
            } else {
                ops.join(", ")
            },
            w.splits,
            f.fewest_bytes,
            w.copied_bytes
        );
    }
}

/// The conversation's medians the floor is compared with, and its step mix.
struct StepMix {
    text_step: Option<f64>,
    frame: Option<f64>,
    rtf: Option<f64>,
    text_steps: f64,
    frames: f64,
    audio_s: f64,
}

/// liquid-audio 1.3.0's 10 s encode on this machine kind, as issue #12 quotes it (fp32, 2
/// threads). Printed for context beside liquid-audio's encode measured in the same run when a
/// Python with liquid-audio is there (`--liquid-python`, see `encoder.rs`), alone otherwise.
const LIQUID_AUDIO_ENCODE_10S: f64 = 0.31;

/// The encoder figure and the measured bandwidth floor (with the conversation's figures beside
/// it when there was one); returns both as JSON.
fn encoder_and_floor(
    a: &Args,
    model: &Lfm2Audio,
    ggml_kernel: Option<&Lfm2Audio>,
    bytes: floor::StepBytes,
    measured: Option<StepMix>,
) -> Result<Value> {
    println!();
    let f = encoder::measure(
        model,
        ggml_kernel,
        &question_wav(0, a.encoder_seconds),
        a.encoder_reps as usize,
        a.threads as usize,
        a.liquid_python
            .clone()
            .or_else(encoder::default_liquid_python)
            .as_deref(),
    )?;
    encoder::print(&f, LIQUID_AUDIO_ENCODE_10S);
    println!();
    let fl = floor::Floor {
        bandwidth: floor::read_bandwidth(a.threads as usize, 5),
        bytes,
    };
    // The protocol's mix when no conversation ran: 6 text steps and 12 frames per 0.96 s.
    let mix = measured
        .as_ref()
        .map_or((6.0, 12.0, 0.96), |m| (m.text_steps, m.frames, m.audio_s));
    let m = measured
        .as_ref()
        .and_then(|m| Some((m.text_step?, m.frame?, m.rtf?)));
    floor::print(&fl, m, mix);
    Ok(json!({
        "encoder": f.json(),
        "floor": {
            "bandwidth_bytes_per_s": fl.bandwidth, "text_step_bytes": fl.bytes.text(),
            "frame_bytes": fl.bytes.frame(), "text_step_s": fl.text_s(),
            "frame_s": fl.frame_s(), "rtf": fl.rtf(mix.0, mix.1, mix.2),
        },
    }))
}
