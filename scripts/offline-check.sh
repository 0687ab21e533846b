#!/usr/bin/env bash
# Offline builds (issue #38): everything a build needs, the pinned upstream llama.cpp package
# included, comes through cargo's own resolution (Cargo.lock), and no build script uses the network.
#
#   scripts/offline-check.sh [--keep]
#
# 1. In an empty CARGO_HOME (a temp dir; only the toolchain comes from rustup): `cargo fetch
#    --locked`; then, with the network refused (CARGO_NET_OFFLINE=true: cargo, nested calls
#    included, may not use it), build the engine library (-p lfm2-audio-engine), `serve` and the C
#    library (-p lfm2-engine). Before that, a negative check: with the pinned package taken out of
#    that cargo home, ggml-sys's build must fail with its message naming `cargo fetch`.
# 2. `cargo vendor --locked` (offline, from that cargo home) into a copy of the workspace whose
#    `.cargo/config.toml` replaces crates.io with the vendor directory; then, in a second empty
#    CARGO_HOME and offline, the same three builds in the copy.
#
# Each phase builds in its own target directory (ggml and libllama compiled afresh), so it takes
# two full builds. Prints each step's time; exits non-zero on the first failure. The temp dir is
# removed at the end unless --keep is given (or OFFLINE_CHECK_DIR names one to use).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
keep=0
[ "${1:-}" = "--keep" ] && keep=1
work=${OFFLINE_CHECK_DIR:-$(mktemp -d -t offline-check.XXXXXX)}
mkdir -p "$work"
[ $keep = 1 ] || [ -n "${OFFLINE_CHECK_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
echo "offline-check: working in $work"

# The toolchain: rustup's own cargo and rustc (rustup keeps them under RUSTUP_HOME, not CARGO_HOME).
if command -v rustup >/dev/null; then
  cargo_bin=$(rustup which cargo)
  PATH="$(dirname "$(rustup which rustc)"):$PATH"
else
  cargo_bin=$(command -v cargo)
fi
export PATH
unset CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR RUSTC_WRAPPER CARGO_BUILD_RUSTC_WRAPPER
unset GGML_SYS_LLAMA_CPP_DIR

times=()
step() { # step NAME CMD...: runs CMD, records its wall time
  local name=$1; shift
  local t0=$(date +%s)
  echo "== $name: $*"
  "$@"
  local dt=$(( $(date +%s) - t0 ))
  times+=("$(printf '%-52s %5d s' "$name" "$dt")")
  echo "== $name: $dt s"
}
pin_version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/ggml-sys/upstream/UPSTREAM.toml")
pin_package=$(sed -n 's/^package = "\(.*\)"/\1/p' "$repo/ggml-sys/upstream/UPSTREAM.toml")

# --- 1. cargo fetch, then offline builds from the fetched cargo home -----------------------------
home1="$work/cargo-home"
mkdir -p "$home1"
export CARGO_HOME="$home1"
cd "$repo"
step "cargo fetch --locked (empty CARGO_HOME)" "$cargo_bin" fetch --locked
export CARGO_NET_OFFLINE=true
target1="$work/target-fetched"

# Negative check: without the pinned package the build stops and says what to do.
aside="$work/pin-aside"
moved=()
for p in "$home1"/registry/cache/*/"$pin_package-$pin_version.crate" \
         "$home1"/registry/src/*/"$pin_package-$pin_version"; do
  [ -e "$p" ] || continue
  mkdir -p "$aside/${#moved[@]}"
  mv "$p" "$aside/${#moved[@]}/"
  moved+=("$p")
done
[ ${#moved[@]} -gt 0 ] || { echo "offline-check: cargo fetch did not bring $pin_package $pin_version" >&2; exit 1; }
log="$work/without-pin.log"
if "$cargo_bin" build --locked -p lfm2-ggml-sys --target-dir "$target1" >"$log" 2>&1; then
  echo "offline-check: ggml-sys built without the pinned package in CARGO_HOME" >&2; exit 1
fi
grep -q "run \`cargo fetch\`" "$log" || {
  echo "offline-check: the failed build does not say to run cargo fetch:" >&2; tail -30 "$log" >&2; exit 1
}
echo "== without the pinned package: the build fails and names cargo fetch (as it must)"
for i in "${!moved[@]}"; do
  mv "$aside/$i/$(basename "${moved[$i]}")" "${moved[$i]}"
done
rm -rf "$aside"

step "offline build -p lfm2-audio-engine" "$cargo_bin" build --locked -p lfm2-audio-engine --target-dir "$target1"
step "offline build -p lfm2-audio-serve" "$cargo_bin" build --locked -p lfm2-audio-serve --target-dir "$target1"
step "offline build -p lfm2-engine (C library)" "$cargo_bin" build --locked -p lfm2-engine --target-dir "$target1"

# --- 2. the same from a cargo vendor directory, in a second empty cargo home ---------------------
copy="$work/workspace-copy"
mkdir -p "$copy"
# The working tree as git sees it (tracked and untracked files, not the ignored ones).
git -C "$repo" ls-files -z --cached --others --exclude-standard \
  | (cd "$repo" && while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done) \
  | (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$copy"
cd "$copy"
step "cargo vendor --locked (offline, from the fetched home)" \
  "$cargo_bin" vendor --locked --quiet "$copy/third-party" >/dev/null
[ -f "$copy/third-party/$pin_package/.cargo-checksum.json" ] \
  || [ -f "$copy/third-party/$pin_package-$pin_version/.cargo-checksum.json" ] \
  || { echo "offline-check: cargo vendor did not copy $pin_package" >&2; exit 1; }
mkdir -p "$copy/.cargo"
cat > "$copy/.cargo/config.toml" <<'EOF'
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "third-party"
EOF
home2="$work/cargo-home-vendored"
mkdir -p "$home2"
export CARGO_HOME="$home2"
target2="$work/target-vendored"
step "vendored offline build -p lfm2-audio-engine" "$cargo_bin" build --locked -p lfm2-audio-engine --target-dir "$target2"
step "vendored offline build -p lfm2-audio-serve" "$cargo_bin" build --locked -p lfm2-audio-serve --target-dir "$target2"
step "vendored offline build -p lfm2-engine (C library)" "$cargo_bin" build --locked -p lfm2-engine --target-dir "$target2"
# Nothing was downloaded into the second home: every package came from the vendor directory.
if [ -d "$home2/registry" ]; then
  echo "offline-check: the vendored build wrote a registry into its CARGO_HOME:" >&2
  find "$home2/registry" -maxdepth 3 >&2
  exit 1
fi

echo "offline-check: PASS ($(nproc) cores)"
printf '  %s\n' "${times[@]}"
