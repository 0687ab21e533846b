#!/usr/bin/env bash
# CUDA build check on a machine without a GPU or a system CUDA toolkit (issue #25, part 2).
#
#   scripts/cuda-build-check.sh [CACHE_DIR]
#
# Installs the CUDA toolkit from PyPI into CACHE_DIR (default: target/cuda-toolkit), then compiles
# and links the `cuda` feature for one GPU architecture (CMAKE_CUDA_ARCHITECTURES, default 90):
#   - ggml-sys: ggml, its CPU backend and ggml-cuda with CMake from the patched tree, so the vendor
#     patches' CUDA parts (the GDN cache kernel of ggml-sys/upstream/patches/0002) compile, and upstream's
#     block_reduce race fix (softmax.cu, llama.cpp #26385, already in the pinned tree);
#   - the root crate lfm2-engine with `cuda,llm`: its C library (cdylib + staticlib), every example
#     (gdn_bench and bench need `llm`), and so llama-sys on top of the CUDA ggml;
#   - the server's binary with `serve/cuda`.
# All in one cargo invocation (see below why); its features are unified, so serve is linked with
# the root crate's audio-engine feature (testkit) as well.
# Nothing is run; it prints the time of each stage and PASS/FAIL, and exits non-zero on failure.
#
# Which toolkit: the CUDA 12 wheels on PyPI (nvidia-cuda-nvcc-cu12, up to 12.9.86) ship ptxas and
# libnvvm only, without the nvcc driver, cicc, cudafe++, fatbinary or nvlink, so nothing can be
# compiled with them. The CUDA 13 wheels (nvidia-cuda-nvcc, -runtime, -crt, nvidia-nvvm,
# nvidia-cublas, nvidia-cuda-cccl) are a complete compiler and share one tree, nvidia/cu13/
# {bin,include,lib,nvvm}, which CMake's FindCUDAToolkit and enable_language(CUDA) accept once the
# unversioned library links exist. The versions below are one CUDA release (13.0 update 2).
#
# The driver library: there is no driver here, and the wheels carry no libcuda.so stub. ggml-cuda
# links the driver (CUDA::cuda_driver) for its virtual-memory pool (VMM) unless GGML_CUDA_NO_VMM,
# but that would leave the VMM code uncompiled and change what a GPU run does. So the script builds
# the stub the way the toolkit's own lib64/stubs/libcuda.so is made: a shared library with soname
# libcuda.so.1 that defines every cu* entry point declared in cuda.h (each returning
# CUDA_ERROR_UNKNOWN), in lib/stubs where FindCUDAToolkit and ggml-sys's build look for it. At run
# time the real driver's libcuda.so.1 is loaded instead; the stub is never run.
#
# Environment:
#   CMAKE_CUDA_ARCHITECTURES  architectures to build (default 90)
#   CUDA_CHECK_TARGET_DIR     cargo's target directory (default target/cuda-check, so the CPU build
#                             in target/ is left alone)
#   CARGO_BUILD_JOBS          build parallelism (cargo and CMake), as usual
#   PIP                       the pip to install with (default: python3 -m pip)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${1:-$repo/target/cuda-toolkit}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
target_dir=${CUDA_CHECK_TARGET_DIR:-$repo/target/cuda-check}
archs=${CMAKE_CUDA_ARCHITECTURES:-90}
pip=${PIP:-python3 -m pip}

# One CUDA release: 13.0 update 2 (cuBLAS 13.1.0 shipped with it).
requirements=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-runtime==13.0.96
    nvidia-cuda-cccl==13.0.85
    nvidia-cublas==13.1.0.3
)

stages=()
start_all=$(date +%s)
stage_start=$start_all
log_dir="$target_dir/cuda-build-check-logs"
mkdir -p "$log_dir"

stage_done() { # NAME
    local now
    now=$(date +%s)
    stages+=("$(printf '%-34s %6ss' "$1" "$((now - stage_start))")")
    stage_start=$now
}

summary() { # RESULT
    echo "== cuda-build-check: stage times"
    local s
    for s in ${stages[@]+"${stages[@]}"}; do echo "   $s"; done
    echo "   $(printf '%-34s %6ss' total "$(($(date +%s) - start_all))")"
    echo "== cuda-build-check: $1"
}

fail() { # STAGE LOG
    echo "-- last lines of $2:"
    grep -E "error|Error|undefined reference" "$2" | head -40 || true
    tail -25 "$2"
    stage_done "$1 (failed)"
    summary "FAIL: $1 (log: $2)"
    exit 1
}

# --- 1. toolkit -------------------------------------------------------------------------------
pip_dir="$cache/pip"
stamp="$pip_dir/.requirements"
want="${requirements[*]}"
cmake_bin=$(command -v cmake || true)
if [ -n "$cmake_bin" ] && ! printf '%s\n' 3.18 "$("$cmake_bin" --version | sed -n 's/^cmake version //p')" | sort -V -C; then
    echo "system cmake is older than 3.18; using PyPI's"
    cmake_bin=""
