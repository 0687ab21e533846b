//! The encoder figure of issue #12: one question of `seconds` (10 s in the issue) through
//! `Lfm2Audio::encode_audio` (log-mel features, FastConformer, adapter), repeated; and, when a
//! Python with liquid-audio is there, liquid-audio's same path timed in the same run
//! (`scripts/liquid_encoder_bench.py` as a child process), one run of each in turn.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{load_wav_bytes_16k, Lfm2Audio, ReadOptions};
use serde_json::Value;

/// The script that times liquid-audio's encoder (its header says how to make its venv).
const LIQUID_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scripts/liquid_encoder_bench.py"
);

/// Medians over the repetitions, in seconds.
#[derive(Debug, Clone)]
pub struct EncoderFigures {
    /// Seconds of audio encoded.
    pub audio_s: f64,
    /// Encoder output frames (embeddings the backbone reads).
    pub frames: usize,
    /// Features, encoder and adapter (`Lfm2Audio::encode_audio`).
    pub total_s: f64,
    /// Repetitions the medians are over.
    pub reps: usize,
    /// Every timed run (features, encoder and adapter).
    pub runs_s: Vec<f64>,
    /// FNV-1a of the output's bits, so that runs (and builds) can be compared.
    pub digest: u64,
    /// liquid-audio's figures from the same run: `None` without a Python to run it with,
    /// `Some(Err(why))` when the child failed (the bench goes on without it).
    pub liquid: Option<Result<LiquidFigures, String>>,
    /// Ours again with ggml's own `Q4_0` kernel (a second model, `ModelOptions::vnni_q4_0`
    /// off), one run after each of ours, when ours takes the VNNI column kernel: every run.
    pub ggml_kernel_runs_s: Vec<f64>,
}

/// liquid-audio's encode of the same WAV bytes, timed by the script in this run.
#[derive(Debug, Clone)]
pub struct LiquidFigures {
    pub version: String,
    pub torch: String,
    pub threads: u64,
    /// Its encoder output frames (must equal ours).
    pub frames: u64,
    /// Medians: features + encoder + adapter, features alone, encoder + adapter.
    pub total_s: f64,
    pub features_s: f64,
    pub encoder_s: f64,
    /// Every timed run (features + encoder + adapter), in the order they alternated with ours.
    pub runs_s: Vec<f64>,
}

impl EncoderFigures {
    /// The figures as JSON (for `--json`).
    pub fn json(&self) -> serde_json::Value {
        let liquid = match &self.liquid {
            Some(Ok(l)) => serde_json::json!({
                "version": l.version, "torch": l.torch, "threads": l.threads,
                "frames": l.frames, "total_s": l.total_s, "features_s": l.features_s,
                "encoder_s": l.encoder_s, "runs_s": l.runs_s,
                "ratio": l.total_s / self.total_s,
            }),
            Some(Err(why)) => serde_json::json!({ "error": why }),
            None => serde_json::Value::Null,
        };
        serde_json::json!({
            "audio_s": self.audio_s, "frames": self.frames, "total_s": self.total_s,
            "runs_s": self.runs_s, "digest": format!("{:016x}", self.digest),
            "liquid_audio": liquid,
        })
    }
}

/// `$XDG_CACHE_HOME` (else `~/.cache`) + `lfm2-engine/liquid-venv/bin/python`, if it exists.
pub fn default_liquid_python() -> Option<PathBuf> {
    let p = crate::common::full::cache_base()?.join("lfm2-engine/liquid-venv/bin/python");
    p.exists().then_some(p)
}

/// The script running as a child: it answers each `1` on its stdin with one timed run as a
/// JSON line (`--serve`).
struct LiquidChild {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    wav: PathBuf,
    ready: Value,
}

