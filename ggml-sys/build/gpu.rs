//! `cuda` / `metal` features: build ggml (base, CPU and the GPU backend) with CMake from the same
//! patched tree. Neither can be compiled on our CI machines; this path is kept small and mirrors
//! what `scripts/gpu-check.sh` does by hand with the exported tree.

use crate::target::Target;
use std::path::Path;

pub fn build(root: &Path, target: &Target) {
    let mut cfg = cmake::Config::new(root.join("ggml"));
    cfg.define("BUILD_SHARED_LIBS", "OFF")
        .define("GGML_BUILD_TESTS", "OFF")
        .define("GGML_BUILD_EXAMPLES", "OFF")
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
            if target.arch_flags().is_empty() {
                "OFF"
            } else {
                "ON"
            },
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
    println!("cargo:rerun-if-env-changed=CMAKE_CUDA_ARCHITECTURES");
    let dst = cfg.build();
    for dir in ["lib", "lib64"] {
        println!("cargo:rustc-link-search=native={}", dst.join(dir).display());
    }
    for lib in ["ggml", "ggml-base", "ggml-cpu"] {
        println!("cargo:rustc-link-lib=static={lib}");
    }
    if cfg!(feature = "cuda") {
        println!("cargo:rustc-link-lib=static=ggml-cuda");
        if let Ok(cuda) = std::env::var("CUDA_PATH").or_else(|_| std::env::var("CUDA_HOME")) {
            println!("cargo:rustc-link-search=native={cuda}/lib64");
            println!("cargo:rustc-link-search=native={cuda}/lib64/stubs");
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
