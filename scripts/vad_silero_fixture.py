#!/usr/bin/env python3
"""Makes the voice-activity crate's Silero VAD files from PyPI's `silero-vad` wheel:

- vad/weights/silero_vad_16k.safetensors: the 16 kHz model's weights as float16 (the default
  classifier, `voice_activity::SileroClassifier`, embeds them), with the licence beside it;
- vad/tests/fixtures/silero_reference.safetensors: a reference for the Rust implementation: a
  short espeak-ng utterance as 16-bit PCM and the speech probabilities that Silero's own ONNX
  model (`silero_vad.onnx`, run by onnxruntime the way the package's OnnxWrapper runs it) gives
  for it, 512 samples at a time.

Dev-time only (CI has no Python and does not rerun it). Made with silero-vad 6.2.3 (MIT licence,
the Silero Team), onnxruntime 1.32.0, onnx 1.23.2, numpy 2.4.6, Python 3.11, espeak-ng 1.51. To rerun:

    python3 -m venv target/vad-silero-venv
    target/vad-silero-venv/bin/pip install onnxruntime onnx numpy
    target/vad-silero-venv/bin/pip download --no-deps silero-vad==6.2.3 -d target/vad-silero-dl
    target/vad-silero-venv/bin/python scripts/vad_silero_fixture.py \
        target/vad-silero-dl/silero_vad-6.2.3-py3-none-any.whl vad

The weights are the initializers of the wheel's `silero_vad_16k_op15.onnx` (the 16 kHz branch:
stft_conv, four convolutions, one LSTM cell, the final 1x1 convolution; the wheel's
`tinygrad_model.py` spells out the forward pass), renamed as in that file. Not the wheel's
`silero_vad_16k.safetensors`: its weights differ from every ONNX model in the wheel (measured:
up to 4.0 apart, and 0.32 apart in probability), so they could not be checked against the
model the package runs. The script checks its own numpy forward pass against `silero_vad.onnx`
with the float32 and with the float16 weights and prints the differences, so the Rust test's
tolerance is a measured one.
"""

import hashlib
import json
import struct
import subprocess
import sys
import tempfile
import wave
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper

CHUNK = 512
CONTEXT = 64
TEXT = "Hello, can you hear me?"
VOICE = "en-us"
SEED = 24


# Our names (tinygrad_model.py's) for the ONNX model's initializers.
ONNX_NAMES = {
    "stft_conv.weight": "model.stft.forward_basis_buffer",
    "conv1.weight": "model.encoder.0.reparam_conv.weight",
    "conv1.bias": "model.encoder.0.reparam_conv.bias",
    "conv2.weight": "model.encoder.1.reparam_conv.weight",
    "conv2.bias": "model.encoder.1.reparam_conv.bias",
    "conv3.weight": "model.encoder.2.reparam_conv.weight",
    "conv3.bias": "model.encoder.2.reparam_conv.bias",
    "conv4.weight": "model.encoder.3.reparam_conv.weight",
    "conv4.bias": "model.encoder.3.reparam_conv.bias",
    "lstm_cell.weight_ih": "model.decoder.rnn.weight_ih",
    "lstm_cell.weight_hh": "model.decoder.rnn.weight_hh",
    "lstm_cell.bias_ih": "model.decoder.rnn.bias_ih",
    "lstm_cell.bias_hh": "model.decoder.rnn.bias_hh",
    "final_conv.weight": "model.decoder.decoder.2.weight",
    "final_conv.bias": "model.decoder.decoder.2.bias",
}


def onnx_weights(model_bytes: bytes):
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load_from_string(model_bytes).graph.initializer}
    return {ours: inits[theirs].astype("<f4") for ours, theirs in ONNX_NAMES.items()}


def write_safetensors(path: Path, tensors: dict, metadata: dict):
    dtypes = {np.dtype("<f2"): "F16", np.dtype("<f4"): "F32", np.dtype("<i2"): "I16"}
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtypes[array.dtype], "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def conv1d(x, w, b, stride=1, pad=0):
    """x [C_in, T], w [C_out, C_in, K] -> [C_out, T_out] (PyTorch's Conv1d, zero padding)."""
    x = np.pad(x, ((0, 0), (pad, pad)))
    k = w.shape[2]
    t_out = (x.shape[1] - k) // stride + 1
    cols = np.stack([x[:, i * stride : i * stride + k] for i in range(t_out)], axis=-1)  # [C_in, K, T]
    y = np.einsum("oik,ikt->ot", w, cols)
    return y if b is None else y + b[:, None]


