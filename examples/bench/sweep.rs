//! `--sweep 1,2,4,8`: many conversations on one model (issue #22). For each count N, in one
//! run: N sessions run the conversation (streamed, so every audio event is timed) with
//! staggered starts (`--stagger` seconds apart), their steps batched by the model's step
//! scheduler (`--batch`). Reported per N: seconds of audio per wall second and its ratio to
//! N = 1, each stream's RTF, time to first audio (request start to the first audio event,
//! p50/p95), the newcomer's (the last session's first turn, started while the others run),
//! the median text step a stream saw, the step ticks' mean width, the longest gap between two
//! audio events of a running stream while another session's turn was before its first audio
//! (prefilling) and the longest otherwise (a reply's text steps between its audio blocks make
//! gaps of their own), and the peak RSS over the model's.
//!
//! The anchors run in child processes (their memory and threads stay out of ours): the batched
//! backbone step alone (`Backbone::forward_steps` at widths N, no scheduler) and llama.cpp's
//! own parallel decode of N sequences on the same backbone file (one `llama_batch` with N
//! sequence ids, as `llama-batched-bench` does).
//!
//! The bound: batching shares only the steps (text steps, frames' backbone and depthformer
//! steps). Encoders, prefills and detokenizers run per session on the same cores. With `f` the
//! share of the N = 1 wall time spent in the batchable steps and `r(N)` the batched step at
//! width N against width 1, N sessions need at least `N (1 - f) + f r(N)` times N = 1's wall time
//! for N times its audio, so their audio per wall second is at most `N / (N (1 - f) + f r(N))`
//! times N = 1's. It assumes that the work outside the steps keeps the cores busy at N = 1 (it
//! runs with every thread there) and that the depthformer's frames scale as the backbone's step.
//! The column says how far the measured figure is from what the steps allow.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use audio_engine::lfm2_audio::conversation::Artifact;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{Lfm2Audio, ReplyEvent};
use audio_tooling::step_anchor::StepProbe;
use lfm2_llm::llama::{ContextOptions, LlamaBatch, LlamaContext};
use serde_json::{json, Value};

use super::{median, mib, self_exe, status_bytes, Args, Lcg};

/// Prompt positions each sequence holds before the timed steps of the anchors.
const ANCHOR_PROMPT: usize = 100;
/// Timed steps per width in the anchors.
const ANCHOR_STEPS: usize = 24;

/// One streamed turn of one session, times in seconds from the sweep's start.
struct TurnTrace {
    start: f64,
    first_audio: Option<f64>,
    audio_events: Vec<f64>,
    audio_secs: f64,
    generate: f64,
    /// Seconds in the work a tick can batch: text steps, frames' backbone and depthformer.
    batchable: f64,
    text_step: Option<f64>,
    digest: u64,
}

fn conversation(
    model: &Lfm2Audio,
    a: &Args,
    questions: &[Vec<u8>],
    t0: Instant,
    delay: Duration,
) -> Result<Vec<TurnTrace>> {
    std::thread::sleep(delay);
    let mut session = super::bench_session(model, a);
    let mut history: Vec<Artifact> = Vec::new();
    let mut turns = Vec::new();
    for (t, q) in questions.iter().enumerate() {
        session.wait_background();
        let req = super::turn_request(a, &history, q, t);
        let start = t0.elapsed().as_secs_f64();
        let mut stream = session
            .s2s_stream(&req)
            .map_err(|b| b.1)
            .with_context(|| format!("turn {}", t + 1))?;
        let mut audio_events = Vec::new();
        while let Some(ev) = stream.next_event() {
            if let ReplyEvent::Audio(s) = ev {
                if !s.is_empty() {
                    audio_events.push(t0.elapsed().as_secs_f64());
                }
            }
        }
        let (s, r) = stream.wait()?;
        session = s;
        let r = r.with_context(|| format!("turn {}", t + 1))?;
        let timings = &r.reply.timings;
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        super::fnv(&mut digest, r.reply.text.as_bytes());
        for v in &r.reply.audio {
            super::fnv(&mut digest, &v.to_le_bytes());
        }
        turns.push(TurnTrace {
            start,
            first_audio: audio_events.first().copied(),
            audio_secs: r.reply.audio.len() as f64 / 24_000.0,
            generate: timings.generate.as_secs_f64(),
            batchable: [
                &timings.steps.text,
                &timings.steps.frame_backbone,
                &timings.steps.depthformer,
            ]
            .iter()
            .flat_map(|d| d.iter())
            .map(Duration::as_secs_f64)
            .sum(),
            text_step: median(&super::secs(&timings.steps.text)),
            audio_events,
            digest,
        });
        super::remember_turn(&mut history, q, r.artifact)?;
    }
    Ok(turns)
}

