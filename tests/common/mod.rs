//! Shared pieces of the C-ABI tests: where the built library is, compiling C programs against
//! the header and linking them with it, the demo package, inputs, and the Rust API's model.
#![allow(dead_code)]

pub mod capi;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use audio_engine::lfm2_audio::internals::package::ModelPackage;
use audio_engine::lfm2_audio::{Lfm2Audio, ModelOptions};
use audio_tooling::demo::ensure_demo_package;

/// The repository root (the root package's manifest directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`: the test binary lives in its `deps/`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// Where cargo put the root package's libraries (cdylib and staticlib) for this test run:
/// `target/<profile>/deps`. Only `cargo build` copies them up into `target/<profile>`, so a copy
/// there may be missing (a clean clone running `cargo test`) or stale (an earlier build).
pub fn built_lib_dir() -> PathBuf {
    profile_dir().join("deps")
}

/// A cdylib to test instead of the one of this test run (set before the first [`link_dir`]
/// call): the valgrind tests use a build for an instruction set valgrind decodes.
pub static CDYLIB_OVERRIDE: OnceLock<PathBuf> = OnceLock::new();

/// The cdylib cargo built for this test run (or [`CDYLIB_OVERRIDE`]).
pub fn cdylib() -> PathBuf {
    if let Some(p) = CDYLIB_OVERRIDE.get() {
        return p.clone();
    }
    let p = built_lib_dir().join("liblfm2_engine.so");
    assert!(
        p.is_file(),
        "{} is missing (cargo builds it before the tests)",
        p.display()
    );
    p
}

// why: one definition of the per-process scratch root and its removal at exit, shared with the
// engine's tests.
#[path = "../../audio-engine/tests/common/scratch.rs"]
mod scratch_dirs;

/// A fresh scratch directory private to this test process (removed when the process exits).
pub fn scratch(name: &str) -> PathBuf {
    scratch_dirs::dir(&format!("capi-{name}"))
}

/// A directory holding the library under the names a caller links and loads
/// (`libaudiocpp.so` for `-laudiocpp`, `libaudiocpp.so.0` for its SONAME).
pub fn link_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch("lib");
        let lib = cdylib();
        // why: a copy, not a symlink, so a rebuild of the cdylib during the run (another
        // cargo invocation) cannot change what these tests load.
        std::fs::copy(&lib, d.join("libaudiocpp.so.0")).unwrap();
        std::os::unix::fs::symlink("libaudiocpp.so.0", d.join("libaudiocpp.so")).unwrap();
        d
    })
}

/// The C compiler (`$CC`, else `cc`).
pub fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_owned())
}

/// Compiles C `sources` into the executable `out` with the repository's `include/` and
/// `extra` flags; panics with the compiler's output on failure.
pub fn compile(sources: &[PathBuf], out: &Path, extra: &[String]) {
    let mut cmd = Command::new(cc());
    cmd.args([
        "-std=c11",
        "-D_DEFAULT_SOURCE",
        "-g",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Werror",
    ])
    .args(["-pedantic", "-pthread"])
    .arg(format!("-I{}", root().join("include").display()))
    .arg(format!("-I{}", root().join("tests/c").display()))
    .args(sources)
    .arg("-o")
    .arg(out)
    .args(extra);
    let o = cmd.output().expect("running the C compiler");
    assert!(
        o.status.success(),
        "{:?} failed:\n{}{}",
        cmd,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Link flags for the library in [`link_dir`] (with an rpath, so the program runs as is).
pub fn link_flags() -> Vec<String> {
    let d = link_dir().display().to_string();
    vec![
        format!("-L{d}"),
        "-laudiocpp".into(),
        format!("-Wl,-rpath,{d}"),
    ]
}

/// Compiles one of `tests/c/*.c` against the library, once per process.
pub fn c_program(name: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some((_, p)) = built.iter().find(|(n, _)| n == name) {
        return p.clone();
    }
    let out = scratch(&format!("bin-{name}")).join(name);
    compile(
        &[root().join("tests/c").join(format!("{name}.c"))],
        &out,
        &link_flags(),
    );
    built.push((name.to_owned(), out.clone()));
    out
}

/// The demo package, written once per process.
pub fn demo_package() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch_dirs::root().join("capi-demo");
        ensure_demo_package(&d).expect("writing the demo package");
        d
    })
}

/// The demo package loaded through the Rust API, one compute thread (as the C sessions).
pub fn rust_model() -> &'static Lfm2Audio {
    static M: OnceLock<Lfm2Audio> = OnceLock::new();
    M.get_or_init(|| {
        let package = ModelPackage::open(demo_package()).unwrap();
        let opts = ModelOptions {
            n_threads: 1,
            max_audio_seconds: 600.0,
            ..ModelOptions::default()
        };
        Lfm2Audio::from_package(package, opts).unwrap()
    })
}

