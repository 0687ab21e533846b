//! Writes the deterministic tiny LFM2-Audio checkpoint (Hugging Face layout) that the reference
//! script `tests/reference/make_reference.py` runs liquid-audio on.
//!
//! `cargo run -p lfm2-audio-engine --example make_tiny_checkpoint -- OUT_DIR [--seed N]`

use std::path::PathBuf;
use std::process::ExitCode;

use audio_tooling::synthetic::{write_tiny_checkpoint, DEFAULT_SEED};

fn usage() -> ExitCode {
    eprintln!("usage: make_tiny_checkpoint OUT_DIR [--seed N]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut dir: Option<PathBuf> = None;
    let mut seed = DEFAULT_SEED;
    while let Some(a) = args.next() {
        if a == "--seed" {
            match args.next().and_then(|s| s.parse().ok()) {
                Some(s) => seed = s,
                None => return usage(),
            }
        } else if dir.is_none() && !a.starts_with('-') {
            dir = Some(PathBuf::from(a));
        } else {
            return usage();
        }
    }
    let Some(dir) = dir else {
        return usage();
    };
    match write_tiny_checkpoint(&dir, seed) {
        Ok(config) => {
            println!("wrote {} (seed {seed}): {config:?}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("make_tiny_checkpoint: {e}");
            ExitCode::FAILURE
        }
    }
}