/// The figures of one session count.
struct Point {
    n: usize,
    wall: f64,
    /// Seconds all sessions spent in batchable work (`TurnTrace::batchable`).
    batchable: f64,
    audio: f64,
    rtf: Vec<f64>,
    ttfa: Vec<f64>,
    newcomer_ttfa: f64,
    text_step: f64,
    mean_width: f64,
    gap_in_prefill: f64,
    gap_elsewhere: f64,
    peak_rss_over_model: u64,
    digests: Vec<Vec<u64>>,
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len().max(1) - 1) as f64 * p).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// The longest gap between two audio events of a turn that overlaps another session's turn
/// before its first audio (that session prefilling), and the longest that does not (the
/// reply's own text steps between its audio blocks make gaps too).
fn gaps(sessions: &[Vec<TurnTrace>]) -> (f64, f64) {
    let windows: Vec<(usize, f64, f64)> = sessions
        .iter()
        .enumerate()
        .flat_map(|(s, turns)| {
            turns
                .iter()
                .map(move |t| (s, t.start, t.first_audio.unwrap_or(t.start)))
        })
        .collect();
    let (mut during, mut elsewhere): (f64, f64) = (0.0, 0.0);
    for (s, turns) in sessions.iter().enumerate() {
        for t in turns {
            for w in t.audio_events.windows(2) {
                let (a, b) = (w[0], w[1]);
                let overlaps = windows
                    .iter()
                    .any(|&(o, ws, we)| o != s && ws < b && a < we);
                if overlaps {
                    during = during.max(b - a);
                } else {
                    elsewhere = elsewhere.max(b - a);
                }
            }
        }
    }
    (during, elsewhere)
}

fn run_point(model: &Lfm2Audio, a: &Args, questions: &[Vec<u8>], n: usize) -> Result<Point> {
    let before = model.step_stats();
    let rss_model = status_bytes("VmRSS:").unwrap_or(0);
    let peak = Arc::new(AtomicU64::new(rss_model));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(status_bytes("VmRSS:").unwrap_or(0), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let t0 = Instant::now();
    let results: Vec<_> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let delay = Duration::from_secs_f64(a.stagger * i as f64);
                sc.spawn(move || conversation(model, a, questions, t0, delay))
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let mut sessions = Vec::new();
    for r in results {
        match r {
            Ok(r) => sessions.push(r?),
            Err(_) => bail!("a session thread panicked"),
        }
    }
    let after = model.step_stats();
    let all: Vec<&TurnTrace> = sessions.iter().flatten().collect();
    let ttfa: Vec<f64> = all
        .iter()
        .filter_map(|t| t.first_audio.map(|f| f - t.start))
        .collect();
    let newcomer = &sessions[n - 1][0];
    let ticks = after.ticks - before.ticks;
    let (gap_in_prefill, gap_elsewhere) = gaps(&sessions);
    Ok(Point {
        n,
        wall,
        batchable: all.iter().map(|t| t.batchable).sum(),
        audio: all.iter().map(|t| t.audio_secs).sum(),
        rtf: all
            .iter()
            .map(|t| t.generate / t.audio_secs.max(1e-9))
            .collect(),
        newcomer_ttfa: newcomer
            .first_audio
            .map_or(f64::NAN, |f| f - newcomer.start),
        ttfa,
        text_step: median(&all.iter().filter_map(|t| t.text_step).collect::<Vec<_>>())
            .unwrap_or(f64::NAN),
        // why NaN: unbatched (`--batch 1`) no tick runs, and a width of 0 would read as a value.
        mean_width: match ticks {
            0 => f64::NAN,
            t => (after.steps - before.steps) as f64 / t as f64,
        },
        gap_in_prefill,
        gap_elsewhere,
        peak_rss_over_model: peak.load(Ordering::Relaxed).saturating_sub(rss_model),
        digests: sessions
            .iter()
            .map(|s| s.iter().map(|t| t.digest).collect())
            .collect(),
    })
}

/// Runs a child of this program with `args` and returns its `SWEEP_RESULT` JSON line.
fn child(args: &[String]) -> Result<Value> {
    let out = Command::new(self_exe()?)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("starting a child")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "the child {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(10)
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("SWEEP_RESULT "))
        .context("the child printed no result")?;
    Ok(serde_json::from_str(line)?)
}

