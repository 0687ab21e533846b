//! The built-in demo package: the deterministic tiny checkpoint of [`super::synthetic`],
//! converted to the four GGUF files, so examples run end to end on a fresh machine without
//! downloading a model. Its weights are random: its "speech" and text are noise, by design.

use std::path::{Path, PathBuf};

use super::convert::{convert, Progress, Quant};
use super::synthetic::{write_tiny_checkpoint, DEFAULT_SEED};
use audio_engine::lfm2_audio::EngineError;
use audio_engine::lfm2_audio::{Lfm2Audio, ModelOptions};
use audio_engine::lfm2_audio::{ModelPackage, PackagePaths};

/// Model name of the demo package's files.
pub const DEMO_MODEL: &str = "LFM2-Audio-Demo-Tiny";

struct Quiet;
impl Progress for Quiet {
    fn tensor(&mut self, _: &Path, _: &str, _: usize, _: usize) {}
}

/// Where the demo package lives by default: `$TMPDIR/lfm2-audio-demo-<seed>`.
pub fn default_demo_dir() -> PathBuf {
    std::env::temp_dir().join(format!("lfm2-audio-demo-{DEFAULT_SEED}"))
}

/// Makes sure the demo package exists in `dir` (writing the checkpoint and converting it to F32
/// the first time) and returns its file paths.
pub fn ensure_demo_package(dir: &Path) -> Result<PackagePaths, EngineError> {
    let paths = PackagePaths::new(dir, DEMO_MODEL, Quant::F32);
    let complete = [
        &paths.backbone,
        &paths.mmproj,
        &paths.vocoder,
        &paths.tokenizer,
    ]
    .iter()
    .all(|p| p.is_file());
    if complete {
        return Ok(paths);
    }
    // why: build in a private directory and rename it into place, so concurrent callers (test
    // processes) never see a half-written package.
    let parent = dir.parent().unwrap_or(Path::new("."));
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "demo".into());
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    let io = |what: &str, p: &Path, e: std::io::Error| EngineError::Demo {
        what: format!("{what} {}", p.display()),
        source: Box::new(e),
    };
    let _ = std::fs::remove_dir_all(&tmp);
    let ckpt = tmp.join("checkpoint");
    std::fs::create_dir_all(&ckpt).map_err(|e| io("creating", &ckpt, e))?;
    write_tiny_checkpoint(&ckpt, DEFAULT_SEED).map_err(|e| EngineError::Demo {
        what: "writing the checkpoint".into(),
        source: Box::new(e),
    })?;
    convert(&ckpt, &tmp, DEMO_MODEL, Quant::F32, &mut Quiet).map_err(|e| EngineError::Demo {
        what: "converting the checkpoint".into(),
        source: Box::new(e),
    })?;
    // The checkpoint is only an intermediate.
    let _ = std::fs::remove_dir_all(&ckpt);
    if dir.exists() {
        // Someone else finished first (or left an incomplete directory behind): replace an
        // incomplete one, keep a complete one.
        let theirs = PackagePaths::new(dir, DEMO_MODEL, Quant::F32);
        if theirs.backbone.is_file()
            && theirs.tokenizer.is_file()
            && theirs.vocoder.is_file()
            && theirs.mmproj.is_file()
        {
            let _ = std::fs::remove_dir_all(&tmp);
            return Ok(theirs);
        }
        std::fs::remove_dir_all(dir).map_err(|e| io("removing", dir, e))?;
    }
    match std::fs::rename(&tmp, dir) {
        Ok(()) => Ok(paths),
        Err(_) if dir.exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(paths)
        }
        Err(e) => Err(io("moving the demo package to", dir, e)),
    }
}

/// Loads the demo package from `dir` ([`default_demo_dir`] for the shared one), writing it first
/// if needed ([`ensure_demo_package`]).
pub fn load_demo(dir: &Path, options: ModelOptions) -> Result<Lfm2Audio, EngineError> {
    let package = ModelPackage::open_paths(ensure_demo_package(dir)?)?;
    Lfm2Audio::from_package(package, options)
}
