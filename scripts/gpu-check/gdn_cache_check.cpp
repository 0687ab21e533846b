// Checks ggml_gated_delta_net_cache (the cache-writing GATED_DELTA_NET) on a GPU backend against
// the CPU backend, on identical synthetic inputs.
//
// For every case of the matrix
//   K in {1, 3} x n_tokens in {1, 3} x n_seqs in {1, 4, 8}
//   x rows_in in plane 0, in every rollback plane 1..K-1 of the same cell, and in another cell
//   x scalar and KDA gate x H_k == H_v and H_k == H_v/2 x S_v in {16, 32, 128}
// it runs
//   cpu/gathered : get_rows -> ggml_gated_delta_net(K) -> write-back cpy into the rows
//                  slot*mem_size + head + seq, as llama.cpp's graph emits it (CPU, 4 threads)
//   cpu/cache    : ggml_gated_delta_net_cache on the CPU with 1 and 4 threads
//                  -> must equal cpu/gathered byte for byte (attention and the whole cache)
//   gpu/cache    : ggml_gated_delta_net_cache on the GPU
//                  -> attention and every written cache row within the tolerance of cpu/cache,
//                     every other cache row byte-identical to its initial contents
//   gpu/gathered : the gathered path on the GPU -> gpu/cache within the tolerance of it
//   gpu/sched    : gpu/cache through ggml_backend_sched with the GPU and the CPU backend, the
//                  cache allocated on the GPU and everything else left to the scheduler
//                  -> byte-identical to gpu/cache (the op must run where the cache lives)
//
// Tolerance: for the attention of a case and for every written cache row,
//   max_i |a_i - b_i| <= tol * max_i |b_i|   (tol = 1e-5, GDN_CHECK_TOL overrides)
//
// Usage: gdn_cache_check [--cpu-only]
//   --cpu-only: no GPU needed; runs the CPU checks only (used to check the script itself).
// Exits 0 when every check passes, 1 otherwise; prints a summary line.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

struct ctx_deleter     { void operator()(ggml_context * c) const { ggml_free(c); } };
struct buffer_deleter  { void operator()(ggml_backend_buffer_t b) const { ggml_backend_buffer_free(b); } };
struct backend_deleter { void operator()(ggml_backend_t b) const { ggml_backend_free(b); } };
struct sched_deleter   { void operator()(ggml_backend_sched_t s) const { ggml_backend_sched_free(s); } };

using ctx_ptr     = std::unique_ptr<ggml_context, ctx_deleter>;
using buffer_ptr  = std::unique_ptr<ggml_backend_buffer, buffer_deleter>;
using backend_ptr = std::unique_ptr<ggml_backend, backend_deleter>;
using sched_ptr   = std::unique_ptr<ggml_backend_sched, sched_deleter>;

constexpr int64_t H_V      = 4;
constexpr int64_t MEM_SIZE = 20; // cells per plane
constexpr int64_t HEAD     = 3;  // first cell of the ubatch

struct Case {
    int64_t K, T, n_seqs, S_v;
    int     plane; // rows_in: plane of the sequence's own cell, or -1 for another cell
    bool    kda;
    bool    hk_half;

    int64_t H_k()    const { return hk_half ? H_V / 2 : H_V; }
    int64_t D()      const { return S_v * S_v * H_V; }
    int64_t n_snap() const { return std::min(T, K); }
    int64_t n_rows() const { return MEM_SIZE * K; } // one plane per snapshot slot

    std::string name() const {
        char buf[160];
        snprintf(buf, sizeof(buf), "K=%" PRId64 " T=%" PRId64 " n_seqs=%" PRId64 " S_v=%" PRId64 " rows_in=%s%d gate=%s H_k=%s",
                 K, T, n_seqs, S_v, plane < 0 ? "cell" : "plane", plane < 0 ? 0 : plane,
                 kda ? "kda" : "scalar", hk_half ? "H_v/2" : "H_v");
        return buf;
    }
};

struct Inputs {
    std::vector<float>   q, k, v, g, beta, cache;
    std::vector<int32_t> rows_in;
    std::vector<int64_t> rows_out;
};

