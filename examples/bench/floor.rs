//! The memory-bandwidth floor of issue #12, measured: how fast this machine streams memory with
//! the bench's thread count, and how many weight bytes one text step and one audio frame must
//! read, from the package's own tensor sizes.
//!
//! why a floor: a single-sequence decode step reads every weight it multiplies once and does
//! little arithmetic per byte, so no kernel can make a step faster than reading its weights.
//! The floor says how much of a step's time is left to win.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use audio_engine::ggml::gguf::GgufFile;
use audio_engine::lfm2_audio::PackagePaths;

/// Weight bytes read by one step of each kind.
#[derive(Debug, Clone, Copy)]
pub struct StepBytes {
    /// Backbone layers (every `blk.*` tensor): read by every backbone forward.
    pub backbone_layers: u64,
    /// The text head (the tied `token_embd.weight`, or `output.weight`): text steps only.
    pub text_head: u64,
    /// Depthformer per frame: `depth_linear` once, its layers once per codebook step, each
    /// codebook's `to_logits` once.
    pub depthformer: u64,
    /// Codebook steps per frame.
    pub codebooks: u64,
}

impl StepBytes {
    /// One text step: the backbone forward and the text head.
    pub fn text(&self) -> u64 {
        self.backbone_layers + self.text_head
    }

    /// One audio frame: the backbone forward (no text head) and the depthformer.
    pub fn frame(&self) -> u64 {
        self.backbone_layers + self.depthformer
    }
}

fn sum_where(file: &GgufFile, keep: impl Fn(&str) -> bool) -> u64 {
    file.tensors()
        .iter()
        .filter(|t| keep(t.name()))
        .map(|t| t.n_bytes() as u64)
        .sum()
}

fn open(path: &Path) -> Result<GgufFile> {
    GgufFile::open(path).with_context(|| format!("reading {}", path.display()))
}

/// Reads the tensor sizes of the package's backbone and vocoder files.
pub fn step_bytes(paths: &PackagePaths) -> Result<StepBytes> {
    let backbone = open(&paths.backbone)?;
    let vocoder = open(&paths.vocoder)?;
    let has_output = backbone
        .tensors()
        .iter()
        .any(|t| t.name() == "output.weight");
    let head = if has_output {
        "output.weight"
    } else {
        "token_embd.weight"
    };
    let codebooks = vocoder
        .tensors()
        .iter()
        .filter(|t| t.name().starts_with("depth_embeddings.") && t.name().contains(".to_logits."))
        .count() as u64;
    let layers = sum_where(&vocoder, |n| n.starts_with("depthformer."));
    let once = sum_where(&vocoder, |n| {
        n.starts_with("depth_linear.")
            || (n.starts_with("depth_embeddings.") && n.contains(".to_logits."))
    });
    Ok(StepBytes {
        backbone_layers: sum_where(&backbone, |n| n.starts_with("blk.")),
        text_head: sum_where(&backbone, |n| n == head),
        depthformer: once + codebooks * layers,
        codebooks,
    })
}

/// Streaming read bandwidth in bytes/s with `threads` threads: the best of `reps` passes over a
/// 1 GiB buffer (far past any cache), each thread summing its own contiguous share.
pub fn read_bandwidth(threads: usize, reps: usize) -> f64 {
    const LEN: usize = 1 << 27; // u64 words: 1 GiB
    let buf: Vec<u64> = (0..LEN as u64).collect(); // written once, so every page is resident
    let threads = threads.max(1);
    let share = LEN.div_ceil(threads);
    let mut best = 0f64;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let total: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = buf
                .chunks(share)
                .map(|c| s.spawn(move || c.iter().fold(0u64, |a, &v| a.wrapping_add(v))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0u64, u64::wrapping_add)
        });
        std::hint::black_box(total);
        best = best.max((LEN * 8) as f64 / t.elapsed().as_secs_f64());
    }
    best
}

/// The floor of one run's step mix.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// Bytes/s measured.
    pub bandwidth: f64,
    /// Bytes per step.
    pub bytes: StepBytes,
}

impl Floor {
    /// Seconds one text step needs at least.
    pub fn text_s(&self) -> f64 {
        self.bytes.text() as f64 / self.bandwidth
    }

    /// Seconds one audio frame needs at least.
    pub fn frame_s(&self) -> f64 {
        self.bytes.frame() as f64 / self.bandwidth
    }

    /// The real-time factor floor of a reply of `text_steps` text steps and `frames` frames
    /// making `audio_s` seconds of audio.
    pub fn rtf(&self, text_steps: f64, frames: f64, audio_s: f64) -> f64 {
        (text_steps * self.text_s() + frames * self.frame_s()) / audio_s
    }
}

/// Prints the floor and, when given, the measured figures beside it.
pub fn print(f: &Floor, measured: Option<(f64, f64, f64)>, mix: (f64, f64, f64)) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "floor: streaming read {:.1} GB/s; weights per text step {:.0} MiB (backbone layers {:.0} + \
         text head {:.0}), per frame {:.0} MiB (backbone layers + depthformer {:.0}: {} codebook \
         steps)",
        f.bandwidth / 1e9,
        mib(f.bytes.text()),
        mib(f.bytes.backbone_layers),
        mib(f.bytes.text_head),
        mib(f.bytes.frame()),
        mib(f.bytes.depthformer),
        f.bytes.codebooks
    );
    let (text_steps, frames, audio_s) = mix;
    println!("| | floor | measured | measured / floor |");
    println!("|---|---:|---:|---:|");
    let row = |name: &str, floor: f64, m: Option<f64>, unit: &str, scale: f64| match m {
        Some(m) => println!(
            "| {name} | {:.1}{unit} | {:.1}{unit} | {:.2}x |",
            floor * scale,
            m * scale,
            m / floor
        ),
        None => println!("| {name} | {:.1}{unit} | - | - |", floor * scale),
    };
    row("text step", f.text_s(), measured.map(|m| m.0), " ms", 1e3);
    row(
        "audio frame",
        f.frame_s(),
        measured.map(|m| m.1),
        " ms",
        1e3,
    );
    row(
        &format!("RTF ({text_steps:.0} text steps + {frames:.0} frames per {audio_s:.2} s)"),
        f.rtf(text_steps, frames, audio_s),
        measured.map(|m| m.2),
        "",
        1.0,
    );
}
