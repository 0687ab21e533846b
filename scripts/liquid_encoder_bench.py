#!/usr/bin/env python3
"""Times liquid-audio's audio-input path (log-mel features, FastConformer, adapter) at the
published LFM2.5-Audio-1.5B size with random weights, on the CPU in float32: the other side of
issue #12's encoder target ("the 10 s encode >= 1.5x faster than liquid-audio").

Setup (dev-time only; CI has no Python). liquid-audio 1.3.0 needs Python >= 3.12 (the machines'
pyenv has one; the system python3 is 3.11). It pulls torch with CUDA libraries (~6 GB, ~2 min);
they are unused here:

    ~/.pyenv/versions/3.12.1/bin/python3 -m venv ~/.cache/lfm2-engine/liquid-venv
    ~/.cache/lfm2-engine/liquid-venv/bin/pip install liquid-audio==1.3.0

How the bench calls it: `cargo run --release --features llm --example bench -- --encoder-only`
finds that venv's python (`$XDG_CACHE_HOME`, else `~/.cache`, + `lfm2-engine/liquid-venv`; or
`--liquid-python PATH`), writes the very WAV bytes its own encoder measured to a temporary file
and starts

    python scripts/liquid_encoder_bench.py --wav Q.wav --threads N --serve

then alternates one timed run of ours with one of this script's (it writes `1` on stdin, this
script answers one JSON line per request), so that the machine's drifting load hits both sides
alike; the ratio liquid-audio / ours comes from medians taken in that one run.

Standalone (one warm-up, then `--reps` timed runs, one JSON line on stdout, the rest on stderr):

    python scripts/liquid_encoder_bench.py --seconds 10 --threads 2 --reps 5

    {"liquid_audio_version": "1.3.0", "torch_version": ..., "threads": 2, "audio_s": 10.0,
     "frames": 126, "median_s": ..., "runs_s": [...], "features_median_s": ...,
     "encoder_median_s": ...}

(`encoder_median_s` is the encoder and adapter together; `median_s` is features + encoder +
adapter, each run timed as a whole.)

What is built, and why this way:
- No checkpoint can be downloaded, and liquid-audio ships no config of its own (from_pretrained
  reads the Hugging Face folder's config.json). The configuration below is the published one as
  audio-engine's synthetic package writes it (audio-engine/src/lfm2_audio/tooling/synthetic/mod.rs
  `config_json`, at examples/common/full.rs `full_config`'s sizes), and its sizes are those of the
  published state dict (shared/reference/lfm2-audio-hf-state-dict.txt): 128 mels, dw_striding x8
  with 256 channels (pre_encode.out [512, 4096]), d_model 512, 17 layers, 8 heads (pos_bias
  [8, 64]), ff 2048, conv kernel 9, adapter 512 -> 2048 -> 2048. The script checks the built
  modules' parameter shapes against those (`check_shapes`).
- Features: `AudioToMelSpectrogramPreprocessor(**asdict(PreprocessorConfig(...)))`, exactly as
  `LFM2AudioProcessor.__init__` builds `processor.audio`, called as `ChatState.add_audio` calls
  it (all floor(n/160)+1 frames are fed as valid).
- Encoder and adapter: `ConformerEncoder(**asdict(ConformerEncoderConfig(...)))` and
  `MLP(conformer._feat_out, 2048, [2048])`, exactly as `LFM2AudioModel.__init__` builds
  `self.conformer` and `self.audio_adapter`, run as `LFM2AudioModel._prefill` runs them for one
  audio (conformer on [1, 128, T] with its length, frames past the output length dropped,
  adapter on the rest). The whole LFM2AudioModel is not built: its backbone and depthformer
  (~1.5 B parameters, ~6 GB in float32) are not on this path.
- Random weights: PyTorch's default initialisation (seeded), with the zero-initialised
  `pos_bias_u/v` set to small random values, and the modules in eval mode (no dropout, no
  dither, BatchNorm on its running statistics), as the demo runs the model (`.eval()`).
- float32 on the CPU, `torch.set_num_threads(--threads)`, under `torch.inference_mode()`.
"""

import argparse
import importlib.metadata
import json
import math
import os
import statistics
import sys
import time
import wave
from dataclasses import asdict

# why: nothing here needs a GPU; keep torch from probing one.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import torch  # noqa: E402

from liquid_audio.model.conformer.encoder import ConformerEncoder, ConformerEncoderConfig  # noqa: E402
from liquid_audio.model.conformer.processor import AudioToMelSpectrogramPreprocessor  # noqa: E402
from liquid_audio.model.mlp import MLP  # noqa: E402
from liquid_audio.processor import PreprocessorConfig  # noqa: E402
from liquid_audio.utils import mel2emb_len  # noqa: E402

