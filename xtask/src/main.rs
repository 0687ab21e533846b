//! `cargo run -p xtask -- <command>`:
//!
//! - `bindings`: regenerate `ggml-sys/src/*.rs` and `llama-sys/src/bindings.rs` (needs libclang).
//! - `export-tree DIR`: write the patched upstream tree to DIR, for CMake builds without Rust.
//! - `licences`: the licence and ban check of what ships against `deny.toml`, offline (after
//!   `cargo fetch --locked`); cargo-deny's `check licenses bans` without building cargo-deny.
//! - `install --prefix DIR [--debug | --lib-dir DIR]`: build the C library (release unless
//!   `--debug`; `--lib-dir` takes already built libraries from a directory, e.g. `target/<profile>/deps`)
//!   and install `lib/libaudiocpp.{so,a}`, `include/audiocpp.h` (+ `lfm2e.h`) and
//!   `lib/pkgconfig/audiocpp.pc` under DIR.

use anyhow::{bail, Context, Result};
use std::path::Path;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["bindings"] => {
            for b in xtask::bindings::all() {
                let path = xtask::workspace_root().join(b.path);
                std::fs::write(&path, b.generate()?)
                    .with_context(|| format!("write {}", path.display()))?;
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        ["export-tree", dir] => export_tree(Path::new(dir)),
        ["licences"] => licences(),
        ["install", rest @ ..] => install(rest),
        _ => bail!(
            "usage: cargo run -p xtask -- bindings | export-tree DIR | licences | install --prefix DIR \
             [--debug | --lib-dir DIR]"
        ),
    }
}

fn licences() -> Result<()> {
    let (problems, n) = xtask::licences::check_workspace(&xtask::workspace_root())?;
    for p in &problems {
        eprintln!("{p}");
    }
    if !problems.is_empty() {
        bail!(
            "{} licence/ban problems in {n} shipped crates (deny.toml)",
            problems.len()
        );
    }
    println!("licences: {n} shipped crates, every licence allowed by deny.toml, no ban broken");
    Ok(())
}

fn export_tree(dest: &Path) -> Result<()> {
    let n = xtask::export_tree(dest)?;
    println!(
        "exported the patched tree ({n} files) to {}\nconfigure it with: cmake -S {0} -B {0}/build {}",
        dest.display(),
        xtask::CMAKE_FLAGS.join(" ")
    );
    Ok(())
}

fn install(args: &[&str]) -> Result<()> {
    let mut prefix = None;
    let mut debug = false;
    let mut lib_dir = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--prefix" => prefix = Some(it.next().context("--prefix needs DIR")?),
            "--debug" => debug = true,
            "--lib-dir" => lib_dir = Some(it.next().context("--lib-dir needs DIR")?),
            other => bail!("install: unknown argument {other}"),
        }
    }
    let prefix = Path::new(prefix.context("install needs --prefix DIR")?);
    let profile = if debug { "debug" } else { "release" };
    let built = match lib_dir {
        Some(d) => std::path::PathBuf::from(d),
        None => xtask::install::profile_dir(profile),
    };
    if lib_dir.is_none() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "-p", "lfm2-engine", "--lib"])
            .current_dir(xtask::workspace_root());
        if !debug {
            cmd.arg("--release");
        }
        let status = cmd.status().context("running cargo build")?;
        if !status.success() {
            bail!("cargo build -p lfm2-engine failed");
        }
    }
    for f in xtask::install::install(&built, prefix)? {
        println!("installed {}", f.display());
    }
    println!(
        "use it with: PKG_CONFIG_PATH={}/lib/pkgconfig pkg-config --cflags --libs audiocpp",
        std::path::absolute(prefix)?.display()
    );
    Ok(())
}