def forward(w, chunk, state):
    """One 576-sample window (64 of context + 512 new) -> (probability, (h, c))."""
    x = np.pad(chunk, (0, CONTEXT), mode="reflect")[None, :]
    x = conv1d(x, w["stft_conv.weight"], None, stride=128)
    x = np.sqrt(x[:129] ** 2 + x[129:] ** 2)
    x = np.maximum(conv1d(x, w["conv1.weight"], w["conv1.bias"], 1, 1), 0)
    x = np.maximum(conv1d(x, w["conv2.weight"], w["conv2.bias"], 2, 1), 0)
    x = np.maximum(conv1d(x, w["conv3.weight"], w["conv3.bias"], 2, 1), 0)
    x = np.maximum(conv1d(x, w["conv4.weight"], w["conv4.bias"], 1, 1), 0)[:, 0]
    h, c = state
    gates = w["lstm_cell.weight_ih"] @ x + w["lstm_cell.bias_ih"] + w["lstm_cell.weight_hh"] @ h + w["lstm_cell.bias_hh"]
    i, f, g, o = np.split(gates, 4)
    sig = lambda v: 1 / (1 + np.exp(-v))
    c = sig(f) * c + sig(i) * np.tanh(g)
    h = sig(o) * np.tanh(c)
    y = w["final_conv.weight"][0, :, 0] @ np.maximum(h, 0) + w["final_conv.bias"][0]
    return float(sig(y)), (h, c)


def run_numpy(w, audio):
    w = {k: v.astype(np.float64) for k, v in w.items()}
    state = (np.zeros(128), np.zeros(128))
    context = np.zeros(CONTEXT)
    probs = []
    for start in range(0, len(audio), CHUNK):
        window = np.concatenate([context, audio[start : start + CHUNK]])
        p, state = forward(w, window, state)
        probs.append(p)
        context = window[-CONTEXT:]
    return np.array(probs)


def run_onnx(model_bytes, audio):
    opts = onnxruntime.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model_bytes, sess_options=opts, providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), dtype=np.float32)
    context = np.zeros((1, CONTEXT), dtype=np.float32)
    probs = []
    for start in range(0, len(audio), CHUNK):
        x = np.concatenate([context, audio[None, start : start + CHUNK].astype(np.float32)], axis=1)
        out, state = session.run(None, {"input": x, "state": state, "sr": np.array(16000, dtype=np.int64)})
        probs.append(float(out[0, 0]))
        context = x[:, -CONTEXT:]
    return np.array(probs)


def speech_input():
    """0.5 s of quiet noise, the utterance at 16 kHz (linear interpolation), 0.7 s of noise."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "u.wav"
        subprocess.run(["espeak-ng", "-v", VOICE, "-w", str(path), TEXT], check=True)
        with wave.open(str(path)) as f:
            rate = f.getframerate()
            pcm = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").astype(np.float64) / 32768
    t = np.arange(int(len(pcm) * 16000 / rate)) * rate / 16000
    speech = np.interp(t, np.arange(len(pcm)), pcm) * 0.5
    rng = np.random.default_rng(SEED)
    audio = np.concatenate([np.zeros(8000), speech, np.zeros(11200)])
    audio += rng.normal(0, 0.003, len(audio))
    audio = np.pad(audio, (0, -len(audio) % CHUNK))
    return np.round(np.clip(audio, -1, 1) * 32767).astype("<i2")


def main():
    wheel, crate = Path(sys.argv[1]), Path(sys.argv[2])
    with zipfile.ZipFile(wheel) as z:
        licence = next(z.read(n) for n in z.namelist() if n.endswith("licenses/LICENSE"))
        weights_bytes = z.read("silero_vad/data/silero_vad_16k_op15.onnx")
        onnx_bytes = z.read("silero_vad/data/silero_vad.onnx")
    weights = onnx_weights(weights_bytes)
    pcm = speech_input()
    audio = pcm.astype(np.float64) / 32768

    reference = run_onnx(onnx_bytes, audio)
    ours32 = run_numpy(weights, audio)
    weights16 = {k: v.astype("<f2") for k, v in weights.items()}
    ours16 = run_numpy({k: v.astype(np.float32) for k, v in weights16.items()}, audio)
    print(f"{len(reference)} chunks; ONNX probabilities {np.round(reference, 3).tolist()}")
    print(f"numpy, float32 weights: max |diff| vs ONNX {np.abs(ours32 - reference).max():.2e}")
    print(f"numpy, float16 weights: max |diff| vs ONNX {np.abs(ours16 - reference).max():.2e}")

    source = {
        "source": f"PyPI {wheel.name}: the initializers of silero_vad/data/silero_vad_16k_op15.onnx (as float16)",
        "source_sha256": hashlib.sha256(weights_bytes).hexdigest(),
        "licence": "MIT, Copyright (c) 2020-present Silero Team (weights/LICENSE-silero-vad)",
    }
    weights_out = crate / "weights" / "silero_vad_16k.safetensors"
    weights_out.parent.mkdir(exist_ok=True)
    write_safetensors(weights_out, weights16, source)
    (crate / "weights" / "LICENSE-silero-vad").write_bytes(licence)
    reference_meta = dict(source)
    reference_meta["reference"] = f"silero_vad.onnx under onnxruntime {onnxruntime.__version__}, 512-sample chunks with 64 of context"
    reference_meta["reference_input"] = f"espeak-ng -v {VOICE} '{TEXT}', 16 kHz, 0.5 * speech + N(0, 0.003) noise, seed {SEED}"
    reference_out = crate / "tests" / "fixtures" / "silero_reference.safetensors"
    reference_out.parent.mkdir(parents=True, exist_ok=True)
    write_safetensors(reference_out, {"input_pcm": pcm, "probability": reference.astype("<f4")}, reference_meta)
    for out in (weights_out, reference_out):
        print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
