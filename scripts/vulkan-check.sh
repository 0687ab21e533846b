#!/usr/bin/env bash
# The engine on ggml's Vulkan backend, run on Mesa's lavapipe (a software Vulkan device), against
# the CPU: audio-engine's `vulkan_ops` (each op of the LFM2-Audio graphs) and `device_engine`
# (ASR, TTS and multi-turn S2S on the tiny packages, teacher-forced component errors, caches on
# and off, the CPU-fallback report per component); the gated delta net's cache form on the device
# (ggml-sys `gdn_cache`, ggml-sys/upstream/patches/0006) and the llm decoder with its layers and recurrent
# state there (audio-engine `llm_inplace`: in place = gathered byte for byte, against the CPU).
#
#   scripts/vulkan-check.sh [--ci]
#
# --ci (what .ci/run runs, to stay inside its hour): every part but `vulkan_ops`, the op-by-op
# comparison (910 s of the cold run alone; `device_engine` compares the same graphs' components
# against the CPU, teacher-forced). Without it, all four binaries.
#
# As root on Debian 12 it installs what it needs: CMake, the Vulkan headers and loader, glslc and
# SPIRV-Headers from bookworm, and Mesa's Vulkan drivers from bookworm-backports (lavapipe from
# Mesa 22.3, bookworm's own, corrupts the heap under ggml's shaders; 25.0 does not). Elsewhere
# install the equivalents first. Prints each stage's time; exits non-zero when a test fails or
# finds no Vulkan device.
#
# Cold, lavapipe compiles every pipeline the tests use at its first dispatch (Mesa caches them in
# ~/.cache/mesa_shader_cache, and a warm run takes about a minute), and the ggml build with the
# Vulkan backend compiles ggml's shaders (about 7-9 minutes). On a 2-core machine the four test
# binaries take about 18 minutes cold in the two lanes below (BENCHMARKS.md, "Vulkan on
# lavapipe").
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
ci=0
case "${1:-}" in
  --ci) ci=1 ;;
  "") ;;
  *) echo "usage: scripts/vulkan-check.sh [--ci]" >&2; exit 2 ;;
esac
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
    # why: in CI (CI=true) a check that cannot run is a failure, as in the tests (ci-skip).
    if [ "${CI:-}" = true ]; then
      echo "vulkan-check: could not install the Vulkan packages: failed (CI=true)" >&2
      exit 1
    fi
    echo "vulkan-check: could not install the Vulkan packages: skipped" >&2
    exit 0
  fi
  stage "packages installed"
fi

# why: ggml lists CPU-type Vulkan devices (lavapipe) only when named here.
export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
# why: the tests skip without a Vulkan device; this script is there to run them on one, so a
# missing device fails it (a green run that ran nothing would hide a broken install).
export LFM2E_REQUIRE_DEVICE=1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# One build of the four test binaries (one package set and one feature set, so that ggml is
# built once); its diagnostics go to the terminal, the artifacts' JSON to a file.
# why: the parts run the test binaries themselves. A `cargo test` naming fewer test targets
# resolves other features for ggml-sys's build and compiles it again (4 minutes here).
cargo test -p lfm2-audio-engine -p lfm2-ggml-sys --locked --features lfm2-ggml-sys/vulkan,lfm2-audio-engine/vulkan \
  --test vulkan_ops --test device_engine --test gdn_cache --test llm_inplace --no-run \
  --message-format=json-render-diagnostics > "$logs/build.json"
declare -A exe dir
while read -r name path manifest; do
  exe[$name]=$path
  dir[$name]=$(dirname "$manifest")
done < <(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"], m["manifest_path"])' "$logs/build.json")
for name in device_engine gdn_cache llm_inplace vulkan_ops; do
  [ -n "${exe[$name]:-}" ] || { echo "vulkan-check: no test binary for $name" >&2; exit 1; }
done
stage "built"

# Cold (an empty Mesa shader cache), lavapipe compiles each pipeline at its first dispatch, on
# one thread per process. So the four test binaries run in two lanes at once, each lane one
# binary after the other: with ggml-sys/upstream/patches/0008, ggml waits for a CPU device without spinning,
# which leaves each process a core. Each part's output is printed when it ends; a lane stops at
# its first failing part, and the script fails when a part failed.
part() { # NAME ARGS...: runs one test binary from its package's directory, as cargo does
  local name=$1; shift
  local t0 rc
  t0=$(date +%s)
  set +e
  (cd "${dir[$name]}" && "${exe[$name]}" --test-threads=1 "$@") > "$logs/$name" 2>&1
  rc=$?
  set -e
  # one part's output at a time, whole
  {
    flock 9
    grep -v '^ggml_vulkan:' "$logs/$name" || true
    echo "vulkan-check: $name: exit $rc in $(( $(date +%s) - t0 )) s"
  } 9> "$logs/print.lock"
  [ "$rc" = 0 ] || { touch "$logs/failed"; return 1; }
}
# Lane 1: the engine's jobs and components against the CPU, then the llm decoder with its layers
# and recurrent state on the device. Lane 2: the gated delta net's cache form (ggml-sys,
# ggml-sys/upstream/patches/0006), then each op of the LFM2-Audio graphs. Measured cold on 2 cores:
# 496 + 307 s and 142 + 910 s (warm: 41 + 8 s and 5 + 1 s).
if [ "$ci" = 1 ]; then
  # The engine in one lane; the gated delta net and the llm decoder in the other (cold: about
  # 500 s and 450 s).
  part device_engine &
  { part gdn_cache --nocapture on_vulkan cache_on_the_cpu && part llm_inplace --nocapture on_vulkan; } &
else
  { part device_engine && part llm_inplace --nocapture on_vulkan; } &
  { part gdn_cache --nocapture on_vulkan cache_on_the_cpu && part vulkan_ops; } &
fi
wait
stage "all parts finished"
[ ! -e "$logs/failed" ] || exit 1
