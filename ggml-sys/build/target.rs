//! What we compile for: read from `CARGO_CFG_*` (the target, not the host) plus one knob.
//!
//! - `GGML_SYS_CPU=levels` (opt-in for now): ggml's CPU code once per instruction-set level of the
//!   target (build/levels.rs), the best one the running CPU has chosen at run time; on a target
//!   without levels (or without `nm`/`objcopy`) this is `portable`.
//! - `GGML_SYS_CPU=native` (the default when host == target; `portable` when cross-compiling):
//!   tune for the build machine (its binaries may not run elsewhere).
//! - `GGML_SYS_CPU=portable`: the target's baseline ISA only, one level.
//! - `GGML_SYS_CPU=<name>`: passed as `-march=<name>` on x86_64 (e.g. `x86-64-v3`) and
//!   `-mcpu=<name>` on aarch64.

use std::env;

pub const CPU_ENV: &str = "GGML_SYS_CPU";

pub struct Target {
    pub arch: String,
    pub os: String,
    pub env: String,
    cpu: String,
    #[cfg_attr(
        not(any(feature = "cuda", feature = "metal", feature = "vulkan")),
        allow(dead_code)
    )]
    cross: bool,
}

impl Target {
    pub fn from_env() -> Target {
        println!("cargo:rerun-if-env-changed={CPU_ENV}");
        let var = |k: &str| env::var(k).unwrap_or_default();
        // why native still the default: the levels (which run anywhere, issue 40) cost 1.5x the
        // cold build and their AMX and Zen 4 bytes are not yet checked on such a CPU; they
        // become the default once CI has run them (GGML_SYS_CPU=levels opts in).
        let cross = var("TARGET") != var("HOST");
        let cpu = env::var(CPU_ENV)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| if cross { "portable" } else { "native" }.into());
        Target {
            arch: var("CARGO_CFG_TARGET_ARCH"),
            os: var("CARGO_CFG_TARGET_OS"),
            env: var("CARGO_CFG_TARGET_ENV"),
            cpu,
            cross,
        }
    }

    pub fn is_msvc(&self) -> bool {
        self.env == "msvc"
    }

    /// Whether ggml's CPU code is compiled once per level (`GGML_SYS_CPU=levels`, the default).
    /// The cc build falls back to one portable level where the target has no levels.
    pub fn wants_levels(&self) -> bool {
        self.cpu == "levels"
    }

    /// The name the one-level build reports as its level (`native`, `portable`, or the CPU name).
    #[cfg(not(any(feature = "cuda", feature = "metal", feature = "vulkan")))]
    pub fn single_level_name(&self) -> &str {
        if self.wants_levels() {
            "portable"
        } else {
            &self.cpu
        }
    }

    /// Whether a CMake (device) build turns on GGML_NATIVE. It builds one CPU backend: by
    /// default for the build machine (as before the levels; a cross build: portable).
    #[cfg(any(feature = "cuda", feature = "metal", feature = "vulkan"))]
    pub fn cmake_native(&self) -> bool {
        if self.wants_levels() {
            !self.cross && !self.is_msvc()
        } else {
            !self.arch_flags().is_empty()
        }
    }

    /// ISA flags for ggml's base and libllama, and for the CPU code of a one-level build. The
    /// levels build compiles the base with none (the target's baseline) and adds each level's
    /// flags to its own copy of the CPU code.
    pub fn arch_flags(&self) -> Vec<String> {
        if self.is_msvc() {
            return Vec::new();
        }
        match (self.arch.as_str(), self.cpu.as_str()) {
            (_, "portable" | "levels") => Vec::new(),
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