RATE = 16_000
BACKBONE_WIDTH = 2048  # lfm.hidden_size of LFM2.5-Audio-1.5B

PREPROCESSOR = PreprocessorConfig(
    sample_rate=RATE,
    normalize="per_feature",
    window_size=0.025,
    window_stride=0.01,
    window="hann",
    features=128,
    n_fft=512,
    log=True,
    frame_splicing=1,
    dither=1e-5,
    pad_to=0,
    pad_value=0.0,
)

ENCODER = ConformerEncoderConfig(
    feat_in=128,
    feat_out=-1,
    n_layers=17,
    d_model=512,
    subsampling="dw_striding",
    subsampling_factor=8,
    subsampling_conv_channels=256,
    causal_downsampling=False,
    reduction=None,
    reduction_position=None,
    reduction_factor=1,
    ff_expansion_factor=4,
    self_attention_model="rel_pos",
    n_heads=8,
    att_context_size=[-1, -1],
    xscaling=False,
    untie_biases=True,
    pos_emb_max_len=5000,
    conv_kernel_size=9,
    conv_norm_type="batch_norm",
    conv_context_size=None,
    dropout=0.1,
    dropout_pre_encoder=0.1,
    dropout_emb=0.0,
    dropout_att=0.1,
)

# Shapes of the published state dict (shared/reference/lfm2-audio-hf-state-dict.txt), with the
# `conformer.` / `audio_adapter.` prefixes dropped.
PUBLISHED_SHAPES = {
    "conformer": {
        "pre_encode.conv.0.weight": (256, 1, 3, 3),
        "pre_encode.conv.2.weight": (256, 1, 3, 3),
        "pre_encode.conv.3.weight": (256, 256, 1, 1),
        "pre_encode.conv.5.weight": (256, 1, 3, 3),
        "pre_encode.conv.6.weight": (256, 256, 1, 1),
        "pre_encode.out.weight": (512, 4096),
        "layers.16.feed_forward1.linear1.weight": (2048, 512),
        "layers.16.feed_forward2.linear2.weight": (512, 2048),
        "layers.16.conv.pointwise_conv1.weight": (1024, 512, 1),
        "layers.16.conv.depthwise_conv.weight": (512, 1, 9),
        "layers.16.self_attn.pos_bias_u": (8, 64),
        "layers.16.self_attn.linear_q.weight": (512, 512),
        "layers.16.self_attn.linear_pos.weight": (512, 512),
    },
    "audio_adapter": {
        "model.0.weight": (512,),
        "model.1.weight": (2048, 512),
        "model.3.weight": (2048, 2048),
    },
}
PUBLISHED_LAYERS = 17


def log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def read_wav(path: str) -> torch.Tensor:
    """16 kHz mono 16-bit PCM as [1, n] float32 in [-1, 1) (sample / 32768, as the engine reads
    it)."""
    with wave.open(path, "rb") as w:
        if w.getframerate() != RATE or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise SystemExit(
                f"{path}: need 16 kHz mono 16-bit PCM, got {w.getframerate()} Hz, "
                f"{w.getnchannels()} channel(s), {8 * w.getsampwidth()} bits"
            )
        raw = w.readframes(w.getnframes())
    x = torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.float32) / 32768.0
    return x.unsqueeze(0)


def synthetic_wav(seconds: float) -> torch.Tensor:
    """`seconds` of deterministic audio: a gliding tone with harmonics, an envelope and a little
    noise (from a seeded generator), peak 0.5."""
    n = int(round(seconds * RATE))
    t = torch.arange(n, dtype=torch.float64) / RATE
    f0 = 120.0 + 80.0 * torch.sin(2 * math.pi * 0.3 * t)
    phase = 2 * math.pi * torch.cumsum(f0, 0) / RATE
    x = sum(torch.sin(k * phase) / k for k in range(1, 6))
    x = x * (0.6 + 0.4 * torch.sin(2 * math.pi * 3.0 * t))
    g = torch.Generator().manual_seed(7)
    x = x + 0.05 * torch.randn(n, generator=g, dtype=torch.float64)
    x = 0.5 * x / x.abs().max()
    return x.to(torch.float32).unsqueeze(0)


