#!/usr/bin/env bash
# The engine on ggml's Vulkan backend, run on Mesa's lavapipe (a software Vulkan device), against
# the CPU: audio-engine's `vulkan_ops` (each op of the LFM2-Audio graphs) and `device_engine`
# (ASR, TTS and multi-turn S2S on the tiny packages, teacher-forced component errors, caches on
# and off, the CPU-fallback report per component); the gated delta net's cache form on the device
# (ggml-sys `gdn_cache`, vendor/patches/0006) and the llm decoder with its layers and recurrent
# state there (audio-engine `llm_inplace`: in place = gathered byte for byte, against the CPU).
#
#   scripts/vulkan-check.sh
#
# As root on Debian 12 it installs what it needs: CMake, the Vulkan headers and loader, glslc and
# SPIRV-Headers from bookworm, and Mesa's Vulkan drivers from bookworm-backports (lavapipe from
# Mesa 22.3, bookworm's own, corrupts the heap under ggml's shaders; 25.0 does not). Elsewhere
# install the equivalents first. Prints each stage's time; exits non-zero when a test fails.
#
# Cold, lavapipe compiles every pipeline the tests use the first time (about 9 minutes for the
# engine's files and 8 for the llm decoder's on a 2-core machine; Mesa caches them in
# ~/.cache/mesa_shader_cache, and a warm run takes about a minute), and the ggml build with the
# Vulkan backend compiles ggml's shaders (about 9 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
stage() { echo "vulkan-check: $1 after $(( $(date +%s) - start )) s"; }

if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] && grep -q bookworm /etc/os-release 2>/dev/null; then
  if ! apt-cache policy mesa-vulkan-drivers 2>/dev/null | grep -q bpo12; then
    cat > /etc/apt/sources.list.d/lfm2e-bookworm-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update || true
  fi
  if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
           cmake libvulkan-dev glslc spirv-headers &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
           -t bookworm-backports mesa-vulkan-drivers; }; then
    echo "vulkan-check: could not install the Vulkan packages: skipped" >&2
    exit 0
  fi
  stage "packages installed"
fi

# why: ggml lists CPU-type Vulkan devices (lavapipe) only when named here.
export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
# one package set and one feature set for every cargo call below, so that ggml is built once
packages=(-p audio-engine -p ggml-sys --locked --features ggml-sys/vulkan,audio-engine/vulkan)
cargo test "${packages[@]}" --test vulkan_ops --test device_engine --test gdn_cache \
  --test llm_inplace --no-run
stage "built"
# Cold (an empty Mesa shader cache), the parts took 9, 13 and 14 minutes on 2 cores (measured
# 2026-12-03: 33 minutes of tests in all; warm, 1 minute), the most telling first; the script stops at the first failing part,
# so a failure is reported even when a caller's time limit would cut the later parts.
run_part() {
  local what=$1; shift
  set +e
  cargo test "${packages[@]}" "$@" 2>&1 | grep -v '^ggml_vulkan:'
  local rc=${PIPESTATUS[0]}
  set -e
  stage "$what finished (exit $rc)"
  [ "$rc" = 0 ] || exit 1
}
run_part "device_engine" --test device_engine -- --test-threads=1
# the device cases of gdn_cache and llm_inplace (their CPU cases run in the main suite): the
# gated delta net's cache form and the llm decoder on the device
run_part "llm decoder tests" --test gdn_cache --test llm_inplace -- --test-threads=1 \
  --nocapture on_vulkan cache_on_the_cpu
run_part "vulkan_ops" --test vulkan_ops -- --test-threads=1
