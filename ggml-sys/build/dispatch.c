/*
 * ggml-cpu.h's API for a build with ggml's CPU code compiled once per instruction-set level
 * (build/levels.rs): every function forwards to the level in use, the highest one the running
 * CPU supports, chosen at the first call (or forced before it, for tests).
 *
 * Each level's objects have every global symbol they define renamed to
 * `ggml_sys_<level>_<name>` (build/cpu.rs, nm + objcopy), so the levels coexist in one archive
 * and none of them answers to ggml's names: only this file does. ggml's base and libllama call
 * these names and so reach the chosen level.
 *
 * Compiled with GGML_SYS_CPU_SINGLE="<name>" for a one-level build (native, portable): then the
 * CPU code keeps ggml's names and this file only provides the level queries below.
 *
 * Thread-safe: the choice is one atomic pointer, set once (compare-and-swap).
 */

#include <stddef.h>
#include <string.h>

#include "ggml-cpu.h"

/* The level queries (declared for Rust in ggml-sys's src/cpu_level.rs). */
int ggml_sys_cpu_level_count(void);
const char * ggml_sys_cpu_level_name(int i);
int ggml_sys_cpu_level_runs(int i);
const char * ggml_sys_cpu_level(void);
int ggml_sys_cpu_level_force(const char * name);

#ifdef GGML_SYS_CPU_SINGLE

int ggml_sys_cpu_level_count(void) { return 1; }
const char * ggml_sys_cpu_level_name(int i) { return i == 0 ? GGML_SYS_CPU_SINGLE : NULL; }
int ggml_sys_cpu_level_runs(int i) { return i == 0; }
const char * ggml_sys_cpu_level(void) { return GGML_SYS_CPU_SINGLE; }
int ggml_sys_cpu_level_force(const char * name) {
    return strcmp(name, GGML_SYS_CPU_SINGLE) == 0 ? 0 : -1;
}

#else /* the levels */

#include "ggml_sys_levels.h"

/* ---- what the running CPU has ---------------------------------------------------------- */

/* One bit per feature (or group of features) a level can need. */
enum {
    F_SSE42 = 1 << 0,       /* SSE3, SSSE3, SSE4.1, SSE4.2 */
    F_AVX = 1 << 1,         /* AVX with the OS saving YMM state */
    F_F16C = 1 << 2,
    F_FMA = 1 << 3,
    F_AVX2 = 1 << 4,
    F_BMI2 = 1 << 5,
    F_AVX512 = 1 << 6,      /* F, CD, VL, DQ, BW with the OS saving ZMM and mask state */
    F_AVX512_VBMI = 1 << 7,
    F_AVX512_VNNI = 1 << 8,
    F_AVX512_BF16 = 1 << 9,
    F_AVX512_FP16 = 1 << 10,
    F_AVX_VNNI = 1 << 11,
    F_AMX_INT8 = 1 << 12,   /* AMX-TILE and AMX-INT8, tile state saved and (Linux) permitted */
};

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static unsigned long long xcr0(void) {
    unsigned int lo, hi;
    /* why the opcode bytes: `xgetbv` needs -mxsave to assemble by name, and this file is
     * compiled for the baseline */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long) hi << 32) | lo;
}

/* Linux hands out the AMX tile data state only on request (arch_prctl, kernel 5.16+); ggml's
 * AMX code asks too, but a level that cannot get it must not be chosen. */
