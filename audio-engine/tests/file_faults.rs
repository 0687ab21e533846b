//! Model files that change under a loaded model, and a disk that fills while `convert` writes.
//!
//! The policy (`ggml::mapped_file`): weights are used in place from read-only mappings, so
//! * a file removed (or renamed over) after load changes nothing: the mapping keeps its inode;
//! * a file truncated after load fails the next compute that uses its weights with
//!   `GgmlError::FileChanged` naming the file (checked before every compute), never `SIGBUS`
//!   (a truncation racing a running compute still is one: no check can close that window);
//! * a conversion that runs out of space fails naming the file it was writing, and leaves no
//!   partial file (the writer writes a temporary file beside it and renames it when complete;
//!   files finished before it stay, whole).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use audio_engine::ggml::gguf::GgufErrorKind;
use audio_engine::ggml::GgmlError;
use audio_engine::lfm2_audio::internals::package::{ModelPackage, PackagePaths, Quant};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrOptions, EngineError, Lfm2Audio, ModelOptions, S2sOptions};
use audio_tooling::convert::{convert, ConvertError, NoProgress};

use common::child::{self, report};
use common::lfm2_tiny::{checkpoint_dir, input_signal};
use common::package::package;

const FILES: [&str; 4] = ["backbone", "mmproj", "vocoder", "tokenizer"];

fn file_of<'p>(p: &'p PackagePaths, which: &str) -> &'p Path {
    match which {
        "backbone" => &p.backbone,
        "mmproj" => &p.mmproj,
        "vocoder" => &p.vocoder,
        "tokenizer" => &p.tokenizer,
        other => panic!("no file {other}"),
    }
}

/// The F32 package: made here, or in a child the one its parent made (passed in the
/// environment, so a child does not convert it again).
fn source_package() -> PackagePaths {
    match (
        std::env::var("LFM2_PKG_DIR"),
        std::env::var("LFM2_PKG_MODEL"),
    ) {
        (Ok(dir), Ok(model)) => PackagePaths::new(Path::new(&dir), &model, Quant::F32),
        _ => package(Quant::F32),
    }
}

/// The environment that hands a child [`source_package`].
fn package_env() -> Vec<(&'static str, String)> {
    let p = package(Quant::F32);
    vec![
        (
            "LFM2_PKG_DIR",
            p.backbone.parent().unwrap().display().to_string(),
        ),
        ("LFM2_PKG_MODEL", p.model.clone()),
    ]
}

/// A private copy of the F32 package in `dir`.
fn copy_package(dir: &Path) -> PackagePaths {
    let p = source_package();
    let q = PackagePaths::new(dir, &p.model, p.quant);
    for w in FILES {
        std::fs::copy(file_of(&p, w), file_of(&q, w)).unwrap();
    }
    q
}

fn load(p: &PackagePaths) -> Lfm2Audio {
    let opts = ModelOptions {
        n_threads: 1,
        ..ModelOptions::default()
    };
    Lfm2Audio::from_package(ModelPackage::open_paths(p.clone()).unwrap(), opts).unwrap()
}

fn asr_opts() -> AsrOptions {
    AsrOptions {
        max_new_tokens: 3,
        ..AsrOptions::default()
    }
}

/// S2S long enough to run the depthformer and the detokenizer (6 text steps, then frames).
fn s2s_opts() -> S2sOptions {
    S2sOptions {
        max_new_tokens: 9,
        ..S2sOptions::default()
    }
}

/// The file a `GgmlError::FileChanged` names, when that is what `e` is.
fn file_changed(e: &EngineError) -> Option<String> {
    assert_eq!(
        e.is_file_changed(),
        matches!(e.ggml_error(), Some(GgmlError::FileChanged { .. }))
    );
    match e.ggml_error() {
        Some(GgmlError::FileChanged { file, .. }) => Some(file.clone()),
        _ => None,
    }
}

