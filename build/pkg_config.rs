//! The build tree's pkg-config file, `<target>/<profile>/pkgconfig/audiocpp-uninstalled.pc`.
//! pkg-config prefers `NAME-uninstalled.pc` to `NAME.pc` on its path, so
//! `PKG_CONFIG_PATH=<target>/<profile>/pkgconfig pkg-config --cflags --libs audiocpp` builds a
//! C program against this checkout's headers and the library cargo built, without an install
//! (`xtask install` writes the installed `audiocpp.pc`; both come from `include/audiocpp.pc.in`).
//!
//! Where `<target>/<profile>` is: taken from OUT_DIR (`<target>/<profile>/build/<pkg>-<hash>/out`,
//! `<target>/<triple>/<profile>/...` with `--target`), not from CARGO_TARGET_DIR and PROFILE:
//! PROFILE only says `debug` or `release` (a custom profile or `--target` puts the libraries
//! elsewhere), while OUT_DIR sits under the directory the libraries land in, whichever profile,
//! target and target directory the build uses. Cargo does not promise that layout; when OUT_DIR
//! does not have it, no file is written and the build says so in a warning.
//!
//! The libraries: cargo names them after the crate (`liblfm2_engine.so` and `.a`) and a C
//! program links `-laudiocpp`, so `<target>/<profile>/audiocpp-uninstalled/` holds links under
//! audio.cpp's names to the files in `<target>/<profile>/deps/` (where `cargo build` and
//! `cargo test` both write them; only `cargo build` copies them up a level). Not in
//! `<target>/<profile>` itself: cargo puts that directory on the loader path of tests and
//! `cargo run`, where a `libaudiocpp.so.0` would stand in for the copies the C-ABI tests load.
//! The links are made before the library exists (build scripts run first) and resolve once it
//! is linked. `Libs` also carries an rpath to that directory: the build tree is on no loader
//! path, and a program built against it should run as it is.

use std::fmt;
use std::path::{Path, PathBuf};

/// The directory, under `<target>/<profile>`, of the links under audio.cpp's library names.
pub const LINK_DIR: &str = "audiocpp-uninstalled";

/// Why the uninstalled pkg-config file was not written.
#[derive(Debug)]
pub enum PcError {
    /// OUT_DIR is not `<target>/<profile>/build/<pkg>-<hash>/out`.
    UnknownLayout(PathBuf),
    /// A file of the checkout could not be read.
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A file or link in the target directory could not be written.
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    /// `include/audiocpp.pc.in` or `include/audiocpp.h` lacks what the file is made from.
    Template(String),
}

impl fmt::Display for PcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcError::UnknownLayout(out) => write!(
                f,
                "OUT_DIR {} is not <target>/<profile>/build/<package>/out: no \
                 audiocpp-uninstalled.pc for this build",
                out.display()
            ),
            PcError::Read { path, error } => write!(f, "cannot read {}: {error}", path.display()),
            PcError::Write { path, error } => {
                write!(f, "cannot write {}: {error}", path.display())
            }
            PcError::Template(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for PcError {}

/// `<target>/<profile>` of a build script's OUT_DIR, if it has cargo's layout.
pub fn profile_dir(out_dir: &Path) -> Option<PathBuf> {
    let build = out_dir.parent()?.parent()?;
    let layout = out_dir.file_name()? == "out" && build.file_name()? == "build";
    layout
        .then(|| build.parent().map(Path::to_path_buf))
        .flatten()
}

/// `major.minor.patch` of the `AUDIOCPP_ABI_VERSION_*` defines of `audiocpp.h`.
pub fn abi_version(header: &str) -> Option<String> {
    let part = |what: &str| {
        header.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            let hit = w.next() == Some("#define") && w.next() == Some(what);
            hit.then(|| w.next()?.parse::<u32>().ok()).flatten()
        })
    };
    Some(format!(
        "{}.{}.{}",
        part("AUDIOCPP_ABI_VERSION_MAJOR")?,
        part("AUDIOCPP_ABI_VERSION_MINOR")?,
        part("AUDIOCPP_ABI_VERSION_PATCH")?
    ))
}

/// `(name a C program links or loads, cargo's file in deps/)` for `target_os`; `None` where
/// there is no pkg-config convention to follow (Windows).
pub fn library_links(target_os: &str) -> Option<&'static [(&'static str, &'static str)]> {
    match target_os {
        "windows" => None,
        "macos" | "ios" => Some(&[
            ("libaudiocpp.dylib", "liblfm2_engine.dylib"),
            ("libaudiocpp.0.dylib", "liblfm2_engine.dylib"),
            ("libaudiocpp.a", "liblfm2_engine.a"),
        ]),
        _ => Some(&[
            ("libaudiocpp.so", "liblfm2_engine.so"),
            ("libaudiocpp.so.0", "liblfm2_engine.so"),
            ("libaudiocpp.a", "liblfm2_engine.a"),
        ]),
    }
}

