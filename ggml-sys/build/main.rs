//! Build script for ggml-sys: obtain the pinned upstream tree, patch it, compile ggml.
//!
//! `main` only dispatches; each step lives in its own module so it can be read (and reused by
//! llama-sys through the `DEP_GGML_*` metadata) on its own.

// why the cfg: a device build compiles ggml with CMake, so the CPU-only build is not used.
#[cfg(not(any(feature = "cuda", feature = "metal", feature = "vulkan")))]
mod cpu;
#[cfg(any(feature = "cuda", feature = "metal", feature = "vulkan"))]
mod gpu;
#[cfg(not(any(feature = "cuda", feature = "metal", feature = "vulkan")))]
mod levels;
mod patch;
#[cfg(not(any(feature = "cuda", feature = "metal", feature = "vulkan")))]
mod rename;
mod target;
mod tree;

use std::path::PathBuf;

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let upstream = manifest_dir.join("upstream");
    println!("cargo:rerun-if-changed={}", upstream.display());
    println!("cargo:rerun-if-changed=build");

    // why: docs.rs builds without network and needs no library, only the committed bindings.
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    if std::env::var_os("DOCS_RS").is_some() {
        println!("cargo:rustc-env=GGML_SYS_PATCHED_TREE=");
        return;
    }

    let pin = tree::Pin::read(&upstream.join("UPSTREAM.toml"));
    let pristine = tree::locate_pristine(&pin, &tree::Search::from_env(&out_dir));
    let root = out_dir.join("llama.cpp");
    tree::copy_tree(&pristine, &root);
    patch::apply_series(&upstream.join("patches"), &root);
    tree::write_version_headers(&pin, &out_dir.join("gen"));

    let target = target::Target::from_env();
    #[cfg(any(feature = "cuda", feature = "metal", feature = "vulkan"))]
    {
        gpu::build(&root, &target);
    }
    #[cfg(not(any(feature = "cuda", feature = "metal", feature = "vulkan")))]
    cpu::build(&root, &out_dir.join("gen"), &target);

    // Metadata for dependants (llama-sys reads these as DEP_GGML_ROOT etc.).
    println!("cargo:root={}", root.display());
    println!(
        "cargo:include={}",
        root.join("ggml").join("include").display()
    );
    println!("cargo:gen={}", out_dir.join("gen").display());
    println!("cargo:cflags={}", target.shared_cflags().join(" "));
    println!("cargo:rustc-env=GGML_SYS_PATCHED_TREE={}", root.display());
}
