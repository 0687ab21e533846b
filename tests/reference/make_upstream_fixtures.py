#!/usr/bin/env python3
"""Converts the synthetic tiny LFM2-Audio checkpoint with llama.cpp's own converter
(`convert_hf_to_gguf.py`) and writes the result, split into small parts, to
audio-engine/tests/fixtures/upstream/.

Dev-time only (CI has no Python). Made with:

- llama-cpp-python 0.3.36 (PyPI sdist), which vendors llama.cpp at ggml-org commit
  0c1e57098bba43ac29e6e3b677cdceebdd22334f with a runnable `convert_hf_to_gguf.py`, its
  `conversion/` package and gguf-py 0.19.0 (`vendor/llama.cpp/gguf-py`, used from the tree);
- Python 3.12.1 with torch 2.15.0+cu132 (run on the CPU), transformers 5.24.0, numpy 2.5.5,
  safetensors 0.8.0, sentencepiece 0.2.3: what `pip install liquid-audio==1.3.0` installed
  (nothing else was needed);
- the checkpoint of `audio_engine::lfm2_audio::synthetic::DEFAULT_SEED` (11).

The versions actually used are also recorded in manifest.json on every run. To rerun:

    pip download --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d DL
    tar xzf DL/llama_cpp_python-0.3.36.tar.gz -C DL       # never --no-binary :all:
    python3.12 -m venv venv && venv/bin/pip install liquid-audio==1.3.0
    cargo run -p lfm2-audio-engine --example make_tiny_checkpoint -- /tmp/lfm2_tiny --seed 11
    venv/bin/python tests/reference/make_upstream_fixtures.py /tmp/lfm2_tiny \
        DL/llama_cpp_python-0.3.36 audio-engine/tests/fixtures/upstream

What it does
------------
1. Copies the checkpoint and sets ONLY the config fields upstream's converter needs to pick its
   model classes and the detokenizer's head width (the synthetic generator writes liquid-audio's
   fields; liquid-audio and our converter do not read these):
   - config.json: `architectures = ["Lfm2AudioForConditionalGeneration"]` (LFM2AudioModel, the
     `--mmproj` class) and `lfm.architectures = ["Lfm2ForCausalLM"]` (the backbone's class);
   - audio_detokenizer/config.json: `architectures = ["Lfm25AudioTokenizer"]` and
     `output_size = 1282` (the `lin` head's width, written as `lfm2.embedding_length_out`).
2. Runs the vendored converter three times per type, `--outtype f32` and `--outtype f16`, each
   with `--model-name Tiny` (our tests convert with that name; without it upstream names each
   file after its directory):
       convert_hf_to_gguf.py CKPT                   -> Tiny-<T>.gguf            (backbone)
       convert_hf_to_gguf.py CKPT --mmproj          -> mmproj-Tiny-<T>.gguf
       convert_hf_to_gguf.py CKPT/audio_detokenizer -> tokenizer-Tiny-<T>.gguf  (detokenizer)
   (<T> = F32, F16; the package loader's naming). Upstream has no released vocoder converter;
   the tests pair these files with our converter's vocoder.
   Two things the tiny checkpoint trips over are patched in the converter's process (its
   files are not modified), each a no-op for the published checkpoint:
   - `TextModel.get_vocab_base_pre` identifies the BPE pre-tokenizer by a hash of a test
     string's tokens; the synthetic 640-token vocabulary has an unknown hash, so where the
     original raises NotImplementedError the patch answers "lfm2" (the published 65536-token
     LFM2 vocabulary hashes to "lfm2").
   - The mmproj tensor-name table is built for `block_count` = encoder layers (17 published, 2
     here), and it also maps `conformer.pre_encode.conv.{bid}` (bid up to 6) and
     `audio_adapter.model.{bid}` (up to 3) through `{bid}`; with 2 layers those names are
     unmappable. The patch builds the MMPROJ table for max(block_count, 7) blocks: block
     names >= 2 do not occur in the checkpoint, and `clip.audio.block_count` is unchanged.
3. The six files total ~53 MB (mostly random F32/F16 matrices), too large to commit. Each is
   split so that it can be rebuilt byte for byte:
   - `<file>.part`: the file's bytes before the tensor data (header, metadata, tensor infos,
     alignment padding), then the data of every tensor of at most 8 KiB (norms, biases,
     convolutions, the folded batch norms), in file order;
   - manifest.json: per file its size and SHA-256, the head length, and per tensor (file
     order) name, ggml type, shape, absolute offset, byte length, SHA-256 and whether its data
     is in the part. Bytes between tensors are zero (checked here).
   A larger tensor is taken from our converter's file of the same checkpoint and type
   (audio-engine/tests/common/upstream.rs), which only works because its bytes equal
   upstream's: its SHA-256 and then the rebuilt file's SHA-256 are checked, so a rebuilt
   file is upstream's file or the test fails naming the tensor. Every split is checked here
   by rebuilding from the part and the original's large tensors.
   manifest.json also records the checkpoint's `file_digest`s (as make_reference.py computes
   them) so the tests can tell a stale fixture from a converter change.

The torch build used here computes float32 `torch.sqrt` within 1 ulp instead of correctly
rounded (8 of 64 elements per tensor), so the mmproj's folded batch norms (`a.blk.N.conv_norm.{weight,bias}`,
`w / sqrt(var + eps)`, `b - mean * scale`) differ from an IEEE computation (ours) by at most
1.5e-7 of each tensor's largest value; they are small tensors and stored verbatim.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import runpy
import shutil
import subprocess
import sys
import tempfile

MODEL_NAME = "Tiny"
SMALL_TENSOR = 8 * 1024
# (file name prefix, converter arguments after the checkpoint, checkpoint subdirectory)
RUNS = [
    ("", [], ""),
    ("mmproj-", ["--mmproj"], ""),
    ("tokenizer-", [], "audio_detokenizer"),
]
TYPES = [("f32", "F32"), ("f16", "F16")]


def file_digest(path: pathlib.Path) -> str:
    """make_reference.py's digest (see there); the tests compare it with the reference's."""
    import numpy as np

    raw = path.read_bytes()
    raw += b"\0" * (-len(raw) % 8)
    w = np.frombuffer(raw, dtype="<u8")
    k = np.arange(len(w), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return f"{int(np.sum(w * k, dtype=np.uint64)):016x}"


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def run_converter(tree: pathlib.Path, args: list[str]) -> None:
    """In this (child) process: patch the two tiny-checkpoint issues, run convert_hf_to_gguf."""
    sys.path.insert(0, str(tree / "gguf-py"))
    sys.path.insert(0, str(tree))
    import gguf
    import conversion.base as base

    original_pre = base.TextModel.get_vocab_base_pre

    def vocab_base_pre(self, tokenizer):
        try:
            return original_pre(self, tokenizer)
        except NotImplementedError:
            return "lfm2"

    base.TextModel.get_vocab_base_pre = vocab_base_pre

    original_map = gguf.get_tensor_name_map

    def tensor_name_map(arch, n_blocks):
        if arch == gguf.MODEL_ARCH.MMPROJ:
            n_blocks = max(n_blocks, 7)
        return original_map(arch, n_blocks)

    gguf.get_tensor_name_map = tensor_name_map

    script = tree / "convert_hf_to_gguf.py"
    sys.argv = [str(script)] + args
    runpy.run_path(str(script), run_name="__main__")


def patch_configs(ckpt: pathlib.Path) -> None:
    p = ckpt / "config.json"
    cfg = json.loads(p.read_text())
    cfg["architectures"] = ["Lfm2AudioForConditionalGeneration"]
    cfg["lfm"]["architectures"] = ["Lfm2ForCausalLM"]
    p.write_text(json.dumps(cfg, indent=2) + "\n")
    p = ckpt / "audio_detokenizer" / "config.json"
    cfg = json.loads(p.read_text())
    cfg["architectures"] = ["Lfm25AudioTokenizer"]
    cfg["output_size"] = 1282
    p.write_text(json.dumps(cfg, indent=2) + "\n")


def split(path: pathlib.Path, out_dir: pathlib.Path, tree: pathlib.Path) -> dict:
    """Writes `<name>.part` and returns the file's manifest entry (checked by a rebuild)."""
    sys.path.insert(0, str(tree / "gguf-py"))
    import gguf

    raw = path.read_bytes()
    reader = gguf.GGUFReader(path)
    tensors = sorted(reader.tensors, key=lambda t: t.data_offset)
    head_len = tensors[0].data_offset
    part = bytearray(raw[:head_len])
    entries = []
    covered = [(0, head_len)]
    for t in tensors:
        off, n = int(t.data_offset), int(t.n_bytes)
        data = raw[off : off + n]
        stored = n <= SMALL_TENSOR
        if stored:
            part += data
        covered.append((off, off + n))
        entries.append(
            {
                "name": t.name,
                "type": t.tensor_type.name,
                "shape": [int(d) for d in t.shape],
                "offset": off,
                "nbytes": n,
                "sha256": sha256(data),
                "stored": stored,
            }
        )
    # Everything outside the head and the tensors is alignment padding, zero.
    covered.sort()
    end = 0
    for a, b in covered:
        assert raw[end:a].strip(b"\0") == b"", f"{path}: non-zero bytes between tensors"
        end = max(end, b)
    assert raw[end:].strip(b"\0") == b"", f"{path}: non-zero bytes after the last tensor"

    # Rebuild from the part and the original's large tensors, as the tests do from ours.
    rebuilt = bytearray(len(raw))
    rebuilt[:head_len] = part[:head_len]
    pos = head_len
    for e in entries:
        if e["stored"]:
            data = part[pos : pos + e["nbytes"]]
            pos += e["nbytes"]
        else:
            data = raw[e["offset"] : e["offset"] + e["nbytes"]]
        assert sha256(bytes(data)) == e["sha256"]
        rebuilt[e["offset"] : e["offset"] + e["nbytes"]] = data
    assert pos == len(part) and bytes(rebuilt) == raw, f"{path}: split does not rebuild"

    (out_dir / (path.name + ".part")).write_bytes(bytes(part))
    return {
        "size": len(raw),
        "sha256": sha256(raw),
        "head_len": head_len,
        "part_sha256": sha256(bytes(part)),
        "tensors": entries,
    }