/// The uninstalled file's text from the installed file's `template`: `includedir` is the
/// checkout's `include/`, `libdir` the link directory (with an rpath to it), the rest as
/// installed.
pub fn uninstalled_pc(
    template: &str,
    root: &Path,
    lib_dir: &Path,
    version: &str,
    libs_private: &str,
) -> Result<String, PcError> {
    let mut out = String::from(
        "# Written by build.rs for the build tree (pkg-config's -uninstalled convention);\n\
         # `cargo run -p xtask -- install` writes the installed audiocpp.pc.\n",
    );
    let (mut libdir, mut includedir, mut libs) = (false, false, false);
    for line in template.lines() {
        let line = if line.starts_with("libdir=") {
            libdir = true;
            format!("libdir={}", lib_dir.display())
        } else if line.starts_with("includedir=") {
            includedir = true;
            format!("includedir={}", root.join("include").display())
        } else if line.starts_with("Libs:") && line.contains("-L${libdir}") {
            libs = true;
            line.replace("-L${libdir}", "-L${libdir} -Wl,-rpath,${libdir}")
        } else {
            line.replace("@PREFIX@", &root.display().to_string())
                .replace("@VERSION@", version)
                .replace("@LIBS_PRIVATE@", libs_private)
        };
        out.push_str(&line);
        out.push('\n');
    }
    if !(libdir && includedir && libs) {
        return Err(PcError::Template(
            "include/audiocpp.pc.in needs `libdir=`, `includedir=` and a `Libs:` line with \
             -L${libdir}"
                .into(),
        ));
    }
    Ok(out)
}

fn read(path: &Path) -> Result<String, PcError> {
    std::fs::read_to_string(path).map_err(|error| PcError::Read {
        path: path.to_path_buf(),
        error,
    })
}

/// Writes `text` to `path` unless it already holds it (so a rebuild leaves its time alone).
fn write_if_changed(path: &Path, text: &str) -> Result<(), PcError> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    std::fs::write(path, text).map_err(|error| PcError::Write {
        path: path.to_path_buf(),
        error,
    })
}

/// Makes `at` a symbolic link to `target` (replacing whatever is there).
#[cfg(unix)]
fn link(target: &Path, at: &Path) -> Result<(), PcError> {
    if std::fs::read_link(at).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(target, at).map_err(|error| PcError::Write {
        path: at.to_path_buf(),
        error,
    })
}

/// Writes the link directory and the uninstalled pkg-config file of the package at `root`
/// built into `out_dir` for `target_os`; the file's path, or `None` where the build host or
/// the target has no use for one.
pub fn write_uninstalled(
    root: &Path,
    out_dir: &Path,
    target_os: &str,
    libs_private: &str,
) -> Result<Option<PathBuf>, PcError> {
    let profile = profile_dir(out_dir).ok_or_else(|| PcError::UnknownLayout(out_dir.into()))?;
    let Some(links) = library_links(target_os) else {
        return Ok(None);
    };
    if !cfg!(unix) {
        // why: the links are symbolic links, which this build host cannot be relied on to make.
        return Ok(None);
    }
    let lib_dir = profile.join(LINK_DIR);
    let pc_dir = profile.join("pkgconfig");
    for d in [&lib_dir, &pc_dir] {
        std::fs::create_dir_all(d).map_err(|error| PcError::Write {
            path: d.clone(),
            error,
        })?;
    }
    #[cfg(unix)]
    for (name, file) in links {
        // Relative, so a moved target directory keeps working.
        link(&Path::new("../deps").join(file), &lib_dir.join(name))?;
    }
    let header = read(&root.join("include/audiocpp.h"))?;
    let version = abi_version(&header).ok_or_else(|| {
        PcError::Template("include/audiocpp.h lacks the AUDIOCPP_ABI_VERSION_* defines".into())
    })?;
    let template = read(&root.join("include/audiocpp.pc.in"))?;
    let pc = pc_dir.join("audiocpp-uninstalled.pc");
    write_if_changed(
        &pc,
        &uninstalled_pc(&template, root, &lib_dir, &version, libs_private)?,
    )?;
    Ok(Some(pc))
}