/// (child) The batched backbone step alone at each width: median seconds per step, with the
/// `Q4_0` kernel the sessions use (`step_s`) and, where that is the VNNI column kernel, with
/// ggml's own (`step_ggml_s`) on a second copy of the backbone loaded with the kernel off (on
/// CPUs with AMX, ggml's AMX path), the two alternating which goes first at each width.
pub fn steps_child(a: &Args, backbone: &Path) -> Result<()> {
    let threads = a.threads as usize;
    let vnni = super::vnni_kernel_on();
    let ours = StepProbe::load(backbone, threads, vnni)?;
    let ggml = if vnni {
        Some(StepProbe::load(backbone, threads, false)?)
    } else {
        None
    };
    let mut out = Vec::new();
    for (i, &w) in a.sweep.iter().enumerate() {
        let w = w as usize;
        let time = |p: &StepProbe| p.step_seconds(w, ANCHOR_PROMPT, ANCHOR_STEPS);
        let (s, g) = match &ggml {
            Some(g) if i % 2 == 1 => {
                let tg = time(g)?;
                (time(&ours)?, tg)
            }
            Some(g) => {
                let s = time(&ours)?;
                (s, time(g)?)
            }
            None => (time(&ours)?, f64::NAN),
        };
        out.push(json!({"width": w, "step_s": s, "step_ggml_s": g}));
    }
    println!("SWEEP_RESULT {}", json!({ "widths": out }));
    Ok(())
}

/// (child) llama.cpp's parallel decode of N sequences at each width: median seconds per step.
pub fn llama_parallel_child(a: &Args, backbone: &Path) -> Result<()> {
    let model = super::load_llama(a, backbone)?;
    let n_vocab = model.n_vocab() as u32;
    let mut rng = Lcg(0x5EED_22B4);
    let mut out = Vec::new();
    for &w in &a.sweep {
        let w = w as usize;
        let per_seq = ANCHOR_PROMPT + ANCHOR_STEPS + 2;
        let opts = ContextOptions {
            n_ctx: ((per_seq * w).div_ceil(256) * 256) as u32,
            n_batch: ANCHOR_PROMPT.max(32) as u32,
            n_ubatch: 512,
            n_seq_max: w as u32,
            n_rs_seq: 0,
            n_threads: a.threads as i32,
            exact_attention: false,
        };
        let mut ctx = LlamaContext::new(&model, &opts, None).context("libllama context")?;
        let mut batch = LlamaBatch::new();
        for s in 0..w {
            batch.clear();
            for i in 0..ANCHOR_PROMPT {
                let tok = (rng.next_u32() % n_vocab) as i32;
                batch.push(tok, i as i32, s as i32, i + 1 == ANCHOR_PROMPT);
            }
            ctx.decode(&batch)?;
        }
        let mut times = Vec::new();
        for k in 0..=ANCHOR_STEPS {
            batch.clear();
            for s in 0..w {
                let tok = (rng.next_u32() % n_vocab) as i32;
                batch.push(tok, (ANCHOR_PROMPT + k) as i32, s as i32, true);
            }
            let t = Instant::now();
            ctx.decode(&batch)?;
            if k > 0 {
                times.push(t.elapsed().as_secs_f64());
            }
        }
        out.push(json!({"width": w, "step_s": median(&times)}));
    }
    println!("SWEEP_RESULT {}", json!({ "widths": out }));
    Ok(())
}