struct Output {
    std::vector<float> attn, cache;
};

struct Rng {
    uint64_t s;
    uint64_t next() {
        s += 0x9e3779b97f4a7c15ull;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * (float) ((next() >> 40) * (1.0 / 16777216.0)); }
};

Inputs make_inputs(const Case & c, uint64_t seed) {
    Rng rng{seed};
    Inputs in;
    const int64_t qk_n = c.S_v * c.H_k() * c.T * c.n_seqs;
    in.q.resize(qk_n);
    in.k.resize(qk_n);
    for (auto * x : {&in.q, &in.k}) {
        for (auto & e : *x) { e = rng.uniform(-1.0f, 1.0f); }
        // l2-normalised per head, as the models feed them
        for (int64_t r = 0; r < qk_n / c.S_v; ++r) {
            float ss = 0.0f;
            for (int64_t i = 0; i < c.S_v; ++i) { ss += (*x)[r*c.S_v + i] * (*x)[r*c.S_v + i]; }
            const float inv = 1.0f / std::sqrt(ss + 1e-6f);
            for (int64_t i = 0; i < c.S_v; ++i) { (*x)[r*c.S_v + i] *= inv; }
        }
    }
    in.v.resize(c.S_v * H_V * c.T * c.n_seqs);
    for (auto & e : in.v) { e = rng.uniform(-1.0f, 1.0f); }
    in.g.resize((c.kda ? c.S_v : 1) * H_V * c.T * c.n_seqs);
    for (auto & e : in.g) { e = -std::log1p(std::exp(rng.uniform(-2.0f, 2.0f))); } // -softplus: decay in (0, 1)
    in.beta.resize(H_V * c.T * c.n_seqs);
    for (auto & e : in.beta) { e = 1.0f / (1.0f + std::exp(-rng.uniform(-2.0f, 2.0f))); }
    in.cache.resize(c.D() * c.n_rows());
    for (auto & e : in.cache) { e = rng.uniform(-0.5f, 0.5f); }

    in.rows_in.resize(c.n_seqs);
    for (int64_t s = 0; s < c.n_seqs; ++s) {
        in.rows_in[s] = c.plane >= 0 ? (int32_t) (c.plane * MEM_SIZE + HEAD + s)
                                     : (int32_t) (HEAD + c.n_seqs + s); // a cell outside the ubatch
    }
    in.rows_out.resize(c.n_snap() * c.n_seqs);
    for (int64_t j = 0; j < c.n_snap(); ++j) {
        for (int64_t s = 0; s < c.n_seqs; ++s) {
            in.rows_out[j*c.n_seqs + s] = j * MEM_SIZE + HEAD + s;
        }
    }
    return in;
}

struct Graph {
    ctx_ptr      ctx;
    ggml_cgraph * gf = nullptr;
    ggml_tensor * q = nullptr, * k = nullptr, * v = nullptr, * g = nullptr, * beta = nullptr;
    ggml_tensor * cache = nullptr, * rows_in = nullptr, * rows_out = nullptr;
    ggml_tensor * out = nullptr; // attention first
};

ctx_ptr new_ctx(size_t n_tensors) {
    ggml_init_params ip = { ggml_tensor_overhead() * n_tensors + ggml_graph_overhead() + 1024, nullptr, true };
    ctx_ptr ctx(ggml_init(ip));
    if (!ctx) { fprintf(stderr, "ggml_init failed\n"); exit(2); }
    return ctx;
}

// the op inputs; the cache goes to cache_ctx (the same context unless the sched run separates it)
void add_inputs(Graph & gr, const Case & c, ggml_context * cache_ctx) {
    ggml_context * ctx = gr.ctx.get();
    gr.q        = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.S_v, c.H_k(), c.T, c.n_seqs);
    gr.k        = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.S_v, c.H_k(), c.T, c.n_seqs);
    gr.v        = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.S_v, H_V, c.T, c.n_seqs);
    gr.g        = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.kda ? c.S_v : 1, H_V, c.T, c.n_seqs);
    gr.beta     = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, H_V, c.T, c.n_seqs);
    gr.rows_in  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, c.n_seqs);
    gr.rows_out = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, c.n_snap() * c.n_seqs);
    gr.cache    = ggml_new_tensor_2d(cache_ctx, GGML_TYPE_F32, c.D(), c.n_rows());
    for (ggml_tensor * t : {gr.q, gr.k, gr.v, gr.g, gr.beta, gr.rows_in, gr.rows_out}) {
        ggml_set_input(t);
    }
}

