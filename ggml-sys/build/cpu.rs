//! The cc build: ggml base + CPU backend compiled with `cc` into one static library.
//!
//! Everything goes into a single archive because ggml's C and C++ objects call each other; two
//! archives would need a link order that GNU ld cannot express without groups.
//!
//! By default the CPU backend is compiled once per instruction-set level (build/levels.rs), each
//! copy's symbols renamed to the level's own (build/rename.rs), and build/dispatch.c provides
//! ggml-cpu.h's names, forwarding to the best level the running CPU has. The base is compiled
//! once, for the target's baseline.

use crate::levels;
use crate::rename;
use crate::target::Target;
use std::path::{Path, PathBuf};

const BASE: &[&str] = &[
    "ggml.c",
    "ggml.cpp",
    "ggml-alloc.c",
    "ggml-backend.cpp",
    "ggml-backend-meta.cpp",
    "ggml-opt.cpp",
    "ggml-threading.cpp",
    "ggml-quants.c",
    "gguf.cpp",
    // the `ggml` library proper: backend registry
    "ggml-backend-reg.cpp",
    "ggml-backend-dl.cpp",
];

const CPU: &[&str] = &[
    "ggml-cpu/ggml-cpu.c",
    "ggml-cpu/ggml-cpu.cpp",
    "ggml-cpu/repack.cpp",
    "ggml-cpu/hbm.cpp",
    "ggml-cpu/quants.c",
    "ggml-cpu/traits.cpp",
    "ggml-cpu/amx/amx.cpp",
    "ggml-cpu/amx/mmq.cpp",
    "ggml-cpu/tiled/tiled.cpp",
    "ggml-cpu/tiled/tiled-kernel.cpp",
    "ggml-cpu/binary-ops.cpp",
    "ggml-cpu/unary-ops.cpp",
    "ggml-cpu/vec.cpp",
    "ggml-cpu/ops.cpp",
    "ggml-cpu/llamafile/sgemm.cpp",
];

