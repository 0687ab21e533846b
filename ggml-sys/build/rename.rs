//! Gives one level's compiled CPU objects names of their own: every global symbol they define,
//! `name`, becomes `ggml_sys_<level>_name`, in its definition and in every reference to it from
//! the same level's objects. References to symbols the level does not define (ggml's base, the C
//! and C++ runtimes) keep their names.
//!
//! why rename every defined symbol and not only ggml-cpu.h's API: the levels share internal
//! names (`ggml_vec_dot_f16`, C++ template instances in COMDAT groups, ...). Two definitions of
//! one name would not link, and weak ones would be merged by the linker, so that one level could
//! run another's instructions.
//!
//! The tools are binutils' (or LLVM's) `nm` and `objcopy`, which come with the C compiler on the
//! targets that have levels (ELF); `NM` and `OBJCOPY` name others.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Tools {
    nm: PathBuf,
    objcopy: PathBuf,
}

/// Whether `tool --version` runs.
fn runs(tool: &Path) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The first of `NAME` (the environment variable), the compiler's prefix + `name` (a cross
/// compiler's `x86_64-linux-gnu-` tools), `name` and `llvm-name` that runs.
fn find(name: &str, compiler_prefix: &str) -> Option<PathBuf> {
    let var = name.to_uppercase();
    println!("cargo:rerun-if-env-changed={var}");
    let mut candidates: Vec<PathBuf> = std::env::var_os(&var)
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if !compiler_prefix.is_empty() {
        candidates.push(format!("{compiler_prefix}{name}").into());
    }
    candidates.push(name.into());
    candidates.push(format!("llvm-{name}").into());
    candidates.into_iter().find(|c| runs(c))
}

impl Tools {
    /// The tools for the objects `build` compiles, or None when one is missing.
    pub fn find(build: &cc::Build) -> Option<Tools> {
        let compiler = build.get_compiler();
        let file = compiler
            .path()
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        // `x86_64-linux-gnu-gcc` -> `x86_64-linux-gnu-`; `gcc`, `cc`, `clang` -> none
        let prefix = file
            .rfind('-')
            .map(|i| file[..=i].to_owned())
            .filter(|p| p.matches('-').count() >= 2)
            .unwrap_or_default();
        Some(Tools {
            nm: find("nm", &prefix)?,
            objcopy: find("objcopy", &prefix)?,
        })
    }

    /// The symbols of `object` to rename: the global ones it defines, and the local names of
    /// its COMDAT groups. why the groups: the linker keeps one group of each name and drops the
    /// others with their symbols; GCC names a constructor's group by a local `C5`/`D5` symbol,
    /// which the levels would otherwise share (a call through the dropped one jumped to 0).
    fn defined(&self, object: &Path) -> Vec<String> {
        let out = Command::new(&self.nm)
            .args(["--defined-only", "-P"])
            .arg(object)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.nm.display()));
        assert!(
            out.status.success(),
            "{} {}: {}",
            self.nm.display(),
            object.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (name, kind) = (f.next()?, f.next()?);
                // upper case: global (or weak, unique); `n`: a group's signature
                let keep =
                    kind.chars().all(|c| c.is_ascii_uppercase()) || kind == "u" || kind == "n";
                keep.then(|| name.to_owned())
            })
            .collect()
    }

    /// Copies `objects` into `dir` (as `<level>-<file>`, so that the archive's members keep
    /// distinct names) with `level`'s names; returns the copies and the renamed symbols (their
    /// original names).
    pub fn rename(
        &self,
        level: &str,
        objects: &[PathBuf],
        dir: &Path,
    ) -> (Vec<PathBuf>, Vec<String>) {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut symbols: Vec<String> = objects.iter().flat_map(|o| self.defined(o)).collect();
        symbols.sort();
        symbols.dedup();
        let map: String = symbols
            .iter()
            .map(|s| format!("{s} ggml_sys_{level}_{s}\n"))
            .collect();
        let map_file = dir.join("symbols.map");
        std::fs::write(&map_file, map)
            .unwrap_or_else(|e| panic!("write {}: {e}", map_file.display()));
        let renamed = objects
            .iter()
            .map(|o| {
                let name = o.file_name().expect("an object file").to_string_lossy();
                let renamed = dir.join(format!("{level}-{name}"));
                let status = Command::new(&self.objcopy)
                    .arg(format!("--redefine-syms={}", map_file.display()))
                    .arg(o)
                    .arg(&renamed)
                    .status()
                    .unwrap_or_else(|e| panic!("run {}: {e}", self.objcopy.display()));
                assert!(
                    status.success(),
                    "{} failed on {}",
                    self.objcopy.display(),
                    o.display()
                );
                renamed
            })
            .collect();
        (renamed, symbols)
    }
}