void build_cache_op(Graph & gr, const Case & c) {
    ggml_context * ctx = gr.ctx.get();
    ggml_tensor * states = ggml_view_2d(ctx, gr.cache, c.D(), c.n_rows(), gr.cache->nb[1], 0);
    gr.out = ggml_gated_delta_net_cache(ctx, gr.q, gr.k, gr.v, gr.g, gr.beta, states, gr.rows_in, gr.rows_out, c.K, MEM_SIZE);
    ggml_set_output(gr.out);
    gr.gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gr.gf, gr.out);
}

void build_gathered(Graph & gr, const Case & c) {
    ggml_context * ctx = gr.ctx.get();
    const int64_t S_v = c.S_v, D = c.D(), n_seqs = c.n_seqs, T = c.T;
    ggml_tensor * s = ggml_get_rows(ctx, gr.cache, gr.rows_in);
    s = ggml_reshape_4d(ctx, s, S_v, S_v, H_V, n_seqs);
    gr.out = ggml_gated_delta_net(ctx, gr.q, gr.k, gr.v, gr.g, gr.beta, s, c.K);
    ggml_set_output(gr.out);
    gr.gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gr.gf, gr.out);

    const size_t  fs         = sizeof(float);
    const int64_t attn_elems = S_v * H_V * T * n_seqs;
    const size_t  row        = gr.cache->nb[1];
    if (c.K == 1) {
        ggml_tensor * new_state = ggml_view_4d(ctx, gr.out, S_v, S_v, H_V, n_seqs,
                S_v*fs, S_v*S_v*fs, S_v*S_v*H_V*fs, attn_elems*fs);
        ggml_build_forward_expand(gr.gf, ggml_cpy(ctx, new_state,
                ggml_view_2d(ctx, gr.cache, D, n_seqs, row, HEAD*row)));
    } else {
        const int64_t n_written = c.n_snap();
        ggml_tensor * src = ggml_view_3d(ctx, gr.out, D, n_seqs, n_written,
                D*fs, D*n_seqs*fs, attn_elems*fs);
        ggml_tensor * dst = ggml_view_3d(ctx, gr.cache, D, n_seqs, n_written,
                row, MEM_SIZE*row, HEAD*row);
        ggml_build_forward_expand(gr.gf, ggml_cpy(ctx, src, dst));
    }
}

void upload(const Graph & gr, const Inputs & in) {
    auto set = [](ggml_tensor * t, const void * p, size_t n) {
        if (ggml_nbytes(t) != n) { fprintf(stderr, "size mismatch for an input\n"); exit(2); }
        ggml_backend_tensor_set(t, p, 0, n);
    };
    set(gr.q, in.q.data(), in.q.size()*sizeof(float));
    set(gr.k, in.k.data(), in.k.size()*sizeof(float));
    set(gr.v, in.v.data(), in.v.size()*sizeof(float));
    set(gr.g, in.g.data(), in.g.size()*sizeof(float));
    set(gr.beta, in.beta.data(), in.beta.size()*sizeof(float));
    set(gr.cache, in.cache.data(), in.cache.size()*sizeof(float));
    set(gr.rows_in, in.rows_in.data(), in.rows_in.size()*sizeof(int32_t));
    set(gr.rows_out, in.rows_out.data(), in.rows_out.size()*sizeof(int64_t));
}

Output download(const Graph & gr, const Case & c) {
    Output o;
    o.attn.resize(c.S_v * H_V * c.T * c.n_seqs);
    o.cache.resize(c.D() * c.n_rows());
    ggml_backend_tensor_get(gr.out, o.attn.data(), 0, o.attn.size()*sizeof(float));
    ggml_backend_tensor_get(gr.cache, o.cache.data(), 0, o.cache.size()*sizeof(float));
    return o;
}

