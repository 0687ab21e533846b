//! Build script for llama-sys: compile libllama from the tree ggml-sys prepared and patched.
//!
//! ggml-sys owns the tree and the only copy of ggml; we read its location from the `links`
//! metadata (`DEP_GGML_*`) so both crates compile exactly the same patched sources.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn dep(key: &str) -> String {
    env::var(format!("DEP_GGML_{key}"))
        .unwrap_or_else(|_| panic!("ggml-sys did not export DEP_GGML_{key}"))
}

fn main() {
    // why: docs.rs builds without network and needs no library, only the committed bindings
    // (ggml-sys skips its build there too, so there is no tree to compile).
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    if env::var_os("DOCS_RS").is_some() {
        return;
    }
    let root = PathBuf::from(dep("ROOT"));
    let gen = PathBuf::from(dep("GEN"));
    // Empty for portable builds; cargo may then omit the variable altogether.
    let cflags = env::var("DEP_GGML_CFLAGS").unwrap_or_default();
    let src = root.join("src");

    let mut files = cpp_files(&src);
    files.extend(cpp_files(&src.join("models")));
    files.sort();

    let mut b = cc::Build::new();
    b.cpp(true)
        .include(root.join("include"))
        .include(root.join("ggml").join("include"))
        .include(&src)
        .include(&gen)
        .files(&files)
        .opt_level(3)
        .debug(false)
        .warnings(false)
        .define("NDEBUG", None);
    if env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("msvc") {
        b.flag("/std:c++17");
    } else {
        b.flag("-std=c++17");
    }
    for flag in cflags.split_whitespace() {
        b.flag(flag);
    }
    b.compile("llama");

    println!("cargo:root={}", root.display());
    println!("cargo:include={}", root.join("include").display());
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-env-changed=DEP_GGML_ROOT");
}

fn cpp_files(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cpp"))
        .collect()
}
