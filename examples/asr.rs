//! Speech recognition with LFM2-Audio: WAV of any rate and channel count in, text out.
//!
//! ```text
//! cargo run --release --example asr -- [--model DIR | --hf REPO[:QUANT] [--offline]]
//!                                      [--max-tokens N] [--max-seconds S] input.wav
//! ```
//! Without `--model` it runs on the built-in demo package (random tiny weights, so the "text"
//! is noise) to show the whole path working.

use std::path::PathBuf;

use anyhow::{Context, Result};
use audio_engine::lfm2_audio::{AsrJob, AsrOptions, Job, ModelOptions};
use clap::Parser;

mod common;
use common::hub::open_model_or_hub;
use common::{model_options, printable};

/// Speech recognition: prints the transcript of a WAV file.
#[derive(Parser)]
struct Args {
    /// Model directory with the four GGUF files (default: the built-in demo package).
    #[arg(long, value_name = "DIR", conflicts_with = "hf")]
    model: Option<PathBuf>,
    #[command(flatten)]
    hub: common::hub::HubArgs,
    /// CPU threads [default: all cores].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Device: cpu, vulkan:N, cuda:N or metal (the build needs its feature) [default: the
    /// best this build has: CUDA or Metal when built in, otherwise the CPU].
    #[arg(long, value_name = "DEVICE")]
    device: Option<audio_engine::ggml::Device>,
    /// Most text tokens to generate.
    #[arg(long, value_name = "N", default_value_t = AsrOptions::default().max_new_tokens)]
    max_tokens: usize,
    /// Longest input accepted, in seconds.
    #[arg(long, value_name = "S", default_value_t = ModelOptions::default().max_audio_seconds)]
    max_seconds: f64,
    /// The recording (any rate and channel count).
    #[arg(value_name = "INPUT.wav")]
    input: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let opts = AsrOptions {
        max_new_tokens: args.max_tokens,
        ..Default::default()
    };
    let mopts = ModelOptions {
        max_audio_seconds: args.max_seconds,
        ..model_options(args.threads, args.device)
    };
    let engine = open_model_or_hub(
        args.model.as_deref(),
        &args.hub,
        mopts,
        "the transcript is noise",
    )?;
    let wav =
        std::fs::read(&args.input).with_context(|| format!("reading {}", args.input.display()))?;
    let job = Job::Asr(AsrJob {
        audio: wav.into(),
        options: opts,
        chunk_seconds: None,
    });
    let r = engine.run(&job, &mut |_| true)?;
    println!("{}", printable(&r.text));
    eprintln!(
        "[{}] {} prompt positions, {} tokens ({}); encode {:.1} ms, prefill {:.1} ms, decode {:.1} ms",
        engine.label(),
        r.prompt_positions,
        r.tokens.len(),
        if r.ended { "ended" } else { "cut" },
        r.timings.encode.as_secs_f64() * 1e3,
        r.timings.prefill.as_secs_f64() * 1e3,
        r.timings.generate.as_secs_f64() * 1e3,
    );
    Ok(())
}