impl LiquidChild {
    /// Starts the script on `wav` (written to a temporary file) and waits for its warm-up.
    fn start(python: &Path, wav: &[u8], threads: usize) -> Result<LiquidChild> {
        let path =
            std::env::temp_dir().join(format!("lfm2-bench-question-{}.wav", std::process::id()));
        std::fs::write(&path, wav).with_context(|| format!("writing {}", path.display()))?;
        let spawned = Command::new(python)
            .arg(LIQUID_SCRIPT)
            .arg("--wav")
            .arg(&path)
            .args(["--threads", &threads.to_string(), "--serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {} {LIQUID_SCRIPT}", python.display()));
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().context("the child's stdout")?);
        let mut c = LiquidChild {
            child,
            stdin,
            stdout,
            wav: path,
            ready: Value::Null,
        };
        c.ready = c.line().context("waiting for liquid-audio's warm-up")?;
        ensure!(
            c.ready["ready"] == true,
            "unexpected first line {}",
            c.ready
        );
        Ok(c)
    }

    /// The next JSON line of the child.
    fn line(&mut self) -> Result<Value> {
        let mut s = String::new();
        if self.stdout.read_line(&mut s)? == 0 {
            let status = self.child.wait()?;
            bail!("the script ended ({status}); its messages are above");
        }
        serde_json::from_str(&s).with_context(|| format!("parsing {s:?}"))
    }

    /// One timed run: (total, features, encoder + adapter) seconds.
    fn run(&mut self) -> Result<(f64, f64, f64)> {
        let stdin = self.stdin.as_mut().context("the child's stdin")?;
        stdin.write_all(b"1\n")?;
        stdin.flush()?;
        let v = self.line()?;
        let f = |k: &str| v[k].as_f64().with_context(|| format!("no {k} in {v}"));
        Ok((
            f("median_s")?,
            f("features_median_s")?,
            f("encoder_median_s")?,
        ))
    }
}

impl Drop for LiquidChild {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF: the script ends
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.wav);
    }
}

