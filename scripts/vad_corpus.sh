#!/usr/bin/env bash
# Makes the labelled voice-activity corpus (espeak-ng speech, silences, white and pink noise at
# 20/10/5 dB SNR) in target/vad-corpus (or $1), then, with --eval, runs the comparison that
# BENCHMARKS.md ("Voice activity detection") reports. Deterministic for one espeak-ng version.
#   scripts/vad_corpus.sh [out dir] [--eval]
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/vad-corpus
eval=0
for arg in "$@"; do
  case "$arg" in
    --eval) eval=1 ;;
    *) out=$arg ;;
  esac
done

if ! command -v espeak-ng >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends espeak-ng
  else
    echo "espeak-ng not found: install it (Debian: apt-get install espeak-ng)" >&2
    exit 1
  fi
fi
espeak-ng --version

cargo run --locked -p voice-activity --release --example vad_corpus -- "$out"
if [ "$eval" = 1 ]; then
  cargo run --locked -p voice-activity --release --example vad_eval -- "$out"
fi
