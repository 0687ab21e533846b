//! `install --prefix DIR`: the C library as a C program expects to find it.
//!
//! ```text
//! PREFIX/lib/libaudiocpp.so.0.2.0      the shared library (SONAME libaudiocpp.so.0)
//! PREFIX/lib/libaudiocpp.so.0 -> libaudiocpp.so.0.2.0
//! PREFIX/lib/libaudiocpp.so   -> libaudiocpp.so.0
//! PREFIX/lib/libaudiocpp.a             the static library
//! PREFIX/include/audiocpp.h            audio.cpp's ABI 0.2.0
//! PREFIX/include/lfm2e.h               our extensions
//! PREFIX/lib/pkgconfig/audiocpp.pc
//! ```
//! (on macOS `libaudiocpp.0.dylib` and `libaudiocpp.dylib` instead of the `.so` names).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The ABI version the headers declare, also the pkg-config version.
pub const ABI_VERSION: &str = "0.2.0";

// why: one list for the installed and the build tree's pkg-config file (build.rs includes it
// too).
#[path = "../../build/libs_private.rs"]
mod libs_private;
pub use libs_private::libs_private;

/// Where the built libraries are: `$CARGO_TARGET_DIR` or `target/`, then the profile.
pub fn profile_dir(profile: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"));
    target.join(profile)
}

/// The pkg-config file for `prefix`.
pub fn pc_file(prefix: &Path, os: &str) -> Result<String> {
    let template = crate::workspace_root().join("include/audiocpp.pc.in");
    let t = std::fs::read_to_string(&template)
        .with_context(|| format!("read {}", template.display()))?;
    Ok(t.replace("@PREFIX@", &prefix.display().to_string())
        .replace("@VERSION@", ABI_VERSION)
        .replace("@LIBS_PRIVATE@", libs_private(os)))
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    // why: remove first, so that replacing a library a running program has mapped does not
    // change that program's pages.
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to)
        .with_context(|| format!("copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

#[cfg(unix)]
fn link(target: &str, at: &Path) -> Result<()> {
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(target, at).with_context(|| format!("link {}", at.display()))
}

#[cfg(not(unix))]
fn link(_target: &str, _at: &Path) -> Result<()> {
    Ok(())
}

/// Installs the libraries built in `built` (a `target/<profile>` directory) under `prefix`.
pub fn install(built: &Path, prefix: &Path) -> Result<Vec<PathBuf>> {
    let prefix = std::path::absolute(prefix).context("absolute prefix")?;
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let pkgconfig = lib.join("pkgconfig");
    for d in [&lib, &include, &pkgconfig] {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    let mut written = Vec::new();
    let os = std::env::consts::OS;
    let (so, names): (&str, [&str; 3]) = if os == "macos" {
        (
            "liblfm2_engine.dylib",
            [
                "libaudiocpp.0.2.0.dylib",
                "libaudiocpp.0.dylib",
                "libaudiocpp.dylib",
            ],
        )
    } else {
        (
            "liblfm2_engine.so",
            ["libaudiocpp.so.0.2.0", "libaudiocpp.so.0", "libaudiocpp.so"],
        )
    };
    let shared = built.join(so);
    let archive = built.join("liblfm2_engine.a");
    for f in [&shared, &archive] {
        if !f.is_file() {
            bail!(
                "{} is missing: build with `cargo build -p lfm2-engine --lib` first",
                f.display()
            );
        }
    }
    copy(&shared, &lib.join(names[0]))?;
    link(names[0], &lib.join(names[1]))?;
    link(names[1], &lib.join(names[2]))?;
    copy(&archive, &lib.join("libaudiocpp.a"))?;
    written.extend(names.iter().map(|n| lib.join(n)));
    written.push(lib.join("libaudiocpp.a"));
    for h in ["audiocpp.h", "lfm2e.h"] {
        copy(
            &crate::workspace_root().join("include").join(h),
            &include.join(h),
        )?;
        written.push(include.join(h));
    }
    let pc = pkgconfig.join("audiocpp.pc");
    std::fs::write(&pc, pc_file(&prefix, os)?)
        .with_context(|| format!("write {}", pc.display()))?;
    written.push(pc);
    Ok(written)
}