// runs on one backend with every tensor allocated in its buffer; false if the backend lacks an op
bool run_direct(ggml_backend_t be, const Case & c, const Inputs & in, bool gathered, Output & out) {
    Graph gr;
    gr.ctx = new_ctx(64);
    add_inputs(gr, c, gr.ctx.get());
    if (gathered) { build_gathered(gr, c); } else { build_cache_op(gr, c); }
    for (int i = 0; i < ggml_graph_n_nodes(gr.gf); ++i) {
        if (!ggml_backend_supports_op(be, ggml_graph_node(gr.gf, i))) {
            return false;
        }
    }
    buffer_ptr buf(ggml_backend_alloc_ctx_tensors(gr.ctx.get(), be));
    if (!buf) { fprintf(stderr, "buffer allocation failed\n"); exit(2); }
    upload(gr, in);
    if (ggml_backend_graph_compute(be, gr.gf) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "graph compute failed on %s\n", ggml_backend_name(be));
        exit(2);
    }
    out = download(gr, c);
    return true;
}

// the cache op through the scheduler: the cache is pre-allocated on `cache_be`, the rest is the
// scheduler's (inputs on the CPU, copied where needed)
Output run_sched(ggml_backend_t cache_be, const std::vector<ggml_backend_t> & backends, const Case & c, const Inputs & in) {
    ctx_ptr cache_ctx = new_ctx(4);
    Graph gr;
    gr.ctx = new_ctx(64);
    add_inputs(gr, c, cache_ctx.get());
    buffer_ptr cache_buf(ggml_backend_alloc_ctx_tensors(cache_ctx.get(), cache_be));
    build_cache_op(gr, c);

    std::vector<ggml_backend_t> bes = backends;
    sched_ptr sched(ggml_backend_sched_new(bes.data(), nullptr, (int) bes.size(), 256, false, true));
    if (!ggml_backend_sched_alloc_graph(sched.get(), gr.gf)) {
        fprintf(stderr, "sched alloc failed\n");
        exit(2);
    }
    upload(gr, in);
    if (ggml_backend_sched_graph_compute(sched.get(), gr.gf) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "sched compute failed\n");
        exit(2);
    }
    ggml_backend_t where = ggml_backend_sched_get_tensor_backend(sched.get(), gr.out);
    if (where != cache_be) {
        fprintf(stderr, "  the op ran on %s, not on %s where the cache is\n",
                where ? ggml_backend_name(where) : "?", ggml_backend_name(cache_be));
        Output bad;
        return bad;
    }
    return download(gr, c);
}

bool bytes_equal(const std::vector<float> & a, const std::vector<float> & b, size_t & n_diff) {
    n_diff = 0;
    if (a.size() != b.size()) { n_diff = std::max(a.size(), b.size()) * sizeof(float); return false; }
    const uint8_t * pa = (const uint8_t *) a.data();
    const uint8_t * pb = (const uint8_t *) b.data();
    for (size_t i = 0; i < a.size() * sizeof(float); ++i) { n_diff += pa[i] != pb[i]; }
    return n_diff == 0;
}

// max|a-b| / max|b| over [off, off+n)
double rel_err(const float * a, const float * b, size_t n) {
    double md = 0.0, mb = 0.0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(a[i])) { return INFINITY; }
        md = std::max(md, (double) std::fabs(a[i] - b[i]));
        mb = std::max(mb, (double) std::fabs(b[i]));
    }
    return mb > 0.0 ? md / mb : md;
}

struct Tally {
    int    cases = 0, failed = 0, skipped = 0;
    double worst_attn = 0.0, worst_row = 0.0;
};