def versions(sdist: pathlib.Path, tree: pathlib.Path) -> dict:
    import numpy
    import safetensors
    import torch
    import transformers
    import tomllib

    pkg_info = (sdist / "PKG-INFO").read_text()
    llama_cpp_python = next(
        line.split(":", 1)[1].strip()
        for line in pkg_info.splitlines()
        if line.startswith("Version:")
    )
    head = sdist / ".git" / "modules" / "vendor" / "llama.cpp" / "HEAD"
    commit = head.read_text().strip() if head.is_file() else "unknown"
    gguf_py = tomllib.loads((tree / "gguf-py" / "pyproject.toml").read_text())
    return {
        "llama_cpp_python": llama_cpp_python,
        "llama_cpp_commit": commit,
        "gguf_py": gguf_py.get("project", gguf_py.get("tool", {}).get("poetry", {}))["version"],
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": numpy.__version__,
        "safetensors": safetensors.__version__,
    }


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--run-converter":
        run_converter(pathlib.Path(sys.argv[2]), sys.argv[3:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", type=pathlib.Path, help="the tiny checkpoint (seed 11)")
    ap.add_argument("sdist", type=pathlib.Path, help="unpacked llama_cpp_python-0.3.36 sdist")
    ap.add_argument("out", type=pathlib.Path, help="audio-engine/tests/fixtures/upstream")
    ap.add_argument("--keep", type=pathlib.Path, help="also keep the full GGUF files here")
    a = ap.parse_args()
    tree = a.sdist / "vendor" / "llama.cpp"
    assert (tree / "convert_hf_to_gguf.py").is_file(), f"no converter in {tree}"
    a.out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "made_by": "tests/reference/make_upstream_fixtures.py",
        "versions": versions(a.sdist, tree),
        "model_name": MODEL_NAME,
        "checkpoint": {
            "digest_model": file_digest(a.checkpoint / "model.safetensors"),
            "digest_detokenizer": file_digest(
                a.checkpoint / "audio_detokenizer" / "model.safetensors"
            ),
            "digest_tokenizer": file_digest(a.checkpoint / "tokenizer.json"),
        },
        "config_changes": {
            "config.json": {
                "architectures": ["Lfm2AudioForConditionalGeneration"],
                "lfm.architectures": ["Lfm2ForCausalLM"],
            },
            "audio_detokenizer/config.json": {
                "architectures": ["Lfm25AudioTokenizer"],
                "output_size": 1282,
            },
        },
        "commands": [],
        "files": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        ckpt = tmp / "ckpt"
        shutil.copytree(a.checkpoint, ckpt)
        patch_configs(ckpt)
        gguf_dir = tmp / "gguf"
        gguf_dir.mkdir()
        env = dict(os.environ, PYTHONHASHSEED="0")
        for outtype, suffix in TYPES:
            for prefix, extra, sub in RUNS:
                name = f"{prefix}{MODEL_NAME}-{suffix}.gguf"
                src = ckpt / sub if sub else ckpt
                args = [str(src), *extra, "--outtype", outtype, "--model-name", MODEL_NAME,
                        "--outfile", str(gguf_dir / name)]
                manifest["commands"].append(
                    "convert_hf_to_gguf.py "
                    + " ".join(
                        ["CKPT" + (f"/{sub}" if sub else ""), *extra, "--outtype", outtype,
                         "--model-name", MODEL_NAME, "--outfile", name]
                    )
                )
                print("running", manifest["commands"][-1], flush=True)
                r = subprocess.run(
                    [sys.executable, __file__, "--run-converter", str(tree), *args],
                    env=env, capture_output=True, text=True,
                )
                if r.returncode != 0:
                    sys.stderr.write(r.stdout + r.stderr)
                    return 1
                manifest["files"][name] = split(gguf_dir / name, a.out, tree)
                if a.keep:
                    a.keep.mkdir(parents=True, exist_ok=True)
                    shutil.copy(gguf_dir / name, a.keep / name)
    (a.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in a.out.iterdir())
    print(f"wrote {a.out} ({total} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