/// Encodes the 16 kHz question `wav` `reps` times (after one untimed warm-up run that pays the
/// first touch of the weights and the graph allocator's growth). With `liquid` (a Python with
/// liquid-audio), the script encodes the same bytes with `threads` threads, one run of its
/// after each of ours, so both see the same drift of the machine's load.
pub fn measure(
    model: &Lfm2Audio,
    ggml_kernel: Option<&Lfm2Audio>,
    wav: &[u8],
    reps: usize,
    threads: usize,
    liquid: Option<&Path>,
) -> Result<EncoderFigures> {
    ensure!(reps > 0, "at least one repetition");
    let samples = load_wav_bytes_16k(wav, &ReadOptions { max_seconds: 60.0 })?;
    // why first: its start-up (importing torch, building 115 M random weights, its warm-up)
    // takes seconds of CPU and must not overlap our warm-up or timed runs.
    let mut child = liquid.map(|p| LiquidChild::start(p, wav, threads));
    let (frames, first) = model.encode_audio(&samples)?;
    if let Some(m) = ggml_kernel {
        // the kernel keeps every byte (vendor patch 0007)
        ensure!(
            m.encode_audio(&samples)?.1 == first,
            "ggml's Q4_0 kernel and ours gave different encoder outputs"
        );
    }
    let mut stock = Vec::with_capacity(reps);
    let mut total = Vec::with_capacity(reps);
    let mut theirs = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let (_, out) = model.encode_audio(&samples)?;
        total.push(t.elapsed().as_secs_f64());
        // An engine invariant, checked here so a benchmark never times a changed computation.
        ensure!(
            out == first,
            "the encoder's output changed between repetitions"
        );
        if let Some(m) = ggml_kernel {
            let t = Instant::now();
            m.encode_audio(&samples)?;
            stock.push(t.elapsed().as_secs_f64());
        }
        if let Some(Ok(c)) = &mut child {
            match c.run() {
                Ok(r) => theirs.push(r),
                Err(e) => child = Some(Err(e)),
            }
        }
    }
    let liquid = child.map(|c| {
        let c = c.map_err(|e| format!("{e:#}"))?;
        let med = |f: fn(&(f64, f64, f64)) -> f64| {
            super::median(&theirs.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let r = &c.ready;
        Ok(LiquidFigures {
            version: r["liquid_audio_version"].as_str().unwrap_or("?").into(),
            torch: r["torch_version"].as_str().unwrap_or("?").into(),
            threads: r["threads"].as_u64().unwrap_or(0),
            frames: r["frames"].as_u64().unwrap_or(0),
            total_s: med(|r| r.0),
            features_s: med(|r| r.1),
            encoder_s: med(|r| r.2),
            runs_s: theirs.iter().map(|r| r.0).collect(),
        })
    });
    Ok(EncoderFigures {
        audio_s: samples.len() as f64 / 16_000.0,
        frames,
        total_s: super::median(&total).unwrap_or(f64::NAN),
        reps,
        runs_s: total,
        digest: {
            let mut h = 0xcbf2_9ce4_8422_2325;
            for v in &first {
                super::fnv(&mut h, &v.to_bits().to_le_bytes());
            }
            h
        },
        liquid,
        ggml_kernel_runs_s: stock,
    })
}

/// Prints the figures as a small table; `reference_s` is liquid-audio's figure the issue
/// quotes for 10 s on this machine kind, shown beside the one measured in this run (or alone,
/// said so, when none was).
pub fn print(f: &EncoderFigures, reference_s: f64) {
    println!(
        "encoder: {:.1} s of audio -> {} frames (medians of {} runs; times in ms); output digest \
         {:016x}",
        f.audio_s, f.frames, f.reps, f.digest
    );
    if let Some(g) = super::median(&f.ggml_kernel_runs_s) {
        let paired: Vec<f64> = f
            .ggml_kernel_runs_s
            .iter()
            .zip(&f.runs_s)
            .map(|(g, o)| g / o)
            .collect();
        println!(
            "ours with ggml's Q4_0 kernel (same bytes), one run after each of ours: {:.1} ms; \
             ggml's kernel / ours, median of pairs {:.2}x",
            g * 1e3,
            super::median(&paired).unwrap_or(f64::NAN)
        );
    }
    match &f.liquid {
        Some(Ok(l)) => {
            println!(
                "liquid-audio {} (torch {}, fp32, {} threads, random weights at the published \
                 size) in the same run, one of its {} runs after each of ours: {} frames{}",
                l.version,
                l.torch,
                l.threads,
                l.runs_s.len(),
                l.frames,
                if l.frames == f.frames as u64 {
                    " (equal)"
                } else {
                    " (DIFFERENT from ours)"
                }
            );
            println!(
                "| ours: features + encoder + adapter | liquid-audio: features + encoder + \
                 adapter | liquid-audio: features | liquid-audio: encoder + adapter | \
                 liquid-audio / ours (>= 1.5) | issue's figure (10 s) |"
            );
            println!("|---:|---:|---:|---:|---:|---:|");
            println!(
                "| {:.1} | {:.1} | {:.1} | {:.1} | {:.2}x | {:.0} (issue's figure) |",
                f.total_s * 1e3,
                l.total_s * 1e3,
                l.features_s * 1e3,
                l.encoder_s * 1e3,
                l.total_s / f.total_s,
                reference_s * 1e3
            );
            let ms = |v: &[f64]| {
                v.iter()
                    .map(|s| format!("{:.0}", s * 1e3))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            // Each liquid-audio run right after one of ours: their ratio is the one least hit
            // by the load drifting between runs.
            let paired: Vec<f64> = l.runs_s.iter().zip(&f.runs_s).map(|(l, o)| l / o).collect();
            println!(
                "every run (ms), in turn: ours {}; liquid-audio {}; ratio of each pair {} \
                 (median {})",
                ms(&f.runs_s),
                ms(&l.runs_s),
                paired
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                super::median(&paired).map_or("-".into(), |r| format!("{r:.2}x"))
            );
            return;
        }
        Some(Err(e)) => println!("liquid-audio not measured: {e}"),
        None => println!(
            "liquid-audio not measured: make the venv of scripts/liquid_encoder_bench.py's \
             header (~/.cache/lfm2-engine/liquid-venv) or pass --liquid-python PATH"
        ),
    }
    println!(
        "| features + encoder + adapter | issue's liquid-audio 1.3.0 figure (10 s) | liquid-audio / \
         ours (>= 1.5) |"
    );
    println!("|---:|---:|---:|");
    println!(
        "| {:.1} | {:.0} (quoted, not this run) | {:.2}x |",
        f.total_s * 1e3,
        reference_s * 1e3,
        reference_s / f.total_s
    );
}