/// Interleaved float PCM.
#[derive(Debug, Clone, PartialEq)]
pub struct Pcm {
    pub samples: Vec<f32>,
    pub rate: u32,
    pub channels: u32,
}

/// A deterministic test signal: values exactly representable in binary floating point (so C
/// and Rust agree on them trivially), different per channel and per `seed`.
pub fn signal(seconds: f64, rate: u32, channels: u32, seed: u32) -> Pcm {
    let frames = (seconds * f64::from(rate)) as u32;
    let mut samples = Vec::new();
    for t in 0..frames {
        for c in 0..channels {
            let k = 7 + 3 * seed + 5 * c;
            let v = ((t * k) % 400) as i32 - 200;
            samples.push(v as f32 / 512.0);
        }
    }
    Pcm {
        samples,
        rate,
        channels,
    }
}

/// The raw PCM file format of `tests/c/suite.h`: i32 rate, i32 channels, f32 samples.
pub fn write_pcm(path: &Path, p: &Pcm) {
    let mut b = Vec::new();
    b.extend_from_slice(&(p.rate as i32).to_le_bytes());
    b.extend_from_slice(&(p.channels as i32).to_le_bytes());
    for s in &p.samples {
        b.extend_from_slice(&s.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

/// Reads a raw PCM file.
pub fn read_pcm(path: &Path) -> Pcm {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let i = |o: usize| i32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    Pcm {
        rate: i(0) as u32,
        channels: i(4) as u32,
        samples: b[8..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    }
}

/// A 32-bit float WAV of interleaved PCM (what the library hands the engine for C audio).
pub fn wav(p: &Pcm) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: p.channels as u16,
        sample_rate: p.rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for &s in &p.samples {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

/// Sample bits, for byte-for-byte comparisons.
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The inputs every suite case reads.
pub fn inputs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch("in");
        write_pcm(&d.join("asr.pcm"), &signal(1.5, 22_050, 2, 9));
        for (i, p) in question_signals().iter().enumerate() {
            write_pcm(&d.join(format!("q{i}.pcm")), p);
        }
        d
    })
}

/// The three questions of the conversation: different rates and channel counts.
pub fn question_signals() -> [Pcm; 3] {
    [
        signal(1.5, 16_000, 1, 0),
        signal(1.2, 24_000, 2, 1),
        signal(1.0, 44_100, 1, 2),
    ]
}

/// A package with its vocoder cut in half, and an empty directory.
pub fn broken_dirs() -> (PathBuf, PathBuf) {
    let damaged = scratch("damaged");
    for e in std::fs::read_dir(demo_package()).unwrap() {
        let e = e.unwrap();
        let to = damaged.join(e.file_name());
        std::fs::copy(e.path(), &to).unwrap();
        if e.file_name().to_string_lossy().starts_with("vocoder-") {
            let len = std::fs::metadata(&to).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(&to).unwrap();
            f.set_len(len / 2).unwrap();
        }
    }
    (damaged, scratch("empty"))
}

/// Runs a suite case; returns the output directory, panicking with the program's output when
/// it fails.
pub fn run_case(case: &str, wrapper: &[String]) -> (PathBuf, Output) {
    run_case_with(case, wrapper, true)
}

/// Runs a suite case under `wrapper` (e.g. valgrind and its options; empty: none); with
/// `must_pass`, panics when the program fails.
pub fn run_case_with(case: &str, wrapper: &[String], must_pass: bool) -> (PathBuf, Output) {
    let exe = c_program("suite");
    let out = scratch(&format!("out-{case}-{}", wrapper.len()));
    let mut cmd = match wrapper.split_first() {
        Some((w, rest)) => {
            let mut c = Command::new(w);
            c.args(rest).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.arg(case).arg(demo_package()).arg(inputs()).arg(&out);
    if case == "errors" {
        let (damaged, empty) = broken_dirs();
        cmd.arg(damaged).arg(empty);
    }
    if !wrapper.is_empty() {
        // why: under a checker the generating cases make shorter replies (same code paths).
        cmd.env("LFM2E_SUITE_QUICK", "1");
    }
    let started = std::time::Instant::now();
    let o = cmd.output().expect("running the suite");
    println!("case {case}: {:.1} s", started.elapsed().as_secs_f64());
    println!("{}", String::from_utf8_lossy(&o.stdout));
    eprintln!("{}", String::from_utf8_lossy(&o.stderr));
    if must_pass {
        assert!(
            o.status.success(),
            "suite case {case} failed: {:?}",
            o.status
        );
    }
    (out, o)
}
