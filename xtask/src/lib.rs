//! Shared pieces of the maintenance commands (also used by xtask's tests).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub mod bindings;

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
