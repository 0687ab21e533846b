//! The default build: ggml base + CPU backend compiled with `cc` into one static library.
//!
//! Everything goes into a single archive because ggml's C and C++ objects call each other; two
//! archives would need a link order that GNU ld cannot express without groups.

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
    let mut sources: Vec<PathBuf> = BASE.iter().chain(CPU).map(|f| src.join(f)).collect();
    if let Some(arch) = target.cpu_arch_dir() {
        let dir = src.join("ggml-cpu").join("arch").join(arch);
        for f in ["quants.c", "repack.cpp"] {
            if dir.join(f).is_file() {
                sources.push(dir.join(f));
            }
        }
    }
    let (c_files, cpp_files): (Vec<_>, Vec<_>) = sources
        .into_iter()
        .partition(|p| p.extension().is_some_and(|e| e == "c"));

    let configure = |cpp: bool| {
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

    let mut c = configure(false);
    c.files(&c_files);
    let mut objects = c.compile_intermediates();
    let mut cxx = configure(true);
    cxx.files(&cpp_files);
    objects.extend(cxx.compile_intermediates());

    let mut lib = configure(true);
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
