//! What we compile for: read from `CARGO_CFG_*` (the target, not the host) plus two knobs.
//!
//! - `GGML_SYS_CPU=native` (default when host == target): tune for the build machine.
//! - `GGML_SYS_CPU=portable`: the target's baseline ISA only, for binaries that run anywhere.
//! - `GGML_SYS_CPU=<name>`: passed as `-march=<name>` on x86_64 (e.g. `x86-64-v3`) and
//!   `-mcpu=<name>` on aarch64.

use std::env;

pub const CPU_ENV: &str = "GGML_SYS_CPU";

pub struct Target {
    pub arch: String,
    pub os: String,
    pub env: String,
    cpu: String,
}

impl Target {
    pub fn from_env() -> Target {
        println!("cargo:rerun-if-env-changed={CPU_ENV}");
        let var = |k: &str| env::var(k).unwrap_or_default();
        let cross = var("TARGET") != var("HOST");
        let cpu = env::var(CPU_ENV)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| {
                if cross {
                    "portable".into()
                } else {
                    "native".into()
                }
            });
        Target {
            arch: var("CARGO_CFG_TARGET_ARCH"),
            os: var("CARGO_CFG_TARGET_OS"),
            env: var("CARGO_CFG_TARGET_ENV"),
            cpu,
        }
    }

    pub fn is_msvc(&self) -> bool {
        self.env == "msvc"
    }

    /// ISA flags for every C/C++ file that includes ggml's SIMD code.
    pub fn arch_flags(&self) -> Vec<String> {
        if self.is_msvc() {
            return Vec::new();
        }
        match (self.arch.as_str(), self.cpu.as_str()) {
            (_, "portable") => Vec::new(),
            ("x86_64" | "x86", cpu) => vec![format!("-march={cpu}")],
            ("aarch64", cpu) => vec![format!("-mcpu={cpu}")],
            _ => Vec::new(),
        }
    }

    /// Defines that ggml's CMake sets on every target (see ggml/src/CMakeLists.txt).
    #[cfg(not(any(feature = "cuda", feature = "metal", feature = "vulkan")))]
    pub fn base_defines(&self) -> Vec<(&'static str, Option<&'static str>)> {
        let mut d = vec![("GGML_SCHED_MAX_COPIES", Some("4")), ("NDEBUG", None)];
        match self.os.as_str() {
            "linux" | "android" => {
                d.push(("_XOPEN_SOURCE", Some("600")));
                d.push(("_GNU_SOURCE", None));
            }
            "macos" | "ios" => {
                d.push(("_XOPEN_SOURCE", Some("600")));
                d.push(("_DARWIN_C_SOURCE", None));
            }
            "freebsd" => {
                d.push(("_XOPEN_SOURCE", Some("600")));
                d.push(("__BSD_VISIBLE", None));
            }
            "windows" => d.push(("_CRT_SECURE_NO_WARNINGS", None)),
            _ => d.push(("_XOPEN_SOURCE", Some("600"))),
        }
        d
    }

    /// The architecture-specific kernels directory under ggml-cpu/arch, if ggml has one.
    #[cfg(not(any(feature = "cuda", feature = "metal", feature = "vulkan")))]
    pub fn cpu_arch_dir(&self) -> Option<&'static str> {
        match self.arch.as_str() {
            "x86_64" | "x86" => Some("x86"),
            "aarch64" | "arm" => Some("arm"),
            "riscv64" => Some("riscv"),
            "powerpc64" => Some("powerpc"),
            "s390x" => Some("s390"),
            "loongarch64" => Some("loongarch"),
            "wasm32" => Some("wasm"),
            _ => None,
        }
    }

    /// Flags llama-sys must use too, so both libraries agree on the ISA (exported as DEP_GGML_CFLAGS).
    pub fn shared_cflags(&self) -> Vec<String> {
        self.arch_flags()
    }
}
