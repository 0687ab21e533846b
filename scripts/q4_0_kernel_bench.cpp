// Times vendor patch 0007's Q4_0 column kernel on one thread, its AVX-512 VNNI form against its
// AMX form, on random repacked weights and quantized columns of the given shape, and checks that
// both give the same bits (they must: the same integer dots and float steps per block).
//
// Build against the patched tree a cargo build leaves in ggml-sys's OUT_DIR, on a CPU with AMX
// (the AMX form is compiled only for one):
//
//   TREE="$(ls -d target/release/build/ggml-sys-*/out/llama.cpp/ggml/src/ggml-cpu | head -1)"
//   g++ -O3 -march=native -std=c++17 -I "$TREE" scripts/q4_0_kernel_bench.cpp -o /tmp/q4_0_kernel_bench
//   /tmp/q4_0_kernel_bench ROWS K COLUMNS [REPS]     # e.g. 2048 2048 81 (a prefill block)
#include "repack-q4_0-vnni.h"

#if !defined(GGML_Q4_0_VNNI_AMX)
#error "this build of the kernel has no AMX form (compile with -march=native on a CPU with AMX-INT8)"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

using namespace q4_0_vnni;

static uint16_t random_scale(std::mt19937 & g) {
    return _cvtss_sh(std::uniform_real_distribution<float>(0.001f, 0.05f)(g), 0);
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s ROWS K COLUMNS [REPS]  (ROWS a multiple of 8, K of 32)\n", argv[0]);
        return 2;
    }
    const int rows = atoi(argv[1]), k = atoi(argv[2]), cols = atoi(argv[3]);
    const int reps = argc > 4 ? atoi(argv[4]) : 20;
    if (rows <= 0 || rows % 8 || k <= 0 || k % QK || cols <= 0 || reps <= 0) {
        fprintf(stderr, "ROWS must be a positive multiple of 8, K of 32, COLUMNS and REPS positive\n");
        return 2;
    }
    if (!amx_ready()) {
        fprintf(stderr, "the OS refused this process the AMX tiles' state\n");
        return 1;
    }
    std::mt19937 g(42);
    const int nb = k / QK;
    // weights: groups of eight rows, per block eight f16 scales then 128 bytes of quants
    std::vector<uint8_t> w((size_t) rows / 8 * nb * W_GROUP_BLOCK);
    for (size_t b = 0; b < w.size() / W_GROUP_BLOCK; b++) {
        uint8_t * blk = w.data() + b * W_GROUP_BLOCK;
        for (int r = 0; r < 8; r++) {
            const uint16_t h = random_scale(g);
            memcpy(blk + 2 * r, &h, 2);
        }
        for (int i = 16; i < (int) W_GROUP_BLOCK; i++) blk[i] = g() & 0xFF;
    }
    // columns: groups of four as block_q8_0x4, the rest as block_q8_0 rows
    const int n4 = cols - cols % 4;
    std::vector<uint8_t> a((size_t) cols * nb * A_BLOCK);
    for (auto & x : a) x = g() & 0xFF;
    for (int c = 0; c < cols; c++) {
        for (int b = 0; b < nb; b++) {
            const uint8_t * d;
            int step;
            column_block(a.data(), nb, n4, c, b, &d, &step);
            const uint16_t h = random_scale(g);
            memcpy((void *) d, &h, 2);
        }
    }
    std::vector<float> vnni((size_t) cols * rows), amx((size_t) cols * rows);
    auto best_of = [&](auto f) {
        double best = 1e9;
        for (int r = 0; r < reps; r++) {
            forget_columns();
            const auto t = std::chrono::steady_clock::now();
            f();
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
        }
        return best;
    };
    const double tv = best_of([&] { gemm_vnni(k, vnni.data(), rows, w.data(), a.data(), rows, cols); });
    const double ta = best_of([&] { gemm_amx(k, amx.data(), rows, w.data(), a.data(), rows, cols); });
    size_t differ = 0;
    for (size_t i = 0; i < vnni.size(); i++) differ += memcmp(&vnni[i], &amx[i], sizeof(float)) != 0;
    const double gop = 2.0 * rows * k * cols / 1e9;
    printf("rows %d, k %d, columns %d: VNNI %.3f ms (%.0f GOP/s), AMX %.3f ms (%.0f GOP/s), AMX %.2fx; "
           "%zu of %zu outputs differ\n",
           rows, k, cols, tv * 1e3, gop / tv, ta * 1e3, gop / ta, tv / ta, differ, vnni.size());
    return differ == 0 ? 0 : 1;
}
