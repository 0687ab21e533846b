//! The CPU levels (build/levels.rs, build/dispatch.c): the list, forcing one, and each level
//! this CPU runs answering with its own code.
//!
//! Every level is checked in a child process of this test binary (a level is chosen once per
//! process), named by `GGML_SYS_TEST_LEVEL`.

use ggml_sys as sys;
use ggml_sys::cpu_level::{self, ForceError};
use std::process::Command;

const CHILD_ENV: &str = "GGML_SYS_TEST_LEVEL";

/// The features ggml's CPU code reports (compile-time constants of the level in use).
fn features() -> Vec<&'static str> {
    // SAFETY: each query returns a constant and takes no arguments.
    let has = |f: unsafe extern "C" fn() -> i32| unsafe { f() } != 0;
    let mut v = Vec::new();
    for (name, f) in [
        (
            "avx2",
            sys::ggml_cpu_has_avx2 as unsafe extern "C" fn() -> i32,
        ),
        ("avx512", sys::ggml_cpu_has_avx512),
        ("avx512_vnni", sys::ggml_cpu_has_avx512_vnni),
        ("avx512_bf16", sys::ggml_cpu_has_avx512_bf16),
        ("amx_int8", sys::ggml_cpu_has_amx_int8),
    ] {
        if has(f) {
            v.push(name);
        }
    }
    v
}

/// What each x86-64 level's code must report of [`features`].
fn expected(level: &str) -> Option<&'static [&'static str]> {
    Some(match level {
        "x64" => &[],
        "haswell" => &["avx2"],
        "icelake" => &["avx2", "avx512", "avx512_vnni"],
        "zen4" => &["avx2", "avx512", "avx512_vnni", "avx512_bf16"],
        "sapphirerapids" => &["avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx_int8"],
        _ => return None,
    })
}

#[test]
fn forcing_the_lowest_level_sticks() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let levels = cpu_level::levels();
    assert!(!levels.is_empty());
    assert!(levels[0].runs, "the lowest level runs anywhere: {levels:?}");
    assert!(matches!(
        cpu_level::force("no-such-level"),
        Err(ForceError::Unknown(_))
    ));
    if let Some(l) = levels.iter().find(|l| !l.runs) {
        assert_eq!(
            cpu_level::force(l.name),
            Err(ForceError::Unsupported(l.name.to_owned()))
        );
    }
    let lowest = levels[0].name;
    cpu_level::force(lowest).unwrap();
    assert_eq!(cpu_level::in_use(), lowest);
    // SAFETY: ggml_cpu_init takes no arguments; it fills the level's tables once.
    unsafe { sys::ggml_cpu_init() };
    if let Some(want) = expected(lowest) {
        assert_eq!(features(), want);
    }
    cpu_level::force(lowest).unwrap();
    if let Some(other) = levels[1..].iter().find(|l| l.runs) {
        assert_eq!(
            cpu_level::force(other.name),
            Err(ForceError::AlreadyChosen {
                wanted: other.name.to_owned(),
                in_use: lowest
            })
        );
    }
}

#[test]
fn every_level_this_cpu_runs_answers_with_its_own_code() {
    if let Some(level) = std::env::var_os(CHILD_ENV) {
        let level = level.to_str().unwrap();
        if level == "best" {
            // Nothing forced: the first use picks the highest level this CPU runs.
            let best = cpu_level::levels()
                .into_iter()
                .rev()
                .find(|l| l.runs)
                .unwrap();
            // SAFETY: no arguments.
            unsafe { sys::ggml_cpu_init() };
            assert_eq!(cpu_level::in_use(), best.name);
            return;
        }
        cpu_level::force(level).unwrap();
        // SAFETY: no arguments; the CPU backend is created and freed here.
        unsafe {
            let be = sys::ggml_backend_cpu_init();
            assert!(!be.is_null());
            assert!(sys::ggml_backend_is_cpu(be));
            sys::ggml_backend_free(be);
        }
        assert_eq!(cpu_level::in_use(), level);
        if let Some(want) = expected(level) {
            assert_eq!(features(), want, "level {level}");
        }
        return;
    }
    let levels = cpu_level::levels();
    let best = levels.iter().rev().find(|l| l.runs).unwrap().name;
    let running = levels.iter().filter(|l| l.runs).map(|l| l.name);
    for l in running.chain(["best"]) {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "every_level_this_cpu_runs_answers_with_its_own_code",
                "--nocapture",
            ])
            .env(CHILD_ENV, l)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "level {l}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        println!("level {l} runs");
    }
    println!("levels {levels:?}, best here {best}");
}