def check_shapes(conformer: torch.nn.Module, adapter: torch.nn.Module) -> None:
    for name, module in (("conformer", conformer), ("audio_adapter", adapter)):
        params = dict(module.named_parameters())
        for key, shape in PUBLISHED_SHAPES[name].items():
            got = tuple(params[key].shape)
            if got != shape:
                raise SystemExit(f"{name}.{key}: built {got}, published {shape}")
    if len(conformer.layers) != PUBLISHED_LAYERS:
        raise SystemExit(f"conformer: {len(conformer.layers)} layers, published {PUBLISHED_LAYERS}")


def build(seed: int):
    torch.manual_seed(seed)
    features = AudioToMelSpectrogramPreprocessor(**asdict(PREPROCESSOR)).eval()
    conformer = ConformerEncoder(**asdict(ENCODER)).eval()
    adapter = MLP(conformer._feat_out, BACKBONE_WIDTH, [BACKBONE_WIDTH]).eval()
    with torch.no_grad():
        for layer in conformer.layers:
            att = layer.self_attn
            if getattr(att, "pos_bias_u", None) is not None:
                att.pos_bias_u.normal_(0.0, 0.02)
                att.pos_bias_v.normal_(0.0, 0.02)
    check_shapes(conformer, adapter)
    n_params = sum(p.numel() for m in (conformer, adapter) for p in m.parameters())
    log(f"liquid-audio encoder + adapter: {n_params / 1e6:.1f} M parameters (float32)")
    return features, conformer, adapter


def run_once(features, conformer, adapter, wave_in: torch.Tensor):
    """One encode as ChatState.add_audio + LFM2AudioModel._prefill do it for one audio:
    (features seconds, encoder + adapter seconds, total seconds, output rows)."""
    t0 = time.perf_counter()
    length = torch.tensor([wave_in.shape[1]], dtype=torch.long)
    mel, _ = features(wave_in, length)
    audio_in = mel[0]  # [128, T]: ChatState feeds all T frames
    audio_in_lens = torch.tensor([audio_in.shape[1]], dtype=torch.long)
    t1 = time.perf_counter()
    enc, enc_len = conformer(audio_in.unsqueeze(0), audio_in_lens)
    len_mask = torch.arange(enc.shape[-1]).unsqueeze(0) < enc_len.unsqueeze(1)
    out = adapter(enc.mT[len_mask])
    t2 = time.perf_counter()
    if out.shape[0] != mel2emb_len(audio_in.shape[1]):
        raise SystemExit(f"{out.shape[0]} output rows for {audio_in.shape[1]} mel frames")
    return t1 - t0, t2 - t1, t2 - t0, out


def report(meta: dict, runs: list) -> str:
    return json.dumps(
        {
            **meta,
            "median_s": statistics.median(r[2] for r in runs),
            "runs_s": [r[2] for r in runs],
            "features_median_s": statistics.median(r[0] for r in runs),
            "encoder_median_s": statistics.median(r[1] for r in runs),
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--wav", help="16 kHz mono 16-bit PCM WAV to encode")
    src.add_argument("--seconds", type=float, default=10.0, help="seconds of synthetic audio")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--reps", type=int, default=5, help="timed runs (after one warm-up)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    ap.add_argument(
        "--serve",
        action="store_true",
        help="after the warm-up print a ready line, then answer each stdin line N with one "
        "JSON line over N timed runs (EOF ends)",
    )
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    wave_in = read_wav(a.wav) if a.wav else synthetic_wav(a.seconds)
    with torch.inference_mode():
        features, conformer, adapter = build(a.seed)
        t = time.perf_counter()
        _, _, _, out = run_once(features, conformer, adapter, wave_in)
        log(f"warm-up {time.perf_counter() - t:.3f} s; output {tuple(out.shape)}")
        if not torch.isfinite(out).all():
            log("warning: non-finite values in the output")
        meta = {
            "liquid_audio_version": importlib.metadata.version("liquid-audio"),
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
            "audio_s": wave_in.shape[1] / RATE,
            "frames": out.shape[0],
        }
        if a.serve:
            print(json.dumps({**meta, "ready": True}), flush=True)
            for line in sys.stdin:
                n = int(line.strip() or "1")
                runs = [run_once(features, conformer, adapter, wave_in) for _ in range(n)]
                print(report(meta, runs), flush=True)
            return
        runs = []
        for i in range(a.reps):
            runs.append(run_once(features, conformer, adapter, wave_in))
            log(f"run {i + 1}: {runs[-1][2]:.3f} s (features {runs[-1][0]:.3f} s)")
        print(report(meta, runs), flush=True)


if __name__ == "__main__":
    main()
