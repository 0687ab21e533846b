//! The full-size synthetic package (the published LFM2.5-Audio dimensions, random weights) that
//! the benchmarks run on, written once per quantization and cached.
//!
//! why here: `sessions_bench` and `bench` measure the same model; one generator and one cache
//! directory mean the minutes (and ~7 GB of memory) it takes to write it are paid once.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use audio_engine::lfm2_audio::{PackagePaths, Quant};
use audio_tooling::synthetic::{write_checkpoint, TinyConfig, DEFAULT_SEED};
use audio_tooling::{convert_checkpoint, Progress};

/// The model name of the package's files.
pub const FULL_MODEL: &str = "LFM2-Audio-Synthetic-Full";

/// The published LFM2-Audio (LFM2.5-Audio-1.5B) dimensions (see LFM2-AUDIO-FACTS.md and
/// lfm2-audio-hf-state-dict.txt).
pub fn full_config() -> TinyConfig {
    TinyConfig {
        n_mels: 128,
        enc_d_model: 512,
        enc_layers: 17,
        enc_heads: 8,
        enc_ff_expansion: 4,
        enc_conv_kernel: 9,
        enc_subsampling_channels: 256,
        vocab_size: 65_536,
        hidden: 2048,
        n_layers: 16,
        attn_layers: vec![2, 5, 8, 10, 12, 14],
        n_heads: 32,
        n_kv_heads: 8,
        // LFM2's block_auto_adjust_ff_dim turns 12288 into the FFN width 8192.
        intermediate_size: 12_288,
        conv_l_cache: 3,
        rope_theta: 1_000_000.0,
        norm_eps: 1e-5,
        codebooks: 8,
        audio_vocab: 2049,
        depth_layers: 6,
        depth_dim: 1024,
        interleaved_n_text: 6,
        interleaved_n_audio: 12,
        detok_hidden: 512,
        detok_layers: 4,
        detok_attn_layers: vec![2],
        detok_heads: 8,
        detok_kv_heads: 8,
        detok_ff: 2048,
        detok_vocab: 65_536,
        detok_sliding_window: 30,
        detok_rope_theta: 1_000_000.0,
        n_fft: 1280,
    }
}

struct Quiet;
impl Progress for Quiet {
    fn tensor(&mut self, _: &Path, _: &str, _: usize, _: usize) {}
}

/// The user's cache directory: `$XDG_CACHE_HOME`, else `~/.cache` (`None` without either).
pub fn cache_base() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
}

/// Where the package of `quant` is cached by default: [`cache_base`] (else the temporary
/// directory) + `lfm2-engine/full-synthetic-<seed>-<quant>`.
pub fn default_full_dir(quant: Quant) -> PathBuf {
    let base = cache_base().unwrap_or_else(std::env::temp_dir);
    base.join("lfm2-engine")
        .join(format!("full-synthetic-{DEFAULT_SEED}-{quant:?}"))
}

/// The package's four files in `dir`, if all are there.
pub fn complete(dir: &Path, quant: Quant) -> Option<PackagePaths> {
    let paths = PackagePaths::new(dir, FULL_MODEL, quant);
    [
        &paths.backbone,
        &paths.mmproj,
        &paths.vocoder,
        &paths.tokenizer,
    ]
    .iter()
    .all(|p| p.is_file())
    .then_some(paths)
}

/// The full-size package in `dir`, written (checkpoint with seed [`DEFAULT_SEED`], then
/// conversion to `quant`) if absent. Deterministic: the same bytes on every machine.
///
/// why a staging directory: writing takes minutes; an interrupted run, or two processes at
/// once, must never leave a directory that looks complete but is not. The package is written
/// next to `dir` and renamed into place when whole.
pub fn ensure_full_package(dir: &Path, quant: Quant) -> Result<PackagePaths> {
    if let Some(p) = complete(dir, quant) {
        return Ok(p);
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let name = dir.file_name().context("cache dir has no name")?;
    let staging = parent.join(format!(
        ".{}.partial-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    let t0 = Instant::now();
    let ckpt = staging.join("checkpoint");
    std::fs::create_dir_all(&ckpt)?;
    eprintln!(
        "writing the full-size checkpoint to {} (once; minutes, ~7 GB of memory) ...",
        ckpt.display()
    );
    write_checkpoint(&ckpt, &full_config(), DEFAULT_SEED).context("full-size checkpoint")?;
    eprintln!(
        "  {:.0} s; converting to {quant:?} ...",
        t0.elapsed().as_secs_f64()
    );
    convert_checkpoint(&ckpt, &staging, FULL_MODEL, quant, &mut Quiet).context("conversion")?;
    std::fs::remove_dir_all(&ckpt)?;
    if dir.exists() {
        // A leftover of an older layout, or a package another process just finished.
        if let Some(p) = complete(dir, quant) {
            let _ = std::fs::remove_dir_all(&staging);
            return Ok(p);
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::rename(&staging, dir).with_context(|| format!("moving into {}", dir.display()))?;
    eprintln!(
        "  package ready in {} after {:.0} s",
        dir.display(),
        t0.elapsed().as_secs_f64()
    );
    complete(dir, quant).context("the written package is incomplete")
}
