//! Scratch directories of a test process, all under one root, `<target>/tmp/scratch-<pid>`,
//! which is removed when the process exits. Test binaries run one after another (and the
//! C-ABI and fuzz-sweep tests start children of their own), so without this every run left its
//! converted packages behind; they grew to gigabytes.
//!
//! * [`dir`] gives a fresh directory under the root (made on first use);
//! * the root is removed at exit (`atexit`: libtest's `main` returns or calls `exit` after the
//!   last test, panicking tests included);
//! * a process killed before it exits (a timeout, `SIGKILL`) leaves its root behind, so the
//!   first [`dir`] call of every process also removes the roots of processes that are no
//!   longer alive (`/proc/<pid>` absent). A root whose pid was reused by a live process stays
//!   until that process is gone.
//!
//! This file is compiled into several test crates (`mod common;` here, `#[path]` elsewhere),
//! each using part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const PREFIX: &str = "scratch-";

/// `<target>/tmp`, cargo's directory for integration tests' files.
fn tmp_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

static ROOT: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_root() {
    // why: runs inside libc's exit; it must not unwind, so every error is ignored.
    if let Some(root) = ROOT.get() {
        let _ = std::fs::remove_dir_all(root);
    }
}

extern "C" {
    fn atexit(f: extern "C" fn()) -> std::os::raw::c_int;
}

/// Removes the scratch roots of processes that are gone (Linux: `/proc` lists live pids).
fn sweep_dead(tmp: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// This process's scratch root, made (and registered for removal at exit) on first use.
pub fn root() -> &'static Path {
    ROOT.get_or_init(|| {
        let tmp = tmp_root();
        sweep_dead(&tmp);
        let root = tmp.join(format!("{PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&root)
            .unwrap_or_else(|e| panic!("creating {}: {e}", root.display()));
        // SAFETY: `atexit` only records the pointer of a function that lives for the whole
        // program; `remove_root` takes no arguments, reads a `OnceLock` that is set by then
        // and cannot unwind (it ignores every error).
        let registered = unsafe { atexit(remove_root) };
        if registered != 0 {
            eprintln!(
                "could not register the removal of {} at exit",
                root.display()
            );
        }
        root
    })
}

/// A fresh, empty directory `name` under this process's scratch root (removed first if an
/// earlier call made it).
pub fn dir(name: &str) -> PathBuf {
    let d = root().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("creating {}: {e}", d.display()));
    d
}

/// A path `name` under this process's scratch root, for a file (nothing is created).
pub fn file(name: &str) -> PathBuf {
    root().join(name)
}
