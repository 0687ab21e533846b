//! Speech recognition with LFM2-Audio: WAV of any rate and channel count in, text out.
//!
//! ```text
//! cargo run --release --example asr -- [--model DIR] [--max-tokens N] [--max-seconds S] input.wav
//! ```
//! Without `--model` it runs on the built-in demo package (random tiny weights, so the "text"
//! is noise) to show the whole path working.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use audio_engine::lfm2_audio::demo::{default_demo_dir, ensure_demo_package};
use audio_engine::lfm2_audio::package::ModelPackage;
use audio_engine::lfm2_audio::{AsrOptions, Lfm2Audio, ModelOptions};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut model: Option<PathBuf> = None;
    let mut opts = AsrOptions::default();
    let mut mopts = ModelOptions::default();
    let mut input: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" => model = Some(args.next().context("--model needs a directory")?.into()),
            "--max-tokens" => {
                opts.max_new_tokens = args.next().context("--max-tokens needs N")?.parse()?
            }
            "--max-seconds" => {
                mopts.max_audio_seconds = args.next().context("--max-seconds needs S")?.parse()?
            }
            "-h" | "--help" => {
                println!("usage: asr [--model DIR] [--max-tokens N] [--max-seconds S] input.wav");
                return Ok(());
            }
            _ if input.is_none() => input = Some(a.into()),
            other => bail!("unexpected argument {other:?}"),
        }
    }
    let input = input.context("usage: asr [--model DIR] input.wav")?;
    let engine = match model {
        Some(dir) => {
            Lfm2Audio::load(&dir, mopts).with_context(|| format!("loading {}", dir.display()))?
        }
        None => {
            let dir = default_demo_dir();
            println!(
                "no --model given: using the built-in demo package in {} (random tiny weights; \
                 the transcript is noise)",
                dir.display()
            );
            let paths = ensure_demo_package(&dir)?;
            Lfm2Audio::from_package(ModelPackage::open_paths(paths)?, mopts)?
        }
    };
    let wav = std::fs::read(&input).with_context(|| format!("reading {}", input.display()))?;
    let r = engine.asr_wav(&wav, &opts)?;
    println!("{}", r.text);
    eprintln!(
        "[{}] {} prompt positions, {} tokens ({:?}); encode {:.1} ms, prefill {:.1} ms, decode {:.1} ms",
        engine.label(),
        r.prompt_positions,
        r.tokens.len(),
        r.stop,
        r.timings.encode.as_secs_f64() * 1e3,
        r.timings.prefill.as_secs_f64() * 1e3,
        r.timings.decode.as_secs_f64() * 1e3,
    );
    Ok(())
}
