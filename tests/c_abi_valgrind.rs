//! The whole C suite of `tests/c_abi.rs` again under valgrind's memcheck: no invalid read or
//! write, no use of uninitialised memory, no mismatched free, and no definitely lost block, in
//! every case (`.ci/run` installs valgrind; without it these tests say so and pass).
//!
//! Valgrind cannot decode AVX-512 instructions, and ggml is compiled for the build machine
//! (`-march=native`). On a machine with AVX-512 these tests therefore build the library once
//! more for `x86-64-v3` (AVX2; `GGML_SYS_CPU`, in a target directory of their own) and check
//! that build: the same code, other SIMD kernels.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use common::*;

/// Whether this build's ggml kernels use AVX-512 (see `audio_engine::ggml::cpu_features`).
fn native_build_has_avx512() -> bool {
    audio_engine::ggml::cpu_features()
        .iter()
        .any(|f| f.starts_with("avx512"))
}

/// Makes the suite test a library valgrind can run: this run's own, or an AVX2 build of it.
fn use_a_library_valgrind_decodes() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        if !native_build_has_avx512() {
            return;
        }
        let target = root().join("target/valgrind-x86-64-v3");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let started = std::time::Instant::now();
        let o = Command::new(cargo)
            .args(["build", "--locked", "-q", "-p", "lfm2-engine", "--lib"])
            .arg("--target-dir")
            .arg(&target)
            .env("GGML_SYS_CPU", "x86-64-v3")
            .current_dir(root())
            .output()
            .expect("cargo build");
        assert!(
            o.status.success(),
            "building the library for x86-64-v3 failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let lib: PathBuf = target.join("debug/liblfm2_engine.so");
        println!(
            "AVX-512 machine: checking an x86-64-v3 build of the library ({:.0} s to build)",
            started.elapsed().as_secs_f64()
        );
        CDYLIB_OVERRIDE
            .set(lib)
            .expect("the library is chosen before any is linked");
    });
}

fn valgrind() -> Option<String> {
    let v = std::env::var("VALGRIND").unwrap_or_else(|_| "valgrind".into());
    match Command::new(&v).arg("--version").output() {
        Ok(o) if o.status.success() => Some(v),
        _ => None,
    }
}

fn memcheck(case: &str) {
    let Some(v) = valgrind() else {
        ci_skip::skip(
            &format!("c_abi_valgrind {case}"),
            "valgrind is not installed (apt-get install valgrind)",
        );
        return;
    };
    use_a_library_valgrind_decodes();
    let log = scratch(&format!("valgrind-{case}")).join("memcheck.log");
    let wrapper = vec![
        v,
        "--tool=memcheck".into(),
        "--error-exitcode=99".into(),
        "--leak-check=full".into(),
        "--show-leak-kinds=definite".into(),
        "--errors-for-leak-kinds=definite".into(),
        "--track-fds=no".into(),
        format!("--log-file={}", log.display()),
    ];
    let (_, o) = run_case_with(case, &wrapper, false);
    let report = std::fs::read_to_string(&log).unwrap_or_default();
    println!("{report}");
    assert!(
        o.status.success(),
        "case {case} under valgrind: {:?}\n{report}",
        o.status
    );
    assert!(report.contains("ERROR SUMMARY: 0 errors"), "{report}");
    assert!(
        report.contains("definitely lost: 0 bytes")
            || report.contains("All heap blocks were freed"),
        "{report}"
    );
}

macro_rules! cases {
    ($($name:ident),*) => {$(
        #[test]
        fn $name() {
            memcheck(stringify!($name));
        }
    )*};
}

cases!(asr, tts, s2s, s2s_stream, tts_stream, errors, frees, threads, cancel);