static int amx_permitted(void) {
#if defined(__linux__)
    const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

static unsigned host_features(void) {
    unsigned a, b, c, d, f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        return 0;
    }
    const unsigned c1 = c;
    /* SSE3 (0), SSSE3 (9), SSE4.1 (19), SSE4.2 (20) */
    if ((c1 & 1u) && (c1 & (1u << 9)) && (c1 & (1u << 19)) && (c1 & (1u << 20))) {
        f |= F_SSE42;
    }
    /* OSXSAVE (27): XCR0 says which register state the OS saves */
    const unsigned long long x = (c1 & (1u << 27)) ? xcr0() : 0;
    const int ymm = (x & 0x6) == 0x6;             /* XMM, YMM */
    const int zmm = ymm && (x & 0xe0) == 0xe0;    /* opmask, ZMM_Hi256, Hi16_ZMM */
    const int tiles = (x & 0x60000) == 0x60000;   /* XTILECFG, XTILEDATA */
    if (ymm && (c1 & (1u << 28))) {
        f |= F_AVX;
    }
    if (f & F_AVX) {
        if (c1 & (1u << 29)) f |= F_F16C;
        if (c1 & (1u << 12)) f |= F_FMA;
    }
    if (__get_cpuid_max(0, NULL) < 7) {
        return f;
    }
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned b7 = b, c7 = c, d7 = d;
    if ((f & F_AVX) && (b7 & (1u << 5))) f |= F_AVX2;
    if (b7 & (1u << 8)) f |= F_BMI2;
    /* F (16), DQ (17), CD (28), BW (30), VL (31) */
    const unsigned avx512 = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);
    if (zmm && (b7 & avx512) == avx512) {
        f |= F_AVX512;
        if (c7 & (1u << 1)) f |= F_AVX512_VBMI;
        if (c7 & (1u << 11)) f |= F_AVX512_VNNI;
        if (d7 & (1u << 23)) f |= F_AVX512_FP16;
    }
    __cpuid_count(7, 1, a, b, c, d);
    if ((f & F_AVX) && (a & (1u << 4))) f |= F_AVX_VNNI;
    if ((f & F_AVX512) && (a & (1u << 5))) f |= F_AVX512_BF16;
    /* AMX-TILE (24), AMX-INT8 (25) */
    if (tiles && (d7 & (1u << 24)) && (d7 & (1u << 25)) && amx_permitted()) {
        f |= F_AMX_INT8;
    }
    return f;
}
#else
static unsigned host_features(void) { return 0; }
#endif

/* ---- the levels' entry points ---------------------------------------------------------- */

/* Every function of ggml-cpu.h: X(level, return type, name, parameters, arguments), and XV for
 * those returning void. build/cpu.rs checks that this list names every GGML_BACKEND_API function
 * of the patched header that ggml defines (a bump that adds one fails the build, not a link). */
