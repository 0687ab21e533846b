#!/usr/bin/env bash
# Regenerates the committed seed corpus fuzz/corpus/<target>/ from the targets themselves: each
# writes its seeds when started with FUZZ_WRITE_SEEDS=DIR (see src/lib.rs), from the engine's
# own writers (GGUF, safetensors, WAV, reply artifacts) and the demo package, deterministically.
set -euo pipefail
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O -a
triple=$(rustc -vV | sed -n 's/^host: //p')
for t in wav gguf safetensors artifacts tokenizer capi serve_json; do
  rm -rf "corpus/$t"
  FUZZ_WRITE_SEEDS="corpus/$t" "target/$triple/release/$t" -runs=0
  echo "$t: $(ls "corpus/$t" | wc -l) seeds, $(du -sk "corpus/$t" | cut -f1) KiB"
done
