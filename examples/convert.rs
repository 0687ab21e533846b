//! Converts a Hugging Face LFM2-Audio checkpoint (the layout liquid-audio loads) into the four
//! GGUF files LiquidAI publishes, then opens them as a package to check them.
//!
//! ```text
//! cargo run --release --example convert -- CKPT_DIR OUT_DIR [MODEL_NAME] [F32|F16|Q8_0|Q4_0]
//! ```
//! `MODEL_NAME` defaults to the checkpoint directory's name, the type to F16.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use audio_engine::lfm2_audio::{ModelPackage, Quant};
use audio_tooling::{convert_checkpoint, Progress};
use clap::Parser;

/// Converts a Hugging Face LFM2-Audio checkpoint into the four published GGUF files.
#[derive(Parser)]
struct Args {
    /// The checkpoint directory (`config.json`, `model.safetensors`, `audio_detokenizer/`, ...).
    ckpt_dir: PathBuf,
    /// Where the four files are written (created if needed).
    out_dir: PathBuf,
    /// The model name in the file names (default: the checkpoint directory's name).
    model_name: Option<String>,
    /// The quantization: F32, F16, Q8_0 or Q4_0 (any case).
    #[arg(default_value_t = Quant::F16)]
    quant: Quant,
}

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
    let Args {
        ckpt_dir: ckpt,
        out_dir: out,
        model_name,
        quant: ty,
    } = Args::parse();
    let model = match model_name {
        Some(m) => m,
        None => ckpt
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .context("cannot derive a model name from the checkpoint path; pass MODEL_NAME")?,
    };
    let mut progress = Line { file: None };
    let paths = convert_checkpoint(&ckpt, &out, &model, ty, &mut progress)
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
