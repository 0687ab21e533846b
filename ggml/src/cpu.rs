//! What the CPU backend in use was compiled for: the instruction-set features ggml's kernels use.
//!
//! ggml's CPU kernels are chosen at compile time, once per instruction-set level by default (the
//! level in use is picked at run time, [`cpu_level`]; see the README's build options), and
//! kernels for different features round differently, so output bits are a function of this
//! list. Tests that pin output bits key them by [`cpu_variant`].

use ggml_sys as sys;

/// The instruction-set levels of ggml's CPU code: the one in use, and forcing one (for tests).
pub use ggml_sys::cpu_level;

/// The features ggml reports, in a fixed order: (name, query).
const FEATURES: &[(&str, unsafe extern "C" fn() -> std::os::raw::c_int)] = &[
    ("sse3", sys::ggml_cpu_has_sse3),
    ("ssse3", sys::ggml_cpu_has_ssse3),
    ("avx", sys::ggml_cpu_has_avx),
    ("avx_vnni", sys::ggml_cpu_has_avx_vnni),
    ("avx2", sys::ggml_cpu_has_avx2),
    ("bmi2", sys::ggml_cpu_has_bmi2),
    ("f16c", sys::ggml_cpu_has_f16c),
    ("fma", sys::ggml_cpu_has_fma),
    ("avx512", sys::ggml_cpu_has_avx512),
    ("avx512_vbmi", sys::ggml_cpu_has_avx512_vbmi),
    ("avx512_vnni", sys::ggml_cpu_has_avx512_vnni),
    ("avx512_bf16", sys::ggml_cpu_has_avx512_bf16),
    ("amx_int8", sys::ggml_cpu_has_amx_int8),
    ("neon", sys::ggml_cpu_has_neon),
    ("arm_fma", sys::ggml_cpu_has_arm_fma),
    ("fp16_va", sys::ggml_cpu_has_fp16_va),
    ("dotprod", sys::ggml_cpu_has_dotprod),
    ("matmul_int8", sys::ggml_cpu_has_matmul_int8),
    ("sve", sys::ggml_cpu_has_sve),
    ("sme", sys::ggml_cpu_has_sme),
    ("riscv_v", sys::ggml_cpu_has_riscv_v),
    ("vsx", sys::ggml_cpu_has_vsx),
    ("wasm_simd", sys::ggml_cpu_has_wasm_simd),
    ("llamafile", sys::ggml_cpu_has_llamafile),
];

/// The features the kernels of the CPU level in use were compiled with, in a fixed order.
pub fn cpu_features() -> Vec<&'static str> {
    FEATURES
        .iter()
        // SAFETY: each query only reports a compile-time constant (or reads CPU id registers);
        // none takes arguments or touches shared state.
        .filter(|(_, has)| unsafe { has() } != 0)
        .map(|(name, _)| *name)
        .collect()
}

/// The architecture and [`cpu_features`] as one key, e.g. `x86_64+sse3+ssse3+avx+avx2+...`.
pub fn cpu_variant() -> String {
    let mut key = std::env::consts::ARCH.to_owned();
    for f in cpu_features() {
        key.push('+');
        key.push_str(f);
    }
    key
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_variant_starts_with_the_architecture() {
        let v = super::cpu_variant();
        assert!(v.starts_with(std::env::consts::ARCH), "{v}");
        assert_eq!(v.matches('+').count(), super::cpu_features().len());
    }
}