fn widths_of(v: &Value, key: &str) -> BTreeMap<usize, f64> {
    v["widths"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|w| {
                    (
                        w["width"].as_u64().unwrap_or(0) as usize,
                        w[key].as_f64().unwrap_or(f64::NAN),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The sweep (see the module docs).
pub fn run(a: &Args, model: &Lfm2Audio, backbone: &Path, questions: &[Vec<u8>]) -> Result<()> {
    let widths: Vec<String> = a.sweep.iter().map(|w| w.to_string()).collect();
    let common = |flag: &str| {
        vec![
            flag.to_owned(),
            backbone.display().to_string(),
            "--sweep".into(),
            widths.join(","),
            "--threads".into(),
            a.threads.to_string(),
        ]
    };
    let steps_result = child(&common("--steps-child"))?;
    let ours_steps = widths_of(&steps_result, "step_s");
    let ggml_steps = widths_of(&steps_result, "step_ggml_s");
    let llama_steps = if a.no_llama {
        BTreeMap::new()
    } else {
        // on the CPU, as the batched-step anchor it stands beside
        let mut args = common("--llama-parallel-child");
        args.push("--llama-cpu".into());
        widths_of(&child(&args)?, "step_s")
    };
    let mut points = Vec::new();
    for &n in &a.sweep {
        eprintln!("sweep: {n} session(s)");
        points.push(run_point(model, a, questions, n as usize)?);
    }
    let base = &points[0];
    let base_rate = base.audio / base.wall;
    let one_step = ours_steps.get(&1).copied().unwrap_or(f64::NAN);
    // the share of N = 1's wall time in batchable steps (module docs, "The bound")
    let batchable_share = (base.batchable / base.wall).min(1.0);
    println!();
    println!(
        "sessions sweep: {} turns of {} steps each, starts {:.1} s apart, --threads {}, --batch {}",
        a.turns, a.steps, a.stagger, a.threads, a.batch
    );
    println!(
        "| N | audio s / wall s | vs N=1 | stream RTF (median) | TTFA p50 ms | TTFA p95 ms | \
         newcomer TTFA ms | text step ms (stream) | tick width | longest audio gap in a prefill ms | \
         longest audio gap otherwise ms | \
         peak RSS over model MiB | batched step ms | vs N=1 | llama.cpp N-seq step ms | ours / llama.cpp | \
         batched step, ggml's Q4_0 kernel ms | vs N=1 | bound from the steps |"
    );
    println!(
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let one_ggml = ggml_steps.get(&1).copied().unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    for p in &points {
        let rate = p.audio / p.wall;
        let step = ours_steps.get(&p.n).copied().unwrap_or(f64::NAN);
        let llama = llama_steps.get(&p.n).copied().unwrap_or(f64::NAN);
        let ggml = ggml_steps.get(&p.n).copied().unwrap_or(f64::NAN);
        let n = p.n as f64;
        let bound = n / (n * (1.0 - batchable_share) + batchable_share * step / one_step);
        println!(
            "| {} | {:.3} | {:.2}x | {:.2} | {:.0} | {:.0} | {:.0} | {:.1} | {:.2} | {:.0} | {:.0} | {:.0} | \
             {:.1} | {:.2}x | {:.1} | {:.2}x | {:.1} | {:.2}x | {:.2}x |",
            p.n,
            rate,
            rate / base_rate,
            median(&p.rtf).unwrap_or(f64::NAN),
            percentile(&p.ttfa, 0.5) * 1e3,
            percentile(&p.ttfa, 0.95) * 1e3,
            p.newcomer_ttfa * 1e3,
            p.text_step * 1e3,
            p.mean_width,
            p.gap_in_prefill * 1e3,
            p.gap_elsewhere * 1e3,
            mib(p.peak_rss_over_model),
            step * 1e3,
            step / one_step,
            llama * 1e3,
            step / llama,
            ggml * 1e3,
            ggml / one_ggml,
            bound,
        );
        rows.push(
            json!({"n": p.n, "audio_per_wall_s": rate, "ratio": rate / base_rate,
            "rtf_median": median(&p.rtf), "ttfa_p50_s": percentile(&p.ttfa, 0.5),
            "ttfa_p95_s": percentile(&p.ttfa, 0.95), "newcomer_ttfa_s": p.newcomer_ttfa,
            "text_step_s": p.text_step, "tick_width": p.mean_width,
            "gap_in_prefill_s": p.gap_in_prefill, "gap_elsewhere_s": p.gap_elsewhere,
            "peak_rss_over_model": p.peak_rss_over_model,
            "batched_step_s": step, "llama_parallel_step_s": llama,
            "batched_step_ggml_kernel_s": ggml, "bound_from_steps": bound}),
        );
    }
    // A session's bytes do not depend on its company: every session of every count made the
    // same turns (each session runs the same conversation).
    let reference = &points[0].digests[0];
    let identical = points
        .iter()
        .all(|p| p.digests.iter().all(|d| d == reference));
    println!(
        "N = 1 spent {:.0} % of its wall time in batchable steps",
        batchable_share * 100.0
    );
    println!(
        "outputs identical across counts and sessions: {}",
        if identical { "yes" } else { "NO" }
    );
    if a.json {
        println!(
            "BENCH_JSON {}",
            json!({"sweep": rows, "quant": a.quant.to_string(), "threads": a.threads,
                   "batch": a.batch, "turns": a.turns, "steps": a.steps, "stagger_s": a.stagger})
        );
    }
    if !identical {
        bail!("outputs differed between session counts");
    }
    Ok(())
}
