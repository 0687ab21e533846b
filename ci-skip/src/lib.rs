//! The tests' one way to report a check they cannot run (a tool that is not installed, a CPU
//! variant without recorded digests, ...).
//!
//! [`skip`] writes one marker line, `LFM2E-SKIP: <test>: <why>`, straight to the process's
//! standard error (past the test harness's output capture, so the line reaches the log of a
//! passing test too) and then:
//! - outside CI, returns: the caller returns and the test passes, having checked less;
//! - in CI (the environment variable `CI` is `true`, as CI services and `.ci/run` set it),
//!   panics: a check CI cannot run is a failure, never a silent pass.
//!
//! `.ci/run` counts the marker lines in the test log and fails when there is any.
//!
//! ```no_run
//! fn cmake_installed() -> bool {
//!     std::process::Command::new("cmake").arg("--version").output().is_ok()
//! }
//! if !cmake_installed() {
//!     ci_skip::skip("exported_tree_configures_with_cmake", "cmake is not installed");
//!     return;
//! }
//! ```

use std::io::Write;
use std::path::PathBuf;

/// The start of every marker line; `.ci/run` counts the lines that start with it.
pub const MARKER: &str = "LFM2E-SKIP:";

/// Whether this process runs in CI: the environment variable `CI` is `true` (any case) or `1`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Reports that `test` cannot run (part of) its check because of `why`: prints the marker line
/// `LFM2E-SKIP: <test>: <why>` on standard error, then panics in CI ([`in_ci`]) and returns
/// elsewhere.
///
/// # Panics
/// In CI, always (that is its purpose).
pub fn skip(test: &str, why: &str) {
    // why: a direct write to the process's stderr is not captured by the test harness (print!
    // and eprint! are), so the marker reaches the log whether the test passes or fails. The
    // leading newline starts the marker on a line of its own even after the harness's
    // unterminated "test name ... " line.
    let line = format!("\n{MARKER} {test}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    assert!(
        !in_ci(),
        "{test} could not run its check in CI (CI=true): {why}"
    );
}

/// The path of executable `bin` on `PATH` (or in `/usr/sbin` and `/sbin`, where Debian puts
/// e.g. nginx), if there is one.
pub fn find_tool(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(bin))
        .find(|p| is_executable(p))
}

/// [`find_tool`], or a [`skip`] naming `bin` (and `install`, what installs it) when it is not
/// there: `None` means the caller returns (outside CI; in CI the skip has panicked).
pub fn require_tool(test: &str, bin: &str, install: &str) -> Option<PathBuf> {
    let found = find_tool(bin);
    if found.is_none() {
        skip(test, &format!("`{bin}` is not installed ({install})"));
    }
    found
}

fn is_executable(p: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}
