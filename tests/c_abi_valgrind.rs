//! The whole C suite of `tests/c_abi.rs` again under valgrind's memcheck: no invalid read or
//! write, no use of uninitialised memory, no mismatched free, and no definitely lost block, in
//! every case (`.ci/run` installs valgrind; without it these tests say so and pass).

mod common;

use std::process::Command;

use common::*;

fn valgrind() -> Option<String> {
    let v = std::env::var("VALGRIND").unwrap_or_else(|_| "valgrind".into());
    match Command::new(&v).arg("--version").output() {
        Ok(o) if o.status.success() => Some(v),
        _ => None,
    }
}

fn memcheck(case: &str) {
    let Some(v) = valgrind() else {
        println!("SKIPPED: valgrind is not installed (apt-get install -y valgrind); case {case} was not checked");
        return;
    };
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