// a (device) against b (reference): attention and written rows within tol, other rows untouched
bool compare_tol(const char * what, const Case & c, const Inputs & in, const Output & a, const Output & b,
                 double tol, Tally & t) {
    bool ok = true;
    if (a.attn.size() != b.attn.size() || a.cache.size() != b.cache.size()) {
        printf("  FAIL %s: missing output\n", what);
        return false;
    }
    const double ea = rel_err(a.attn.data(), b.attn.data(), a.attn.size());
    t.worst_attn = std::max(t.worst_attn, ea);
    if (!(ea <= tol)) {
        printf("  FAIL %s: attention rel err %.3g > %.3g\n", what, ea, tol);
        ok = false;
    }
    std::vector<bool> written(c.n_rows(), false);
    for (int64_t r : in.rows_out) { written[r] = true; }
    const size_t D = c.D();
    for (int64_t r = 0; r < c.n_rows(); ++r) {
        const float * pa = a.cache.data() + r*D;
        if (written[r]) {
            const double er = rel_err(pa, b.cache.data() + r*D, D);
            t.worst_row = std::max(t.worst_row, er);
            if (!(er <= tol)) {
                printf("  FAIL %s: cache row %" PRId64 " rel err %.3g > %.3g\n", what, r, er, tol);
                ok = false;
            }
        } else if (memcmp(pa, in.cache.data() + r*D, D*sizeof(float)) != 0) {
            printf("  FAIL %s: untouched cache row %" PRId64 " was modified\n", what, r);
            ok = false;
        }
    }
    return ok;
}

} // namespace