#define GGML_SYS_CPU_API(X, XV, L) \
    XV(L, ggml_numa_init, (enum ggml_numa_strategy numa), (numa)) \
    X(L, bool, ggml_is_numa, (void), ()) \
    X(L, struct ggml_tensor *, ggml_new_i32, (struct ggml_context * ctx, int32_t value), (ctx, value)) \
    X(L, struct ggml_tensor *, ggml_new_f32, (struct ggml_context * ctx, float value), (ctx, value)) \
    X(L, struct ggml_tensor *, ggml_set_i32, (struct ggml_tensor * tensor, int32_t value), (tensor, value)) \
    X(L, struct ggml_tensor *, ggml_set_f32, (struct ggml_tensor * tensor, float value), (tensor, value)) \
    X(L, int32_t, ggml_get_i32_1d, (const struct ggml_tensor * tensor, int i), (tensor, i)) \
    XV(L, ggml_set_i32_1d, (const struct ggml_tensor * tensor, int i, int32_t value), (tensor, i, value)) \
    X(L, int32_t, ggml_get_i32_nd, (const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3), (tensor, i0, i1, i2, i3)) \
    XV(L, ggml_set_i32_nd, (const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value), (tensor, i0, i1, i2, i3, value)) \
    X(L, float, ggml_get_f32_1d, (const struct ggml_tensor * tensor, int i), (tensor, i)) \
    XV(L, ggml_set_f32_1d, (const struct ggml_tensor * tensor, int i, float value), (tensor, i, value)) \
    X(L, float, ggml_get_f32_nd, (const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3), (tensor, i0, i1, i2, i3)) \
    XV(L, ggml_set_f32_nd, (const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value), (tensor, i0, i1, i2, i3, value)) \
    X(L, struct ggml_threadpool *, ggml_threadpool_new, (struct ggml_threadpool_params * params), (params)) \
    XV(L, ggml_threadpool_free, (struct ggml_threadpool * threadpool), (threadpool)) \
    XV(L, ggml_threadpool_pause, (struct ggml_threadpool * threadpool), (threadpool)) \
    XV(L, ggml_threadpool_resume, (struct ggml_threadpool * threadpool), (threadpool)) \
    X(L, struct ggml_cplan, ggml_graph_plan, (const struct ggml_cgraph * cgraph, int n_threads, struct ggml_threadpool * threadpool), (cgraph, n_threads, threadpool)) \
    X(L, enum ggml_status, ggml_graph_compute, (struct ggml_cgraph * cgraph, struct ggml_cplan * cplan), (cgraph, cplan)) \
    X(L, enum ggml_status, ggml_graph_compute_with_ctx, (struct ggml_context * ctx, struct ggml_cgraph * cgraph, int n_threads), (ctx, cgraph, n_threads)) \
    X(L, int, ggml_cpu_has_sse3, (void), ()) \
    X(L, int, ggml_cpu_has_ssse3, (void), ()) \
    X(L, int, ggml_cpu_has_avx, (void), ()) \
    X(L, int, ggml_cpu_has_avx_vnni, (void), ()) \
    X(L, int, ggml_cpu_has_avx2, (void), ()) \
    X(L, int, ggml_cpu_has_bmi2, (void), ()) \
    X(L, int, ggml_cpu_has_f16c, (void), ()) \
    X(L, int, ggml_cpu_has_fma, (void), ()) \
    X(L, int, ggml_cpu_has_avx512, (void), ()) \
    X(L, int, ggml_cpu_has_avx512_vbmi, (void), ()) \
    X(L, int, ggml_cpu_has_avx512_vnni, (void), ()) \
    X(L, int, ggml_cpu_has_avx512_bf16, (void), ()) \
    X(L, int, ggml_cpu_has_amx_int8, (void), ()) \
    X(L, int, ggml_cpu_has_neon, (void), ()) \
    X(L, int, ggml_cpu_has_arm_fma, (void), ()) \
    X(L, int, ggml_cpu_has_fp16_va, (void), ()) \
    X(L, int, ggml_cpu_has_dotprod, (void), ()) \
    X(L, int, ggml_cpu_has_matmul_int8, (void), ()) \
    X(L, int, ggml_cpu_has_sve, (void), ()) \
    X(L, int, ggml_cpu_get_sve_cnt, (void), ()) \
    X(L, int, ggml_cpu_has_sme, (void), ()) \
    X(L, int, ggml_cpu_has_sme2, (void), ()) \
    X(L, int, ggml_cpu_has_riscv_v, (void), ()) \
    X(L, int, ggml_cpu_get_rvv_vlen, (void), ()) \
    X(L, int, ggml_cpu_has_vsx, (void), ()) \
    X(L, int, ggml_cpu_has_vxe, (void), ()) \
    X(L, int, ggml_cpu_has_wasm_simd, (void), ()) \
    X(L, int, ggml_cpu_has_llamafile, (void), ()) \
    X(L, const struct ggml_type_traits_cpu *, ggml_get_type_traits_cpu, (enum ggml_type type), (type)) \
    XV(L, ggml_cpu_init, (void), ()) \
    X(L, ggml_backend_t, ggml_backend_cpu_init, (void), ()) \
    X(L, bool, ggml_backend_is_cpu, (ggml_backend_t backend), (backend)) \
    XV(L, ggml_backend_cpu_set_n_threads, (ggml_backend_t backend_cpu, int n_threads), (backend_cpu, n_threads)) \
    XV(L, ggml_backend_cpu_set_threadpool, (ggml_backend_t backend_cpu, ggml_threadpool_t threadpool), (backend_cpu, threadpool)) \
    XV(L, ggml_backend_cpu_set_abort_callback, (ggml_backend_t backend_cpu, ggml_abort_callback abort_callback, void * abort_callback_data), (backend_cpu, abort_callback, abort_callback_data)) \
    XV(L, ggml_backend_cpu_set_use_ref, (ggml_backend_t backend_cpu, bool use_ref), (backend_cpu, use_ref)) \
    X(L, bool, ggml_cpu_has_q4_0_vnni, (void), ()) \
    X(L, int, ggml_backend_cpu_set_q4_0_vnni, (ggml_backend_t backend_cpu, int min_cols), (backend_cpu, min_cols)) \
    X(L, uint64_t, ggml_cpu_q4_0_vnni_calls, (void), ()) \
    X(L, int, ggml_cpu_q4_0_vnni_amx_min_cols, (void), ()) \
    X(L, uint64_t, ggml_cpu_q4_0_vnni_amx_calls, (void), ()) \
    X(L, ggml_backend_reg_t, ggml_backend_cpu_reg, (void), ()) \
    XV(L, ggml_cpu_fp32_to_fp32, (const float * x, float * y, int64_t n), (x, y, n)) \
    XV(L, ggml_cpu_fp32_to_i32, (const float * x, int32_t * y, int64_t n), (x, y, n)) \
    XV(L, ggml_cpu_fp32_to_fp16, (const float * x, ggml_fp16_t * y, int64_t n), (x, y, n)) \
    XV(L, ggml_cpu_fp16_to_fp32, (const ggml_fp16_t * x, float * y, int64_t n), (x, y, n)) \
    XV(L, ggml_cpu_fp32_to_bf16, (const float * x, ggml_bf16_t * y, int64_t n), (x, y, n)) \
    XV(L, ggml_cpu_bf16_to_fp32, (const ggml_bf16_t * x, float * y, int64_t n), (x, y, n))

