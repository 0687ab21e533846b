//! `cuda` / `metal` features: build ggml (base, CPU and the GPU backend) with CMake from the same
//! patched tree. Neither can be compiled on our CI machines; this path is kept small and mirrors
//! what `scripts/gpu-check.sh` does by hand with the exported tree.

use crate::target::Target;
use std::fs;
use std::path::Path;

/// ggml's CMakeLists configures `ggml.pc.in` when ggml is the top-level project (as here), but the
/// registry package leaves that file out; a minimal pkg-config template stands in for it.
fn write_missing_pc_template(root: &Path) {
    let pc = root.join("ggml").join("ggml.pc.in");
    if !pc.exists() {
        fs::write(
            &pc,
            "prefix=@CMAKE_INSTALL_PREFIX@\nlibdir=${prefix}/lib\nincludedir=${prefix}/include\n\n\
             Name: ggml\nDescription: ggml (lfm2-engine's patched tree)\nVersion: @GGML_VERSION@\n\
             Cflags: -I${includedir}\nLibs: -L${libdir} -lggml -lggml-base\n",
        )
        .unwrap_or_else(|e| panic!("write {}: {e}", pc.display()));
    }
}

pub fn build(root: &Path, target: &Target) {
    write_missing_pc_template(root);
    let mut cfg = cmake::Config::new(root.join("ggml"));
    cfg.define("BUILD_SHARED_LIBS", "OFF")
        .define("GGML_BUILD_TESTS", "OFF")
        .define("GGML_BUILD_EXAMPLES", "OFF")
        // why: the C library (a cdylib) links these static archives into a shared object. The
        // cmake crate passes -fPIC for C and C++ only; this makes CMake add it for CUDA
        // (-Xcompiler=-fPIC) too. Without it the link fails (R_X86_64_PC32 against `stderr`
        // in ggml-cuda's objects).
        .define("CMAKE_POSITION_INDEPENDENT_CODE", "ON")
        .define(
            "GGML_OPENMP",
            if cfg!(feature = "openmp") {
                "ON"
            } else {
                "OFF"
            },
        )
        .define(
            "GGML_NATIVE",
            if target.cmake_native() { "ON" } else { "OFF" },
        )
        .profile("Release");
    if cfg!(feature = "cuda") {
        cfg.define("GGML_CUDA", "ON");
        if let Ok(archs) = std::env::var("CMAKE_CUDA_ARCHITECTURES") {
            cfg.define("CMAKE_CUDA_ARCHITECTURES", archs);
        }
    }
    if cfg!(feature = "metal") {
        cfg.define("GGML_METAL", "ON")
            .define("GGML_METAL_EMBED_LIBRARY", "ON");
    }
    if cfg!(feature = "vulkan") {
        cfg.define("GGML_VULKAN", "ON");
    }
    for var in [
        "CMAKE_CUDA_ARCHITECTURES",
        "CUDA_PATH",
        "CUDA_HOME",
        "CUDACXX",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let dst = cfg.build();
    // The level queries (src/cpu_level.rs) of a one-level CPU backend: CMake builds one.
    let manifest = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set"));
    let level = if target.cmake_native() {
        "native"
    } else {
        "portable"
    };
    cc::Build::new()
        .include(root.join("ggml").join("include"))
        .define("GGML_SYS_CPU_SINGLE", Some(format!("\"{level}\"").as_str()))
        .file(manifest.join("build").join("dispatch.c"))
        .warnings(false)
        .compile("ggml_sys_level");
    for dir in ["lib", "lib64"] {
        println!("cargo:rustc-link-search=native={}", dst.join(dir).display());
    }
    for lib in ["ggml", "ggml-base", "ggml-cpu"] {
        println!("cargo:rustc-link-lib=static={lib}");
    }
    if cfg!(feature = "cuda") {
        println!("cargo:rustc-link-lib=static=ggml-cuda");
        // lib64 in the toolkit's own installs, lib in PyPI's wheels (scripts/cuda-build-check.sh);
        // stubs/ holds libcuda.so for machines without a driver.
        if let Ok(cuda) = std::env::var("CUDA_PATH").or_else(|_| std::env::var("CUDA_HOME")) {
            for dir in ["lib64", "lib64/stubs", "lib", "lib/stubs"] {
                if Path::new(&cuda).join(dir).is_dir() {
                    println!("cargo:rustc-link-search=native={cuda}/{dir}");
                }
            }
        }
        for lib in ["cudart", "cublas", "cublasLt", "cuda"] {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    if cfg!(feature = "metal") {
        println!("cargo:rustc-link-lib=static=ggml-metal");
        println!("cargo:rustc-link-lib=static=ggml-blas");
        for fw in ["Foundation", "Metal", "MetalKit", "Accelerate"] {
            println!("cargo:rustc-link-lib=framework={fw}");
        }
    }
    if cfg!(feature = "vulkan") {
        println!("cargo:rustc-link-lib=static=ggml-vulkan");
        if let Ok(sdk) = std::env::var("VULKAN_SDK") {
            println!("cargo:rustc-link-search=native={sdk}/lib");
        }
        println!("cargo:rustc-link-lib=dylib=vulkan");
    }
    println!("cargo:rerun-if-env-changed=VULKAN_SDK");
    println!(
        "cargo:rustc-link-lib=dylib={}",
        if target.os == "macos" {
            "c++"
        } else {
            "stdc++"
        }
    );
}
