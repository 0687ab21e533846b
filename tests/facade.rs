//! The examples, the C ABI (`src/`) and the server use the engine only through its facade
//! (`audio_engine::lfm2_audio::*`, its `conversation` protocol module and, under features, the
//! tooling modules): none of them reaches into `lfm2_audio::internals`, the test-only door to
//! the private modules. The benches (`examples/bench/`, `examples/*_bench.rs`) are the one
//! exception, and only for `internals::task_calls`: like the tests, they time each task's own
//! path under the doors.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn examples_the_c_abi_and_the_server_use_only_the_facade() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in ["examples", "src", "serve/src"] {
        rust_files(&root.join(d), &mut files);
    }
    assert!(files.len() > 10, "found only {files:?}");
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let bench = f.components().any(|c| c.as_os_str() == "bench")
                || f.file_stem()
                    .is_some_and(|s| s.to_string_lossy().ends_with("_bench"));
            let internal = text.matches("lfm2_audio::internals").count();
            let allowed = if bench {
                text.matches("lfm2_audio::internals::task_calls").count()
            } else {
                0
            };
            internal > allowed
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these import internal modules: {offenders:?}"
    );
}
