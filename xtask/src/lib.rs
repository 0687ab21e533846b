//! Shared pieces of the maintenance commands (also used by xtask's tests).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

pub mod bindings;
pub mod install;
pub mod licences;

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// Copies a directory tree; returns the number of files copied.
pub fn copy_dir(from: &Path, to: &Path) -> Result<usize> {
    std::fs::create_dir_all(to).with_context(|| format!("create {}", to.display()))?;
    let mut n = 0;
    for entry in std::fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            n += copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).with_context(|| format!("copy {}", src.display()))?;
            n += 1;
        }
    }
    Ok(n)
}

/// CMake options for configuring an exported tree as a library build: the registry package
/// carries no `app/`, `tests/` sources or tools we need, so those parts are switched off.
pub const CMAKE_FLAGS: &[&str] = &[
    "-DLLAMA_BUILD_COMMON=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF",
];

/// Writes the patched tree that ggml-sys was built from into `dest` (which must be empty or
/// absent); returns the number of files written.
pub fn export_tree(dest: &Path) -> Result<usize> {
    let tree = PathBuf::from(ggml_sys::PATCHED_TREE);
    if dest.exists() && std::fs::read_dir(dest)?.next().is_some() {
        bail!(
            "{} exists and is not empty; refusing to overwrite",
            dest.display()
        );
    }
    copy_dir(&tree, dest)
}
