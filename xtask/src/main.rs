//! `cargo run -p xtask -- <command>`:
//!
//! - `bindings`: regenerate `ggml-sys/src/*.rs` and `llama-sys/src/bindings.rs` (needs libclang).
//! - `export-tree DIR`: write the patched upstream tree to DIR, for CMake builds without Rust.

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
        _ => bail!("usage: cargo run -p xtask -- bindings | export-tree DIR"),
    }
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
