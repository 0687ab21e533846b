#!/usr/bin/env bash
# GPU check of ggml_gated_delta_net_cache (ggml-sys/upstream/patches/0001 + 0002) on a machine with CMake, a C++
# compiler and the CUDA toolkit, but no Rust.
#
#   1. on a machine with Rust:   cargo run -p xtask -- export-tree /path/to/tree
#   2. on the GPU machine:       scripts/gpu-check.sh /path/to/tree [work-dir]
#
# Builds ggml from the exported (patched) tree with -DGGML_CUDA=ON, compiles
# scripts/gpu-check/gdn_cache_check.cpp against it and runs it: the cache op on CUDA against the CPU
# over the test matrix (attention and written cache rows within 1e-5 relative, untouched rows
# untouched), plus the gathered path and the scheduler path on CUDA. Prints a summary; exits
# non-zero when the build fails or any check does.
#
# Environment:
#   CMAKE_CUDA_ARCHITECTURES  CUDA architectures to build (default: native, i.e. the GPU present)
#   GPU_CHECK_BACKEND=cpu     build without CUDA and run the CPU checks only (checks this script)
#   GPU_CHECK_CMAKE_ARGS      extra CMake arguments
#   GDN_CHECK_TOL             tolerance of the GPU comparisons (default 1e-5)
#   JOBS                      build parallelism (default: all cores)
set -euo pipefail

usage() { echo "usage: $0 EXPORTED_TREE [WORK_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
tree=$(cd "$1" && pwd) || usage
work=${2:-$tree/build-gpu-check}
backend=${GPU_CHECK_BACKEND:-cuda}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}

[ -f "$tree/ggml/include/ggml.h" ] && [ -f "$tree/CMakeLists.txt" ] ||
    { echo "$tree is not an exported llama.cpp tree (cargo run -p xtask -- export-tree DIR)" >&2; exit 2; }
grep -q ggml_gated_delta_net_cache "$tree/ggml/include/ggml.h" ||
    { echo "$tree lacks ggml_gated_delta_net_cache: export it from a build with the patch series" >&2; exit 2; }
if [ "$backend" = cuda ] && ! grep -q kernel_gated_delta_net_cache "$tree/ggml/src/ggml-metal/kernels/gated_delta_net.metal"; then
    echo "note: the tree lacks the GPU patch (0002); CUDA will report the cache op unsupported" >&2
fi

# The library configuration of an exported tree: xtask's CMAKE_FLAGS (kept there, read here).
mapfile -t tree_flags < <(sed -n '/pub const CMAKE_FLAGS/,/\];/p' "$repo/xtask/src/lib.rs" | grep -o '"-D[^"]*"' | tr -d '"')
[ ${#tree_flags[@]} -gt 0 ] || { echo "cannot read CMAKE_FLAGS from $repo/xtask/src/lib.rs" >&2; exit 2; }

case "$backend" in
    cuda)
        command -v nvcc >/dev/null || [ -n "${CUDACXX:-}" ] || [ -x /usr/local/cuda/bin/nvcc ] ||
            { echo "no CUDA toolkit found (nvcc); GPU_CHECK_BACKEND=cpu checks the script without one" >&2; exit 2; }
        [ -n "${CUDACXX:-}" ] || command -v nvcc >/dev/null || export CUDACXX=/usr/local/cuda/bin/nvcc
        backend_flags=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-native}"
                       -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF)
        check_args=()
        ;;
    cpu)
        backend_flags=(-DGGML_CUDA=OFF)
        check_args=(--cpu-only)
        ;;
    *) echo "GPU_CHECK_BACKEND must be cuda or cpu" >&2; exit 2 ;;
esac

# A small project around the tree: the checker links the `ggml` target, which brings the backends,
# include directories and CUDA libraries along.
mkdir -p "$work/project"
cat > "$work/project/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(gdn_cache_check C CXX)
add_subdirectory("${GDN_TREE}" llama.cpp EXCLUDE_FROM_ALL)
add_executable(gdn_cache_check "${GDN_CHECK_SRC}")
target_link_libraries(gdn_cache_check PRIVATE ggml)
target_compile_features(gdn_cache_check PRIVATE cxx_std_17)
EOF

echo "== configure ($backend): $tree"
cmake -S "$work/project" -B "$work/build" \
    -DGDN_TREE="$tree" -DGDN_CHECK_SRC="$here/gpu-check/gdn_cache_check.cpp" \
    "${tree_flags[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
    "${backend_flags[@]}" ${GPU_CHECK_CMAKE_ARGS:-} > "$work/configure.log" 2>&1 ||
    { tail -40 "$work/configure.log"; echo "FAIL: configure (log: $work/configure.log)"; exit 1; }

echo "== build (-j$jobs)"
cmake --build "$work/build" --target gdn_cache_check -j "$jobs" > "$work/build.log" 2>&1 ||
    { grep -E "error|Error" "$work/build.log" | head -40; echo "FAIL: build (log: $work/build.log)"; exit 1; }

echo "== run"
set +e
"$work/build/gdn_cache_check" ${check_args[@]+"${check_args[@]}"} 2>&1 | tee "$work/check.log"
rc=${PIPESTATUS[0]}
set -e
echo "== gpu-check: $( [ "$rc" -eq 0 ] && echo PASS || echo "FAIL (exit $rc)" ) (log: $work/check.log)"
exit "$rc"
