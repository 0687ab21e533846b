#!/usr/bin/env bash
# Builds the cargo-fuzz targets and runs each for SECONDS (default 30) from its committed seed
# corpus; fails when any target finds a crash (panic, abort, sanitizer report), a slow input
# (> 1 s) or an out-of-memory (> 2 GiB RSS). The inputs libFuzzer finds go to the ignored
# fuzz/corpus-work/<target>/, so the committed corpus stays small; a finding is saved under
# fuzz/artifacts/<target>/.
#
#   fuzz/run.sh [SECONDS] [TARGET...]      # CI: fuzz/run.sh 30
#   FUZZ_ARGS=-runs=10000000 fuzz/run.sh 1800 gguf    # a long run: 10M execs or 30 min
#
# Toolchain: stable Rust. cargo-fuzz needs nightly flags (-Zsanitizer=address); RUSTC_BOOTSTRAP=1
# lets stable accept them, so CI needs no nightly toolchain.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-30}
shift || true
all=(wav gguf safetensors artifacts tokenizer capi serve_json)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
# -O: optimised (the engine's loops are slow unoptimised); -a: debug assertions and overflow
# checks on, so an arithmetic overflow is a finding too.
flags=(-O -a)
cargo fuzz build "${flags[@]}"
failed=()
for t in "${targets[@]}"; do
  mkdir -p "corpus-work/$t" "artifacts/$t"
  log="corpus-work/$t.log"
  echo "== $t: ${secs} s"
  # -timeout=1: an input over 1 s is a finding; -rss_limit_mb=2048: so is 2 GiB of memory.
  # shellcheck disable=SC2086
  if cargo fuzz run "${flags[@]}" "$t" "corpus-work/$t" "corpus/$t" -- \
      -max_total_time="$secs" -timeout=1 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="artifacts/$t/" ${FUZZ_ARGS:-} >"$log" 2>&1; then
    # The last status line: execs, coverage (cov) and features (ft).
    grep -E '^#[0-9]+' "$log" | tail -1 || true
    grep -E 'stat::number_of_executed_units' "$log" || true
  else
    echo "$t FAILED; the end of its log ($log):" >&2
    tail -40 "$log" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz findings in: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${secs} s each, no findings"