int main(int argc, char ** argv) {
    bool cpu_only = false;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--cpu-only") == 0) {
            cpu_only = true;
        } else {
            fprintf(stderr, "usage: %s [--cpu-only]\n", argv[0]);
            return 2;
        }
    }
    const double tol = getenv("GDN_CHECK_TOL") ? atof(getenv("GDN_CHECK_TOL")) : 1e-5;

    ggml_backend_load_all(); // no-op for a static build; loads the backends of a GGML_BACKEND_DL build

    backend_ptr cpu(ggml_backend_cpu_init());
    backend_ptr gpu;
    if (!cpu_only) {
        ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
        if (!dev) {
            fprintf(stderr, "no GPU device is registered (was ggml built with -DGGML_CUDA=ON?); --cpu-only skips the GPU checks\n");
            return 2;
        }
        gpu.reset(ggml_backend_dev_init(dev, nullptr));
        if (!gpu) { fprintf(stderr, "cannot initialise %s\n", ggml_backend_dev_name(dev)); return 2; }
        printf("GPU backend: %s (%s)\n", ggml_backend_name(gpu.get()), ggml_backend_dev_description(dev));
    }

    std::vector<Case> cases;
    for (int64_t S_v : {16, 32, 128})
    for (int64_t K : {1, 3})
    for (int64_t T : {1, 3})
    for (int64_t n_seqs : {1, 4, 8})
    for (int plane = -1; plane < (int) K; ++plane)
    for (bool kda : {false, true})
    for (bool hk_half : {false, true}) {
        cases.push_back({K, T, n_seqs, S_v, plane, kda, hk_half});
    }

    Tally cpu_t, gpu_t, gg_t;
    int sched_fail = 0, exact_cpu_fail = 0;
    size_t cpu_bytes_diff = 0;
    int gpu_exact_vs_gathered = 0;
    int idx = 0;
    for (const Case & c : cases) {
        ++idx;
        const Inputs in = make_inputs(c, 0x5eed0000u + (uint64_t) idx);
        bool case_ok = true;

        // CPU: cache op (1 and 4 threads) == gathered path, byte for byte
        ggml_backend_cpu_set_n_threads(cpu.get(), 4);
        Output ref;
        if (!run_direct(cpu.get(), c, in, /*gathered=*/true, ref)) { printf("CPU lacks an op\n"); return 2; }
        for (int nt : {1, 4}) {
            ggml_backend_cpu_set_n_threads(cpu.get(), nt);
            Output co;
            if (!run_direct(cpu.get(), c, in, /*gathered=*/false, co)) { printf("CPU does not support the cache op\n"); return 2; }
            size_t da = 0, dc = 0;
            const bool ok = bytes_equal(co.attn, ref.attn, da) & bytes_equal(co.cache, ref.cache, dc);
            cpu_bytes_diff += da + dc;
            if (!ok || co.cache == in.cache) {
                printf("  FAIL cpu/cache (%d threads) vs cpu/gathered: %zu attention bytes, %zu cache bytes differ%s\n",
                       nt, da, dc, co.cache == in.cache ? " (cache not modified)" : "");
                case_ok = false;
                ++exact_cpu_fail;
            }
        }
        ++cpu_t.cases;

        if (gpu) {
            ggml_backend_cpu_set_n_threads(cpu.get(), 4);
            Output gc, gg;
            if (!run_direct(gpu.get(), c, in, /*gathered=*/false, gc)) {
                // a GPU backend reports the shapes it implements (Metal: S_v in {32, 64, 128})
                ++gpu_t.skipped;
                if (c.S_v != 16) {
                    printf("  FAIL gpu does not support the cache op for S_v=%" PRId64 "\n", c.S_v);
                    case_ok = false;
                }
            } else {
                ++gpu_t.cases;
                case_ok &= compare_tol("gpu/cache vs cpu/cache", c, in, gc, ref, tol, gpu_t);
                if (run_direct(gpu.get(), c, in, /*gathered=*/true, gg)) {
                    ++gg_t.cases;
                    case_ok &= compare_tol("gpu/cache vs gpu/gathered", c, in, gc, gg, tol, gg_t);
                    size_t da = 0, dc = 0;
                    if (bytes_equal(gc.attn, gg.attn, da) & bytes_equal(gc.cache, gg.cache, dc)) {
                        ++gpu_exact_vs_gathered;
                    }
                }
                const Output gs = run_sched(gpu.get(), {gpu.get(), cpu.get()}, c, in);
                size_t da = 0, dc = 0;
                if (!(bytes_equal(gs.attn, gc.attn, da) & bytes_equal(gs.cache, gc.cache, dc))) {
                    printf("  FAIL gpu/sched vs gpu/cache: %zu attention bytes, %zu cache bytes differ\n", da, dc);
                    case_ok = false;
                    ++sched_fail;
                }
            }
        } else {
            // without a GPU: the scheduler path on the CPU alone
            ggml_backend_cpu_set_n_threads(cpu.get(), 4);
            const Output cs = run_sched(cpu.get(), {cpu.get()}, c, in);
            size_t da = 0, dc = 0;
            if (!(bytes_equal(cs.attn, ref.attn, da) & bytes_equal(cs.cache, ref.cache, dc))) {
                printf("  FAIL cpu/sched vs cpu/gathered: %zu attention bytes, %zu cache bytes differ\n", da, dc);
                case_ok = false;
                ++sched_fail;
            }
        }

        if (!case_ok) {
            printf("FAIL case %d: %s\n", idx, c.name().c_str());
            ++cpu_t.failed;
        }
    }

    const int n_failed = cpu_t.failed;
    printf("\ngdn_cache_check: %zu cases, %d failed\n", cases.size(), n_failed);
    printf("  cpu/cache vs cpu/gathered (1 and 4 threads): %zu bytes differ, %d mismatching runs\n",
           cpu_bytes_diff, exact_cpu_fail);
    if (gpu) {
        printf("  gpu/cache vs cpu/cache:     %d cases, %d skipped (unsupported), worst rel err attention %.3g, cache row %.3g (tol %.1g)\n",
               gpu_t.cases, gpu_t.skipped, gpu_t.worst_attn, gpu_t.worst_row, tol);
        printf("  gpu/cache vs gpu/gathered:  %d cases, %d byte-identical, worst rel err attention %.3g, cache row %.3g\n",
               gg_t.cases, gpu_exact_vs_gathered, gg_t.worst_attn, gg_t.worst_row);
        printf("  gpu/sched vs gpu/cache:     %d mismatching\n", sched_fail);
    } else {
        printf("  cpu/sched vs cpu/gathered:  %d mismatching (no GPU checked: --cpu-only)\n", sched_fail);
    }
    printf("%s\n", n_failed == 0 ? "PASS" : "FAIL");
    return n_failed == 0 ? 0 : 1;
}