pub fn build(root: &Path, gen: &Path, target: &Target) {
    let src = root.join("ggml").join("src");
    let mut cpu_sources: Vec<PathBuf> = CPU.iter().map(|f| src.join(f)).collect();
    if let Some(arch) = target.cpu_arch_dir() {
        let dir = src.join("ggml-cpu").join("arch").join(arch);
        for f in ["quants.c", "repack.cpp"] {
            if dir.join(f).is_file() {
                cpu_sources.push(dir.join(f));
            }
        }
    }
    let base_sources: Vec<PathBuf> = BASE.iter().map(|f| src.join(f)).collect();
    let out_dir = gen.parent().expect("gen is under OUT_DIR").to_path_buf();

    // `extra`: the flags of one level's CPU code (none for the base and a one-level build,
    // whose flags are the target's, `arch_flags`).
    let configure = |cpp: bool, extra: &[&str]| {
        let mut b = cc::Build::new();
        b.cpp(cpp)
            .include(root.join("ggml").join("include"))
            .include(&src)
            .include(src.join("ggml-cpu"))
            .include(gen)
            .opt_level(3)
            .debug(false)
            .warnings(false)
            .define("GGML_USE_CPU", None)
            .define("GGML_USE_LLAMAFILE", None)
            .define("GGML_USE_CPU_REPACK", None);
        if target.cpu_arch_dir().is_none() {
            b.define("GGML_CPU_GENERIC", None);
        }
        for (k, v) in target.base_defines() {
            b.define(k, v);
        }
        for f in target.arch_flags() {
            b.flag(&f);
        }
        for f in extra {
            b.flag(f);
        }
        if cfg!(feature = "openmp") {
            b.define("GGML_USE_OPENMP", None)
                .flag_if_supported("-fopenmp");
        }
        if target.is_msvc() {
            b.flag(if cpp { "/std:c++17" } else { "/std:c11" });
        } else {
            b.flag(if cpp { "-std=c++17" } else { "-std=c11" });
        }
        if !target.is_msvc() {
            b.flag("-fno-math-errno")
                .flag_if_supported("-Wno-unused-parameter");
        }
        b
    };
    // Compiles `sources` (C and C++) into objects under `dir`.
    let compile = |sources: &[PathBuf], extra: &[&str], dir: &Path| {
        let (c_files, cpp_files): (Vec<_>, Vec<_>) = sources
            .iter()
            .partition(|p| p.extension().is_some_and(|e| e == "c"));
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut c = configure(false, extra);
        c.out_dir(dir).files(&c_files);
        let mut objects = c.compile_intermediates();
        let mut cxx = configure(true, extra);
        cxx.out_dir(dir).files(&cpp_files);
        objects.extend(cxx.compile_intermediates());
        objects
    };

    let mut objects = compile(&base_sources, &[], &out_dir.join("base"));
    let all_levels = levels::for_arch(&target.arch);
    let tools = if target.wants_levels() && !all_levels.is_empty() {
        let tools = rename::Tools::find(&configure(false, &[]));
        if tools.is_none() {
            println!(
                "cargo:warning=ggml-sys: no nm/objcopy found (set NM and OBJCOPY): one portable \
                 CPU level instead of {}",
                all_levels.len()
            );
        }
        tools
    } else {
        None
    };
    let mut dispatch = configure(false, &[]);
    match tools {
        Some(tools) => {
            for level in &all_levels {
                let dir = out_dir.join("levels").join(level.name);
                let compiled = compile(&cpu_sources, level.flags, &dir);
                let (renamed, symbols) = tools.rename(level.name, &compiled, &dir.join("renamed"));
                check_forwarded_api(root, &symbols);
                objects.extend(renamed);
            }
            std::fs::write(gen.join("ggml_sys_levels.h"), levels::header(&all_levels))
                .unwrap_or_else(|e| panic!("write ggml_sys_levels.h: {e}"));
        }
        None => {
            objects.extend(compile(&cpu_sources, &[], &out_dir.join("cpu")));
            dispatch.define(
                "GGML_SYS_CPU_SINGLE",
                Some(format!("\"{}\"", target.single_level_name()).as_str()),
            );
        }
    }
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    dispatch
        .out_dir(out_dir.join("dispatch"))
        .file(manifest.join("build").join("dispatch.c"));
    std::fs::create_dir_all(out_dir.join("dispatch")).expect("create OUT_DIR/dispatch");
    objects.extend(dispatch.compile_intermediates());

    let mut lib = configure(true, &[]);
    lib.objects(&objects);
    lib.compile("ggml");

    if !target.is_msvc() {
        println!("cargo:rustc-link-lib=dylib=pthread");
        println!("cargo:rustc-link-lib=dylib=m");
    }
    if cfg!(feature = "openmp") && !target.is_msvc() {
        println!("cargo:rustc-link-lib=dylib=gomp");
    }
    if target.os == "macos" || target.os == "ios" {
        println!("cargo:rustc-link-lib=framework=Accelerate");
    }
}

/// Fails the build when a function of the patched ggml-cpu.h that a level defines (`defined`:
/// its symbols) is not forwarded by dispatch.c (an upstream bump that adds one), or one that is
/// forwarded is not defined, rather than leaving the link to find it.
fn check_forwarded_api(root: &Path, defined: &[String]) {
    let header = root.join("ggml").join("include").join("ggml-cpu.h");
    let text = std::fs::read_to_string(&header)
        .unwrap_or_else(|e| panic!("read {}: {e}", header.display()));
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dispatch = std::fs::read_to_string(manifest.join("build").join("dispatch.c"))
        .expect("read build/dispatch.c");
    let forwarded = |name: &str| dispatch.contains(&format!(", {name}, ("));
    let defined = |name: &str| defined.iter().any(|d| d == name);
    // why only the defined ones: ggml-cpu.h declares ggml_threadpool_get_n_threads, which no
    // file of ggml defines.
    let missing: Vec<String> = api_names(&text)
        .into_iter()
        .filter(|n| defined(n) != forwarded(n))
        .collect();
    assert!(
        missing.is_empty(),
        "build/dispatch.c's forwarded list and the functions of {} that ggml defines differ \
         in: {missing:?}",
        header.display()
    );
}

/// The names of the functions a header declares with GGML_BACKEND_API (the identifier before
/// the first `(` of each declaration).
pub fn api_names(header: &str) -> Vec<String> {
    header
        .split("GGML_BACKEND_API")
        .skip(1)
        .filter_map(|decl| {
            let head = &decl[..decl.find('(')?];
            let name: String = head
                .trim_end()
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            Some(name.chars().rev().collect())
        })
        .filter(|n: &String| !n.is_empty())
        .collect()
}
