#!/usr/bin/env bash
# Installs the end-of-turn model's weights for `voice_activity::SmartTurn` (semantic_vad): makes a
# venv in target/smart-turn-venv with onnx and numpy, downloads the pipecat-ai wheel from PyPI
# (no dependencies), and converts its smart-turn-v3.2-cpu.onnx (BSD-2-Clause, Daily;
# vad/weights/LICENSE-smart-turn) with scripts/smart_turn_weights.py into
#   $VAD_SMART_TURN_WEIGHTS, else $XDG_CACHE_HOME/voice-activity/smart-turn-v3.2.safetensors,
#   else ~/.cache/voice-activity/smart-turn-v3.2.safetensors
# (where the crate looks), with vad/weights/LICENSE-smart-turn copied beside it. Offline from
# then on. Does nothing but the licence copy when the file is there already.
#   scripts/smart_turn_weights.sh [--force] [--fixture]
#     --fixture  also rewrite vad/tests/reference/smart_turn_reference.safetensors (needs
#                espeak-ng; installs onnxruntime in the venv too)
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: the wheel the converter and the reference were checked with.
PIPECAT_VERSION=1.14.0
force=0
fixture=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --fixture) fixture=1 ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done

if [ -n "${VAD_SMART_TURN_WEIGHTS:-}" ]; then
  out=$VAD_SMART_TURN_WEIGHTS
else
  out=${XDG_CACHE_HOME:-$HOME/.cache}/voice-activity/smart-turn-v3.2.safetensors
fi
# The model's licence travels with its weights (BSD-2-Clause asks that it be kept with them).
licence() {
  mkdir -p "$(dirname "$out")"
  cp vad/weights/LICENSE-smart-turn "$(dirname "$out")/LICENSE-smart-turn"
}
if [ -s "$out" ] && [ "$force" = 0 ] && [ "$fixture" = 0 ]; then
  licence
  echo "smart-turn weights already at $out"
  exit 0
fi

venv=target/smart-turn-venv
packages=(onnx numpy)
[ "$fixture" = 1 ] && packages+=(onnxruntime)
if ! "$venv/bin/python" -c "import ${packages[*]// /, }" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "${packages[@]}"
fi
dl=target/smart-turn-dl
wheel=$dl/pipecat_ai-$PIPECAT_VERSION-py3-none-any.whl
if [ ! -s "$wheel" ]; then
  "$venv/bin/pip" download --quiet --no-deps "pipecat-ai==$PIPECAT_VERSION" -d "$dl"
fi
args=("$wheel" "$out")
[ "$fixture" = 1 ] && args+=(--fixture vad/tests/reference)
"$venv/bin/python" scripts/smart_turn_weights.py "${args[@]}"
licence
