//! Converts a Hugging Face LFM2-Audio checkpoint (the layout liquid-audio loads) into the four
//! GGUF files LiquidAI publishes, then opens them as a package to check them.
//!
//! ```text
//! cargo run --release --example convert -- CKPT_DIR OUT_DIR [MODEL_NAME] [F32|F16|Q8_0|Q4_0]
//! ```
//! `MODEL_NAME` defaults to the checkpoint directory's name, the type to F16.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use audio_engine::lfm2_audio::convert::{convert, Progress};
use audio_engine::lfm2_audio::package::ModelPackage;
use audio_engine::lfm2_audio::package::Quant;

/// Prints one progress line per file, rewritten in place.
struct Line {
    file: Option<PathBuf>,
}

impl Progress for Line {
    fn tensor(&mut self, file: &Path, tensor: &str, done: usize, total: usize) {
        if self.file.as_deref() != Some(file) {
            if self.file.is_some() {
                println!();
            }
            self.file = Some(file.to_path_buf());
        }
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        print!("\r{name}: {done}/{total} tensors ({tensor})\x1b[K");
        let _ = std::io::stdout().flush();
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 || args.len() > 4 {
        bail!("usage: convert CKPT_DIR OUT_DIR [MODEL_NAME] [F32|F16|Q8_0|Q4_0]");
    }
    let ckpt = PathBuf::from(&args[0]);
    let out = PathBuf::from(&args[1]);
    let model = match args.get(2) {
        Some(m) => m.clone(),
        None => ckpt
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .context("cannot derive a model name from the checkpoint path; pass MODEL_NAME")?,
    };
    let ty: Quant = match args.get(3) {
        Some(t) => t.parse()?,
        None => Quant::F16,
    };
    let mut progress = Line { file: None };
    let paths = convert(&ckpt, &out, &model, ty, &mut progress)
        .with_context(|| format!("converting {}", ckpt.display()))?;
    println!();
    let pkg = ModelPackage::open_quant(&out, ty).context("checking the written package")?;
    for p in [
        &paths.backbone,
        &paths.mmproj,
        &paths.vocoder,
        &paths.tokenizer,
    ] {
        let size = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        println!(
            "{} ({:.1} MiB)",
            p.display(),
            size as f64 / (1 << 20) as f64
        );
    }
    let c = &pkg.backbone.config;
    println!(
        "backbone: {} layers, width {}, vocab {}; vocoder: {} depthformer layers, {} codebooks",
        c.num_hidden_layers,
        c.hidden_size,
        c.vocab_size,
        pkg.vocoder.config.n_layer,
        pkg.vocoder.config.codebooks
    );
    Ok(())
}
