//! The tiny checkpoint converted to GGUF packages and loaded as engines, once per test process.

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::package::{ModelPackage, PackagePaths};
use audio_engine::lfm2_audio::{Lfm2Audio, ModelOptions, Session, SessionOptions};
use audio_tooling::convert::{convert, Progress};

use super::lfm2_tiny::checkpoint_dir;

struct Quiet;
impl Progress for Quiet {
    fn tensor(&mut self, _: &Path, _: &str, _: usize, _: usize) {}
}

/// The checkpoint converted at `ty` (once per test process, in its scratch directory).
pub fn package(ty: Quant) -> PackagePaths {
    static DIRS: OnceLock<Mutex<Vec<(Quant, PackagePaths)>>> = OnceLock::new();
    let mut d = DIRS.get_or_init(Default::default).lock().unwrap();
    if let Some((_, p)) = d.iter().find(|(t, _)| *t == ty) {
        return p.clone();
    }
    let out = super::scratch::dir(&format!("lfm2-pkg-{ty:?}"));
    let p = convert(checkpoint_dir(), &out, "Tiny", ty, &mut Quiet).unwrap();
    d.push((ty, p.clone()));
    p
}

/// The package at `ty` loaded with one compute thread and `opts` otherwise.
///
/// why: libtest runs a binary's tests on both cores at once; ggml's worker threads spin at
/// their barriers, so two tests with two threads each on two cores slow each other down by
/// orders of magnitude.
pub fn engine_with(ty: Quant, opts: ModelOptions) -> Lfm2Audio {
    let opts = ModelOptions {
        n_threads: 1,
        ..opts
    };
    Lfm2Audio::from_package(ModelPackage::open_paths(package(ty)).unwrap(), opts).unwrap()
}

/// The package at `ty` loaded with default options (one thread).
pub fn engine(ty: Quant) -> Lfm2Audio {
    engine_with(ty, ModelOptions::default())
}

/// `max|a - b| / max|b|`.
pub fn rel(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let m = b.iter().fold(0f32, |m, v| m.max(v.abs()));
    a.iter().zip(b).fold(0f32, |e, (x, y)| e.max((x - y).abs())) / m
}

/// A session on `e` that keeps no prefill blocks and no encoder outputs: what every cached
/// session's bytes are compared with.
pub fn uncached_session(e: &Lfm2Audio) -> Session {
    Session::new(
        e.clone(),
        SessionOptions {
            prefill_slots: 0,
            kept_questions: 0,
            ..Default::default()
        },
    )
}