/* One function pointer per entry point. */
#define MEMBER(L, ret, name, params, args) ret (*name) params;
#define MEMBER_V(L, name, params, args) void (*name) params;
struct api {
    GGML_SYS_CPU_API(MEMBER, MEMBER_V, _)
};

/* Each level's renamed entry points, and its table. */
#define DECLARE(L, ret, name, params, args) ret ggml_sys_##L##_##name params;
#define DECLARE_V(L, name, params, args) void ggml_sys_##L##_##name params;
#define ENTRY(L, ret, name, params, args) ggml_sys_##L##_##name,
#define ENTRY_V(L, name, params, args) ggml_sys_##L##_##name,
#define LEVEL_TABLE(L, needs) \
    GGML_SYS_CPU_API(DECLARE, DECLARE_V, L) \
    static const struct api api_##L = { GGML_SYS_CPU_API(ENTRY, ENTRY_V, L) };
GGML_SYS_CPU_LEVELS(LEVEL_TABLE)

struct level {
    const char * name;
    unsigned needs;
    const struct api * api;
};

#define LEVEL(L, needs) { #L, (needs), &api_##L },
static const struct level LEVELS[] = { GGML_SYS_CPU_LEVELS(LEVEL) };
#define N_LEVELS ((int) (sizeof(LEVELS) / sizeof(LEVELS[0])))

/* ---- the choice ------------------------------------------------------------------------ */

static const struct level * chosen; /* accessed only through __atomic builtins */

static unsigned host(void) {
    /* why cached: the AMX check is a system call */
    static unsigned f, known;
    if (!__atomic_load_n(&known, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&f, host_features(), __ATOMIC_RELAXED);
        __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&f, __ATOMIC_RELAXED);
}

static int runs(const struct level * l) { return (l->needs & host()) == l->needs; }

/* The level in use: the first call fixes it to the highest one this CPU runs. */
static const struct level * current(void) {
    const struct level * l = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
    if (l) {
        return l;
    }
    const struct level * best = &LEVELS[0];
    for (int i = 0; i < N_LEVELS; i++) {
        if (runs(&LEVELS[i])) {
            best = &LEVELS[i];
        }
    }
    const struct level * expected = NULL;
    if (__atomic_compare_exchange_n(&chosen, &expected, best, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return best;
    }
    return expected;
}

int ggml_sys_cpu_level_count(void) { return N_LEVELS; }

const char * ggml_sys_cpu_level_name(int i) { return i >= 0 && i < N_LEVELS ? LEVELS[i].name : NULL; }

int ggml_sys_cpu_level_runs(int i) { return i >= 0 && i < N_LEVELS && runs(&LEVELS[i]); }

const char * ggml_sys_cpu_level(void) { return current()->name; }

/* 0: `name` is (now) the level in use; -1: no such level; -2: this CPU cannot run it; -3 another
 * level is already in use (ggml's CPU code was called before). */
int ggml_sys_cpu_level_force(const char * name) {
    for (int i = 0; i < N_LEVELS; i++) {
        if (strcmp(LEVELS[i].name, name) != 0) {
            continue;
        }
        if (!runs(&LEVELS[i])) {
            return -2;
        }
        const struct level * expected = NULL;
        if (__atomic_compare_exchange_n(&chosen, &expected, &LEVELS[i], 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            return 0;
        }
        return expected == &LEVELS[i] ? 0 : -3;
    }
    return -1;
}

/* ---- ggml-cpu.h, forwarded ------------------------------------------------------------- */

#define FORWARD(L, ret, name, params, args) ret name params { return current()->api->name args; }
#define FORWARD_V(L, name, params, args) void name params { current()->api->name args; }
GGML_SYS_CPU_API(FORWARD, FORWARD_V, _)

#endif
