//! Build script of the C-ABI library, one small module per job (under `build/`):
//!
//! - `soname`: names the shared library as audio.cpp's is named (SOVERSION 0).
//! - `header_check`: fails the build when `include/*.h` and the `#[no_mangle] extern "C"`
//!   functions of `src/capi/*.rs` disagree (a function on one side only, or a different
//!   parameter count); `tests/c_abi_surface.rs` also compares the types and the built
//!   library's exported symbols.
//! - `pkg_config`: writes `<target>/<profile>/pkgconfig/audiocpp-uninstalled.pc`, for building
//!   C programs against the build tree.
//!
//! The export surface needs no linker map: rustc exports from a cdylib exactly its
//! `#[no_mangle] pub extern "C"` functions (every other symbol, ggml's included, is local).

#[path = "build/header_check.rs"]
mod header_check;
#[path = "build/libs_private.rs"]
mod libs_private;
#[path = "build/pkg_config.rs"]
mod pkg_config;
#[path = "build/soname.rs"]
mod soname;

use std::path::PathBuf;

/// A variable cargo sets for every build script.
fn cargo_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build");
    // Directories: cargo reruns the script when any file under them changes or is added.
    println!("cargo:rerun-if-changed=include");
    println!("cargo:rerun-if-changed=src/capi");

    let root = PathBuf::from(cargo_env("CARGO_MANIFEST_DIR"));
    let target_os = cargo_env("CARGO_CFG_TARGET_OS");
    soname::emit(&target_os);

    if let Err(e) = header_check::check(&root) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }

    let out_dir = PathBuf::from(cargo_env("OUT_DIR"));
    match pkg_config::write_uninstalled(
        &root,
        &out_dir,
        &target_os,
        libs_private::libs_private(&target_os),
    ) {
        Ok(_) => {}
        Err(e @ pkg_config::PcError::UnknownLayout(_)) => println!("cargo:warning={e}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
