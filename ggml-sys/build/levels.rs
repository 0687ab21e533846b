//! The instruction-set levels the default build compiles ggml's CPU code for, per target
//! architecture, lowest first. The dispatcher (build/dispatch.c) uses the highest level whose
//! features the running CPU has.
//!
//! Each level's flags name the features explicitly (as ggml's CMake variants do) rather than a
//! `-march`, so that a level never uses an instruction its check does not test. The names and
//! the feature sets follow ggml's `GGML_CPU_ALL_VARIANTS` list (ggml/src/CMakeLists.txt); the
//! set is the one whose bytes the golden digests record (the AVX2, AVX-512 and AMX variants of
//! audio-engine/tests/fixtures/golden_digests) plus the baseline and the AVX-512 level of
//! Ice Lake-class CPUs (VBMI and VNNI without BF16), which is the best that CI's machine runs.

/// One level: its name (a C identifier: it prefixes the level's symbols), its compiler flags and
/// the CPU features the dispatcher checks before using it (names of `F_*` bits in dispatch.c).
pub struct Level {
    pub name: &'static str,
    pub flags: &'static [&'static str],
    pub needs: &'static [&'static str],
}

const HASWELL_FLAGS: &[&str] = &["-msse4.2", "-mavx", "-mf16c", "-mfma", "-mavx2", "-mbmi2"];
const HASWELL_NEEDS: &[&str] = &["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2"];

// why not one -march per level: -march=icelake-server also enables features no check here tests
// (and GCC may use them anywhere); the explicit list is exactly what ggml's code selects on.
const X86_64: &[Level] = &[
    // Any x86-64 (SSE2).
    Level {
        name: "x64",
        flags: &[],
        needs: &[],
    },
    // AVX2 with FMA and F16C (Haswell, Zen 1 and later).
    Level {
        name: "haswell",
        flags: HASWELL_FLAGS,
        needs: HASWELL_NEEDS,
    },
    // AVX-512 F/CD/VL/DQ/BW with VBMI and VNNI (Ice Lake, Tiger Lake): patch 0007's column kernel.
    Level {
        name: "icelake",
        flags: &[
            "-msse4.2",
            "-mavx",
            "-mf16c",
            "-mfma",
            "-mavx2",
            "-mbmi2",
            "-mavx512f",
            "-mavx512cd",
            "-mavx512vl",
            "-mavx512dq",
            "-mavx512bw",
            "-mavx512vbmi",
            "-mavx512vnni",
        ],
        needs: &[
            "SSE42",
            "AVX",
            "F16C",
            "FMA",
            "AVX2",
            "BMI2",
            "AVX512",
            "AVX512_VBMI",
            "AVX512_VNNI",
        ],
    },
    // The same with AVX-512 BF16 (Zen 4, Cooper Lake).
    Level {
        name: "zen4",
        flags: &[
            "-msse4.2",
            "-mavx",
            "-mf16c",
            "-mfma",
            "-mavx2",
            "-mbmi2",
            "-mavx512f",
            "-mavx512cd",
            "-mavx512vl",
            "-mavx512dq",
            "-mavx512bw",
            "-mavx512vbmi",
            "-mavx512vnni",
            "-mavx512bf16",
        ],
        needs: &[
            "SSE42",
            "AVX",
            "F16C",
            "FMA",
            "AVX2",
            "BMI2",
            "AVX512",
            "AVX512_VBMI",
            "AVX512_VNNI",
            "AVX512_BF16",
        ],
    },
    // AMX-INT8 tiles, AVX-VNNI and AVX-512 FP16 (Sapphire Rapids and later Xeons). FP16 and
    // AVX-VNNI because the AMX digests were recorded from -march=native on such a Xeon, which
    // has both (FP16 changes ggml's F16 vector code).
    Level {
        name: "sapphirerapids",
        flags: &[
            "-msse4.2",
            "-mavx",
            "-mf16c",
            "-mfma",
            "-mavx2",
            "-mbmi2",
            "-mavx512f",
            "-mavx512cd",
            "-mavx512vl",
            "-mavx512dq",
            "-mavx512bw",
            "-mavx512vbmi",
            "-mavx512vnni",
            "-mavx512bf16",
            "-mavx512fp16",
            "-mavxvnni",
            "-mamx-tile",
            "-mamx-int8",
        ],
        needs: &[
            "SSE42",
            "AVX",
            "F16C",
            "FMA",
            "AVX2",
            "BMI2",
            "AVX512",
            "AVX512_VBMI",
            "AVX512_VNNI",
            "AVX512_BF16",
            "AVX512_FP16",
            "AVX_VNNI",
            "AMX_INT8",
        ],
    },
];

/// Restricts the levels to a comma-separated list of names (e.g. `x64,haswell`: a quicker build
/// that still runs anywhere); the lowest level is always kept.
pub const LEVELS_ENV: &str = "GGML_SYS_CPU_LEVELS";

/// The levels of `arch` (a `CARGO_CFG_TARGET_ARCH`) to compile, lowest first; empty where the
/// build has none (one portable level then).
pub fn for_arch(arch: &str) -> Vec<&'static Level> {
    println!("cargo:rerun-if-env-changed={LEVELS_ENV}");
    let all: &'static [Level] = match arch {
        "x86_64" => X86_64,
        _ => &[],
    };
    let Some(wanted) = std::env::var(LEVELS_ENV).ok().filter(|v| !v.is_empty()) else {
        return all.iter().collect();
    };
    let wanted: Vec<&str> = wanted.split(',').map(str::trim).collect();
    for w in &wanted {
        assert!(
            all.iter().any(|l| l.name == *w),
            "{LEVELS_ENV}: no level {w:?} on {arch} (levels: {:?})",
            all.iter().map(|l| l.name).collect::<Vec<_>>()
        );
    }
    all.iter()
        .enumerate()
        .filter(|(i, l)| *i == 0 || wanted.contains(&l.name))
        .map(|(_, l)| l)
        .collect()
}

/// The header the dispatcher includes: the compiled levels as an X-macro list
/// `X(name, required feature bits)`, lowest first.
pub fn header(levels: &[&Level]) -> String {
    let mut h = String::from(
        "/* Generated by ggml-sys's build script (build/levels.rs): the compiled levels. */\n\
         #define GGML_SYS_CPU_LEVELS(X) \\\n",
    );
    for l in levels {
        let needs = if l.needs.is_empty() {
            "0".to_owned()
        } else {
            l.needs
                .iter()
                .map(|f| format!("F_{f}"))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        h.push_str(&format!("    X({}, {needs}) \\\n", l.name));
    }
    h.push('\n');
    h
}