#[test]
fn files_removed_after_load_keep_working() {
    let dir = common::scratch::dir("removed-after-load");
    let p = copy_package(&dir);
    let m = load(&p);
    let samples = &input_signal()[..8_000];
    let before = m.asr(samples, &asr_opts()).unwrap();
    let s2s_before = m.s2s(samples, &s2s_opts()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let after = m.asr(samples, &asr_opts()).unwrap();
    assert_eq!(before.tokens, after.tokens);
    let s2s_after = m.s2s(samples, &s2s_opts()).unwrap();
    assert_eq!(s2s_before.steps, s2s_after.steps);
    assert_eq!(s2s_before.audio, s2s_after.audio);
}

/// The child: loads a copy of the package, truncates file `which` to half, runs; reports the
/// outcome of each task (`ok` or the file a FileChanged error named, else the error).
fn truncated_child(which: &str) {
    let dir = common::scratch::dir(&format!("truncated-{which}"));
    let p = copy_package(&dir);
    let m = load(&p);
    let samples = &input_signal()[..8_000];
    m.asr(samples, &asr_opts()).unwrap();
    m.s2s(samples, &s2s_opts()).unwrap();
    let path = file_of(&p, which);
    let len = std::fs::metadata(path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let outcome = |r: Result<(), EngineError>| match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => match file_changed(&e) {
            Some(f) => format!("file-changed {f}"),
            None => format!("error {}", e.chain()),
        },
    };
    report(&format!(
        "asr {}",
        outcome(m.asr(samples, &asr_opts()).map(|_| ()))
    ));
    report(&format!(
        "s2s {}",
        outcome(m.s2s(samples, &s2s_opts()).map(|_| ()))
    ));
}

#[test]
fn truncated_file_child() {
    if let Some(which) = child::child_role() {
        truncated_child(&which);
    }
}

#[test]
fn a_file_truncated_after_load_fails_the_next_run_with_a_typed_error() {
    // The package is made here; the children only copy it.
    let env = package_env();
    for which in FILES {
        let out = child::run(
            "truncated_file_child",
            which,
            &env,
            std::time::Duration::from_secs(120),
        );
        assert!(
            out.success(),
            "{which} truncated after load: the child {} (SIGBUS is 7)\n{}",
            out.how(),
            out.stderr
        );
        let get = |task: &str| {
            out.lines
                .iter()
                .find_map(|l| l.strip_prefix(&format!("{task} ")))
                .unwrap_or_else(|| panic!("{which}: no {task} outcome in {:?}", out.lines))
                .to_owned()
        };
        let (asr, s2s) = (get("asr"), get("s2s"));
        println!("{which} truncated to half after load: asr {asr}; s2s {s2s}");
        // Every file's weights are used by S2S, and all of them in place (F32 on the CPU:
        // nothing is repacked), so S2S must fail naming the file; ASR uses the backbone and
        // the encoder only, and must run on when another file was cut.
        let name = file_of(&package(Quant::F32), which)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            s2s.starts_with("file-changed") && s2s.ends_with(&name),
            "{which}: s2s {s2s}"
        );
        if which == "backbone" || which == "mmproj" {
            assert!(
                asr.starts_with("file-changed") && asr.ends_with(&name),
                "{which}: asr {asr}"
            );
        } else {
            assert_eq!(asr, "ok", "{which}");
        }
    }
}

/// A tmpfs of `bytes` mounted on `dir` for the guard's life (root only).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, bytes: u64) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={bytes}"))
            .arg("tmpfs")
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Every entry of `dir` with its size.
fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn convert_onto_a_full_disk_names_the_file_and_leaves_no_partial_one() {
    let good = package(Quant::F32);
    // The converter writes backbone, mmproj, vocoder, tokenizer, in that order.
    let sizes: Vec<u64> = FILES
        .iter()
        .map(|w| std::fs::metadata(file_of(&good, w)).unwrap().len())
        .collect();
    let page = 4096;
    let mut ran = 0;
    for (k, which) in FILES.iter().enumerate() {
        let dir = common::scratch::dir(&format!("full-disk-{which}"));
        // Room for the files before this one and half of it (in whole pages, as tmpfs counts).
        let before: u64 = sizes[..k].iter().map(|s| s.div_ceil(page) * page).sum();
        let room = before + (sizes[k] / 2).div_ceil(page) * page;
        let Some(_fs) = Tmpfs::mount(&dir, room) else {
            ci_skip::skip(
                "convert_onto_a_full_disk_names_the_file_and_leaves_no_partial_one",
                &format!(
                    "cannot mount a tmpfs on {} (needs root; CI runs as root)",
                    dir.display()
                ),
            );
            return;
        };
        let out = dir.join("pkg");
        let e = match convert(
            checkpoint_dir(),
            &out,
            &good.model,
            Quant::F32,
            &mut NoProgress,
        ) {
            Ok(_) => panic!("{which}: the conversion fit in {room} bytes"),
            Err(e) => e,
        };
        let msg = e.to_string();
        let paths = PackagePaths::new(&out, &good.model, Quant::F32);
        let failed = file_of(&paths, which);
        println!("{which}: {msg}");
        assert!(
            msg.contains(&failed.display().to_string()),
            "{which}: the error does not name {}: {msg}",
            failed.display()
        );
        // why: the OS error, as `ErrorKind::StorageFull` is newer than the crate's MSRV.
        let os_error = match &e {
            ConvertError::Gguf(g) => match g.kind() {
                GgufErrorKind::Io(io) | GgufErrorKind::TensorIo { cause: io, .. } => {
                    io.raw_os_error()
                }
                _ => None,
            },
            _ => None,
        };
        assert_eq!(os_error, Some(libc::ENOSPC), "{which}: {e:?}");
        // The files written before are whole; nothing else is left (no partial, no temporary).
        let want: Vec<(String, u64)> = {
            let mut v: Vec<(String, u64)> = FILES[..k]
                .iter()
                .zip(&sizes)
                .map(|(w, s)| {
                    let n = file_of(&paths, w).file_name().unwrap();
                    (n.to_string_lossy().into_owned(), *s)
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            listing(&out),
            want,
            "{which}: what the failed conversion left"
        );
        ran += 1;
    }
    assert_eq!(ran, 4);
}
