//! `export-tree` writes a tree that CMake configures (the route to CUDA builds without Rust).

use std::process::Command;

#[test]
fn exported_tree_configures_with_cmake() {
    let cmake = Command::new("cmake").arg("--version").output().is_ok();
    if !cmake {
        // The export itself is still checked below.
        ci_skip::skip(
            "exported_tree_configures_with_cmake",
            "cmake is not installed (apt-get install cmake)",
        );
    }
    let dir = std::env::temp_dir().join(format!("xtask-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let n = xtask::export_tree(&dir).expect("export");
    assert!(n > 500, "only {n} files exported");
    for f in [
        "CMakeLists.txt",
        "ggml/include/ggml.h",
        "src/llama.cpp",
        "include/llama.h",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing from the export");
    }
    // A second export into the same (non-empty) folder is refused, not merged.
    assert!(xtask::export_tree(&dir).is_err());

    if cmake {
        let out = Command::new("cmake")
            .arg("-S")
            .arg(&dir)
            .arg("-B")
            .arg(dir.join("build"))
            .args(xtask::CMAKE_FLAGS)
            .output()
            .expect("run cmake");
        assert!(
            out.status.success(),
            "cmake configure failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