fi
if [ -z "$cmake_bin" ]; then
    want="$want cmake>=3.18,<4"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "== toolkit: installing into $pip_dir"
    rm -rf "$pip_dir"
    # shellcheck disable=SC2086 # $pip is a command line
    $pip install --no-input --disable-pip-version-check --target "$pip_dir" $want \
        > "$log_dir/pip.log" 2>&1 || fail "toolkit (pip)" "$log_dir/pip.log"
    echo "$want" > "$stamp"
else
    echo "== toolkit: cached in $pip_dir"
fi
[ -n "$cmake_bin" ] || cmake_bin="$pip_dir/cmake/data/bin/cmake"
cuda="$pip_dir/nvidia/cu13"
[ -x "$cuda/bin/nvcc" ] || { echo "no nvcc in $cuda/bin" > "$log_dir/pip.log"; fail "toolkit (layout)" "$log_dir/pip.log"; }
stage_done "toolkit (pip)"

# --- 2. layout: unversioned library links and the driver stub ----------------------------------
lib="$cuda/lib"
# nvcc's profile and FindCUDAToolkit look in lib64 (lib$(_TARGET_SIZE_)); the wheels install lib.
[ -e "$cuda/lib64" ] || ln -s lib "$cuda/lib64"
for so in cudart cublas cublasLt; do
    real=$(cd "$lib" && ls "lib$so.so."[0-9]* | sort -V | head -1)
    ln -sfn "$real" "$lib/lib$so.so"
done
mkdir -p "$lib/stubs"
if [ ! -f "$lib/stubs/libcuda.so" ] || [ "$cuda/include/cuda.h" -nt "$lib/stubs/libcuda.so" ]; then
    # Every name cuda.h declares (cuFoo) or maps a name to (#define cuFoo cuFoo_v2).
    {
        grep -oE 'CUDAAPI[[:space:]]+cu[A-Za-z0-9_]+[[:space:]]*\(' "$cuda/include/cuda.h" |
            sed -E 's/CUDAAPI[[:space:]]+//; s/[[:space:]]*\(//'
        sed -nE 's/^[[:space:]]*#[[:space:]]*define[[:space:]]+cu[A-Za-z0-9_]+[[:space:]]+(cu[A-Za-z0-9_]+)[[:space:]]*$/\1/p' \
            "$cuda/include/cuda.h"
    } | sort -u | awk '{ printf "int %s(void) { return 999; }\n", $1 }' > "$lib/stubs/libcuda-stub.c"
    [ -s "$lib/stubs/libcuda-stub.c" ] ||
        { echo "no cu* declarations found in $cuda/include/cuda.h" > "$log_dir/stub.log"; fail "driver stub" "$log_dir/stub.log"; }
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$lib/stubs/libcuda.so" "$lib/stubs/libcuda-stub.c" \
        > "$log_dir/stub.log" 2>&1 || fail "driver stub" "$log_dir/stub.log"
fi
echo "== layout: $cuda ($(grep -c . "$lib/stubs/libcuda-stub.c") driver entry points in the stub)"
stage_done "layout + driver stub"

# --- 3. cargo builds ----------------------------------------------------------------------------
export CUDA_PATH="$cuda" CUDA_HOME="$cuda" CUDAToolkit_ROOT="$cuda" CUDACXX="$cuda/bin/nvcc"
export CMAKE="$cmake_bin" CMAKE_CUDA_ARCHITECTURES="$archs" CARGO_TARGET_DIR="$target_dir"
export PATH="$cuda/bin:$PATH"
# The linker resolves libcublas's own DT_NEEDED (libcublasLt.so.13) through these, not -L.
export LD_LIBRARY_PATH="$lib:$lib/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== nvcc: $("$CUDACXX" --version | tail -2 | head -1); cmake: $("$CMAKE" --version | head -1); archs: $archs"

cd "$repo"
# One cargo invocation for everything: a second one with other packages selected (`-p lfm2-audio-serve` alone)
# resolves other features for the build scripts' own dependencies (cc, libc), which gives ggml-sys
# another OUT_DIR and compiles ggml-cuda again (75 minutes here). --timings gives the CMake part's
# own time.
name="C library + examples (cuda,llm) + serve (cuda)"
log="$log_dir/cargo.log"
args=(-p lfm2-engine -p lfm2-audio-serve --features lfm2-engine/cuda,lfm2-engine/llm,lfm2-audio-serve/cuda --lib --bins --examples)
echo "== $name: cargo build ${args[*]}"
cargo build "${args[@]}" --timings > "$log" 2>&1 || fail "$name" "$log"
stage_done "$name"
# The build script run of ggml-sys (CMake: ggml, ggml-cpu, ggml-cuda) from cargo's timing report.
while read -r line; do stages+=("  $line"); done < <(python3 - "$target_dir/cargo-timings/cargo-timing.html" <<'PY' || true
import json, re, sys
html = open(sys.argv[1]).read()
m = re.search(r"const UNIT_DATA = (\[.*?\]);", html, re.S)
for u in json.loads(m.group(1)) if m else []:
    if u.get("name") in ("lfm2-ggml-sys", "lfm2-llama-sys") and "run" in u.get("target", ""):
        print(f"of which {u['name'] + ' build script':<29} {u['duration']:6.0f}s")
PY
)

summary PASS
