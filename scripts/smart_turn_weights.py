#!/usr/bin/env python3
"""Converts smart-turn v3.2 (pipecat's end-of-turn model) into the voice-activity crate's own
weight file, and (with --fixture) makes the reference the Rust implementation is tested against.

The model is `smart-turn-v3.2-cpu.onnx` from PyPI's `pipecat-ai` wheel (BSD-2-Clause, Daily;
vad/weights/LICENSE-smart-turn): a Whisper-tiny encoder (two convolutions, 400 positions, four
pre-norm transformer layers of width 384, six heads) over 80-bin log-mel features of the last
8 s of 16 kHz audio, an attention pooling and a three-layer classifier giving P(turn complete).
The "cpu" file is statically quantized in ONNX's QDQ form: int8 weights with one scale per
output channel (zero points all 0), int32 biases, and a QuantizeLinear/DequantizeLinear pair
(uint8, one scale and zero point each) at 78 activations. The converted file keeps exactly
that: the int8 weights and their f32 scales, the biases dequantized to f32 (int32 * scale,
as DequantizeLinear does), the float tensors as they are, and each activation's (scale, zero
point) under a name that says where it sits in the network; `voice_activity::SmartTurn`
dequantizes the weights and applies the activation quantization (round half to even, clamp to
0..255) at the same places. The graph is walked, not indexed by number, so a mismatch in its
shape stops the script.

    scripts/smart_turn_weights.sh             # the usual entry point: venv, wheel, conversion
    python smart_turn_weights.py WHEEL_OR_ONNX OUT.safetensors
    python smart_turn_weights.py WHEEL_OR_ONNX OUT.safetensors --fixture vad/tests/reference

--fixture also needs espeak-ng and onnxruntime, and the wheel (for pipecat's own feature code):
it speaks a few short questions with espeak-ng, computes their features with pipecat's
`compute_whisper_log_mel_features` and their probabilities with onnxruntime configured as
pipecat's `LocalSmartTurnAnalyzerV3` configures it, and writes them, with this script's own
numpy forward pass's probabilities (the algorithm the Rust code implements) for comparison.
"""

import argparse
import hashlib
import io
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
from onnx import numpy_helper

ONNX_IN_WHEEL = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
FEATURES_IN_WHEEL = "pipecat/audio/turn/smart_turn/_whisper_features.py"
LAYERS = 4
WIDTH = 384
HEADS = 6


def read_sources(path: Path):
    """The ONNX model's bytes and, from a wheel, pipecat's feature code (else None)."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            return z.read(ONNX_IN_WHEEL), z.read(FEATURES_IN_WHEEL).decode()
    return path.read_bytes(), None


class Graph:
    def __init__(self, model):
        self.inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        self.nodes = list(model.graph.node)
        self.producer = {o: n for n in self.nodes for o in n.output}
        self.consumers = {}
        for n in self.nodes:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    def only(self, tensor, op):
        found = [n for n in self.consumers.get(tensor, []) if n.op_type == op]
        if len(found) != 1:
            raise SystemExit(f"{tensor}: expected one {op} consumer, found {len(found)}")
        return found[0]

    def all(self, tensor, op):
        return [n for n in self.consumers.get(tensor, []) if n.op_type == op]

    def node_with_input(self, op, name):
        found = [n for n in self.nodes if n.op_type == op and name in n.input]
        if len(found) != 1:
            raise SystemExit(f"expected one {op} reading {name}, found {len(found)}")
        return found[0]

    def act_quant(self, tensor):
        """The (scale, zero point) of the QuantizeLinear on `tensor`, and the dequantized name."""
        q = self.only(tensor, "QuantizeLinear")
        scale = self.inits[q.input[1]]
        zp = self.inits[q.input[2]]
        if scale.size != 1 or zp.dtype != np.uint8:
            raise SystemExit(f"{tensor}: expected a per-tensor uint8 quantization")
        dq = self.only(q.output[0], "DequantizeLinear")
        if list(dq.input[1:]) != list(q.input[1:]):
            raise SystemExit(f"{tensor}: the DequantizeLinear uses other parameters")
        return (float(scale), int(zp)), dq.output[0]

    def weight(self, dq_output):
        """int8 weight, per-channel f32 scale (zero points checked 0) behind a DequantizeLinear."""
        dq = self.producer[dq_output]
        if dq.op_type != "DequantizeLinear":
            raise SystemExit(f"{dq_output} is not dequantized")
        q, scale = self.inits[dq.input[0]], self.inits[dq.input[1]]
        zp = self.inits[dq.input[2]]
        if q.dtype == np.int8:
            if np.any(zp != 0):
                raise SystemExit(f"{dq_output}: nonzero weight zero point")
            return q, scale.astype(np.float32)
        if q.dtype == np.int32:  # a bias: DequantizeLinear in f32
            if np.any(zp != 0):
                raise SystemExit(f"{dq_output}: nonzero bias zero point")
            axis_scale = scale if scale.size == q.size else np.full(q.shape, scale, np.float32)
            return (q.astype(np.float32) * axis_scale.astype(np.float32)).astype(np.float32), None
        raise SystemExit(f"{dq_output}: unexpected {q.dtype}")

    def add_const(self, tensor):
        """The Add that adds an initializer to `tensor`: (initializer, output)."""
        add = self.only(tensor, "Add")
        other = [i for i in add.input if i != tensor][0]
        return self.inits[other], add.output[0]

    def mul_const(self, tensor):
        mul = self.only(tensor, "Mul")
        other = [i for i in mul.input if i != tensor][0]
        return float(self.inits[other].reshape(-1)[0]), mul.output[0]


def extract(model_bytes):
    """Our tensors (name -> numpy array) from the quantized ONNX graph."""
    g = Graph(onnx.load_from_string(model_bytes))
    t = {}
    acts = {}

    def act(name, tensor):
        (scale, zp), out = g.act_quant(tensor)
        acts[name] = (scale, zp)
        return out

    def qweight(name, dq_output, transpose=False):
        q, scale = g.weight(dq_output)
        if transpose:  # MatMul B is [in, out]: store [out, in], one scale per row
            q = np.ascontiguousarray(q.T)
        t[name + ".weight"] = q
        t[name + ".scale"] = scale

    # Front end: conv1 (k3, pad 1), GELU, conv2 (k3, stride 2, pad 1), GELU, + positions.
    x = act("input", "input_features")
    conv1 = g.only(x, "Conv")
    qweight("conv1", conv1.input[1])
    t["conv1.bias"] = g.weight(conv1.input[2])[0]
    h = act("conv1", conv1.output[0])
    gelu = g.only(g.only(h, "Div").output[0], "Erf")
    gelu_out = [n for n in g.all(h, "Mul")][0].output[0]
    h = act("gelu1", gelu_out)
    conv2 = g.only(h, "Conv")
    qweight("conv2", conv2.input[1])
    t["conv2.bias"] = g.weight(conv2.input[2])[0]
    h = act("conv2", conv2.output[0])
    gelu2_out = g.all(h, "Mul")[0].output[0]
    permute = g.only(gelu2_out, "Transpose")
    pos, x = g.add_const(permute.output[0])
    t["positions"] = pos.astype(np.float32)
    del gelu

    for layer in range(LAYERS):
        p = f"layers.{layer}"
        ln1 = g.node_with_input("LayerNormalization", f"inner.encoder.layers.{layer}.self_attn_layer_norm.weight")
        if ln1.input[0] != x:
            raise SystemExit(f"layer {layer}: the residual stream is not where expected")
        t[p + ".ln1.weight"] = g.inits[ln1.input[1]]
        t[p + ".ln1.bias"] = g.inits[ln1.input[2]]
        h = act(p + ".ln1", ln1.output[0])
        proj = {}
        for mm in g.all(h, "MatMul"):
            (scale, zp), out = g.act_quant(mm.output[0])
            after = g.consumers.get(out, [])
            bias_add = [n for n in after if n.op_type == "Add"]
            if bias_add:
                other = [i for i in bias_add[0].input if i != out][0]
                which = other.split(".")[-2][0]  # q_proj / v_proj
                proj[which] = (mm, (scale, zp), other, bias_add[0].output[0])
            else:
                proj["k"] = (mm, (scale, zp), None, out)
        if sorted(proj) != ["k", "q", "v"]:
            raise SystemExit(f"layer {layer}: projections {sorted(proj)}")
        for which, (mm, quant, bias, _) in proj.items():
            qweight(f"{p}.{which}", mm.input[1], transpose=True)
            acts[f"{p}.{which}"] = quant
            if bias:
                t[f"{p}.{which}.bias"] = g.inits[bias]
        # q: scaled, quantized; k: reshaped, transposed, scaled, quantized; v: quantized.
        q_scaled_scale, q_scaled = g.mul_const(g.only(g.only(proj["q"][3], "Reshape").output[0], "Transpose").output[0])
        qs = act(p + ".q_scaled", q_scaled)
        v_t = g.only(g.only(proj["v"][3], "Reshape").output[0], "Transpose").output[0]
        v = act(p + ".v_heads", v_t)
        scores_mm = g.only(qs, "MatMul")
        k_in = scores_mm.input[1]
        k_mul = g.producer[g.producer[k_in].input[0]]  # DequantizeLinear <- QuantizeLinear
        k_mul = g.producer[k_mul.input[0]]
        if k_mul.op_type != "Mul":
            raise SystemExit(f"layer {layer}: keys are not scaled where expected")
        k_scaled_scale = float(g.inits[k_mul.input[1]].reshape(-1)[0])
        acts[p + ".k_scaled"] = g.act_quant(k_mul.output[0])[0]
        t[p + ".qk_scale"] = np.array([q_scaled_scale, k_scaled_scale], np.float32)
        s = act(p + ".scores", scores_mm.output[0])
        soft = g.only(s, "Softmax")
        pr = act(p + ".probs", soft.output[0])
        pv = g.only(pr, "MatMul")
        if pv.input[1] != v:
            raise SystemExit(f"layer {layer}: attention reads another value tensor")
        o = act(p + ".attn", pv.output[0])
        o = act(p + ".attn_merged", g.only(g.only(o, "Transpose").output[0], "Reshape").output[0])
        out_mm = g.only(o, "MatMul")
        qweight(p + ".o", out_mm.input[1], transpose=True)
        o = act(p + ".o", out_mm.output[0])
        bias, o = g.add_const(o)
        t[p + ".o.bias"] = bias
        res = g.only(o, "Add")
        x = res.output[0]
        ln2 = g.node_with_input("LayerNormalization", f"inner.encoder.layers.{layer}.final_layer_norm.weight")
        if ln2.input[0] != x:
            raise SystemExit(f"layer {layer}: the second norm reads something else")
        t[p + ".ln2.weight"] = g.inits[ln2.input[1]]
        t[p + ".ln2.bias"] = g.inits[ln2.input[2]]
        h = act(p + ".ln2", ln2.output[0])
        fc1 = g.only(h, "MatMul")
        qweight(p + ".fc1", fc1.input[1], transpose=True)
        h = act(p + ".fc1", fc1.output[0])
        bias, h = g.add_const(h)
        t[p + ".fc1.bias"] = bias
        gelu_mul = [n for n in g.all(h, "Mul")][0]
        h = act(p + ".gelu", gelu_mul.output[0])
        fc2 = g.only(h, "MatMul")
        qweight(p + ".fc2", fc2.input[1], transpose=True)
        h = act(p + ".fc2", fc2.output[0])
        bias, h = g.add_const(h)
        t[p + ".fc2.bias"] = bias
        x = g.only(h, "Add").output[0]

    ln = g.node_with_input("LayerNormalization", "inner.encoder.layer_norm.weight")
    if ln.input[0] != x:
        raise SystemExit("the final norm reads something else")
    t["ln_post.weight"] = g.inits[ln.input[1]]
    t["ln_post.bias"] = g.inits[ln.input[2]]
    enc = act("ln_post", ln.output[0])
    # Attention pooling: softmax over time of w2 . tanh(W1 x + b1) + b2, then the weighted sum.
    p1 = [n for n in g.all(enc, "MatMul")][0]
    qweight("pool1", p1.input[1], transpose=True)
    h = act("pool1", p1.output[0])
    bias, h = g.add_const(h)
    t["pool1.bias"] = bias
    h = act("pool_tanh", g.only(h, "Tanh").output[0])
    p2 = g.only(h, "MatMul")
    qweight("pool2", p2.input[1], transpose=True)
    h = act("pool2", p2.output[0])
    bias, h = g.add_const(h)
    t["pool2.bias"] = bias
    soft = g.only(h, "Softmax")
    weighted = g.only(soft.output[0], "Mul")
    if enc not in weighted.input:
        raise SystemExit("the pooling weighs another tensor")
    h = act("pooled", g.only(weighted.output[0], "ReduceSum").output[0])
    # Classifier: Gemm (bias inside, before the quantization), LayerNorm, GELU, Gemm, GELU, Gemm.
    c0 = g.only(h, "Gemm")
    qweight("cls0", c0.input[1])
    t["cls0.bias"] = g.weight(c0.input[2])[0]
    h = act("cls0", c0.output[0])
    cln = g.only(h, "LayerNormalization")
    t["cls_ln.weight"] = g.inits[cln.input[1]]
    t["cls_ln.bias"] = g.inits[cln.input[2]]
    h = act("cls_gelu1", g.all(cln.output[0], "Mul")[0].output[0])
    c4 = g.only(h, "Gemm")
    qweight("cls4", c4.input[1])
    t["cls4.bias"] = g.weight(c4.input[2])[0]
    h = act("cls4", c4.output[0])
    h = act("cls_gelu2", g.all(h, "Mul")[0].output[0])
    c6 = g.only(h, "Gemm")
    qweight("cls6", c6.input[1])
    t["cls6.bias"] = g.weight(c6.input[2])[0]
    h = act("cls6", c6.output[0])
    sig = g.only(h, "Sigmoid")
    if sig.output[0] != "logits":
        raise SystemExit("the sigmoid is not the output")
    quant_count = sum(1 for n in g.nodes if n.op_type == "QuantizeLinear")
    if len(acts) != quant_count:
        raise SystemExit(f"{len(acts)} activation quantizations mapped, the graph has {quant_count}")
    names = sorted(acts)
    t["act.scale"] = np.array([acts[n][0] for n in names], np.float32)
    t["act.zero_point"] = np.array([acts[n][1] for n in names], np.uint8)
    return t, names


# --- the forward pass the Rust code implements, in numpy (float32) ---------------------------

def fq(x, q):
    scale, zp = q
    scale = np.float32(scale)
    return ((np.clip(np.round(x / scale) + zp, 0, 255) - zp) * scale).astype(np.float32)


def gelu(x):
    from math import erf
    verf = np.vectorize(erf)
    return (0.5 * x * (1.0 + verf(x / np.sqrt(2.0)))).astype(np.float32)


def layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * w + b).astype(np.float32)


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return (e / e.sum(axis, keepdims=True)).astype(np.float32)


def forward(t, names, features):
    acts = {n: (float(s), int(z)) for n, s, z in zip(names, t["act.scale"], t["act.zero_point"])}
    W = lambda n: (t[n + ".weight"].astype(np.float32) * t[n + ".scale"].reshape((-1,) + (1,) * (t[n + ".weight"].ndim - 1))).astype(np.float32)

    def conv(x, n, stride):
        w, b = W(n), t[n + ".bias"]
        c_out, c_in, k = w.shape
        xp = np.pad(x, ((0, 0), (1, 1)))
        length = (x.shape[1] + 2 - k) // stride + 1
        cols = np.stack([xp[:, j * stride:j * stride + k].reshape(-1) for j in range(length)])
        return (w.reshape(c_out, -1) @ cols.T + b[:, None]).astype(np.float32)

    x = fq(features.astype(np.float32), acts["input"])
    h = gelu(fq(conv(x, "conv1", 1), acts["conv1"]))
    h = fq(h, acts["gelu1"])
    h = gelu(fq(conv(h, "conv2", 2), acts["conv2"]))
    x = (h.T + t["positions"]).astype(np.float32)
    T = x.shape[0]
    dh = WIDTH // HEADS
    for layer in range(LAYERS):
        p = f"layers.{layer}"
        h = fq(layer_norm(x, t[p + ".ln1.weight"], t[p + ".ln1.bias"]), acts[p + ".ln1"])
        q = fq(h @ W(p + ".q").T, acts[p + ".q"]) + t[p + ".q.bias"]
        k = fq(h @ W(p + ".k").T, acts[p + ".k"])
        v = fq(h @ W(p + ".v").T, acts[p + ".v"]) + t[p + ".v.bias"]
        v = fq(v, acts[p + ".v_heads"])
        qs, ks = t[p + ".qk_scale"]
        q = fq(q * qs, acts[p + ".q_scaled"]).reshape(T, HEADS, dh).transpose(1, 0, 2)
        k = fq(k * ks, acts[p + ".k_scaled"]).reshape(T, HEADS, dh).transpose(1, 0, 2)
        v = v.reshape(T, HEADS, dh).transpose(1, 0, 2)
        s = fq(q @ k.transpose(0, 2, 1), acts[p + ".scores"])
        pr = fq(softmax(s, -1), acts[p + ".probs"])
        o = fq(pr @ v, acts[p + ".attn"]).transpose(1, 0, 2).reshape(T, WIDTH)
        o = fq(o, acts[p + ".attn_merged"])
        o = fq(o @ W(p + ".o").T, acts[p + ".o"]) + t[p + ".o.bias"]
        x = (x + o).astype(np.float32)
        h = fq(layer_norm(x, t[p + ".ln2.weight"], t[p + ".ln2.bias"]), acts[p + ".ln2"])
        h = fq(h @ W(p + ".fc1").T, acts[p + ".fc1"]) + t[p + ".fc1.bias"]
        h = fq(gelu(h), acts[p + ".gelu"])
        h = fq(h @ W(p + ".fc2").T, acts[p + ".fc2"]) + t[p + ".fc2.bias"]
        x = (x + h).astype(np.float32)
    enc = fq(layer_norm(x, t["ln_post.weight"], t["ln_post.bias"]), acts["ln_post"])
    e = fq(enc @ W("pool1").T, acts["pool1"]) + t["pool1.bias"]
    e = fq(np.tanh(e), acts["pool_tanh"])
    s = fq(e @ W("pool2").T, acts["pool2"]) + t["pool2.bias"]
    a = softmax(s, 0)
    pooled = fq((enc * a).sum(0), acts["pooled"])
    h = fq(W("cls0") @ pooled + t["cls0.bias"], acts["cls0"])
    h = fq(gelu(layer_norm(h, t["cls_ln.weight"], t["cls_ln.bias"])), acts["cls_gelu1"])
    h = fq(W("cls4") @ h + t["cls4.bias"], acts["cls4"])
    h = fq(gelu(h), acts["cls_gelu2"])
    h = fq(W("cls6") @ h + t["cls6.bias"], acts["cls6"])
    return float(1.0 / (1.0 + np.exp(-h[0])))


# --- files --------------------------------------------------------------------------------------

DTYPES = {np.dtype("int8"): "I8", np.dtype("uint8"): "U8", np.dtype("<f4"): "F32", np.dtype("<i2"): "I16", np.dtype("<i4"): "I32"}


def write_safetensors(path: Path, tensors: dict, metadata: dict):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        if array.dtype == np.float32:
            array = array.astype("<f4")
        blob = array.tobytes()
        header[name] = {"dtype": DTYPES[array.dtype], "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for blob in blobs:
            f.write(blob)


# --- the fixture ----------------------------------------------------------------------------------

# (voice, text, silence after the speech in ms): finished questions and ones cut off mid-way.
CLIPS = [
    ("en-us", "What is the weather like in Paris today?", 200),
    ("en-gb+f3", "Can you tell me how to get to the", 200),
    ("en-us+m3", "I would like to order a pizza with mushrooms and", 200),
    ("en-us", "Set a timer for ten minutes, please.", 200),
    ("en-gb", "Please book a table for two at eight o'clock.", 200),
    ("en-us+f2", "My favourite colours are red, green and", 200),
    ("en-gb-scotland+m3", "Why is the sky blue?", 200),
    ("en-us", "The number is four, five, six,", 200),
    ("en-us", "Tell me a story about a dragon who", 200),
    ("en-029+klatt4", "Okay, that sounds good.", 200),
    ("en-us+f2", "I need to buy eggs, milk, and", 200),
    ("en-gb+f3", "Thank you, that will be all for now.", 200),
]


def espeak(voice, text):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), text], check=True)
        with wave.open(str(path)) as w:
            rate = w.getframerate()
            pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0
    # To 16 kHz by linear interpolation (the fixture only needs some speech at 16 kHz; the
    # Rust test reads these samples as they are stored).
    n = int(len(pcm) * 16000 / rate)
    audio = np.interp(np.arange(n) * rate / 16000, np.arange(len(pcm)), pcm).astype(np.float32)
    nz = np.nonzero(np.abs(audio) > 1e-3)[0]
    return audio[nz[0]:nz[-1] + 1]


def make_fixture(model_bytes, feature_code, t, names, out_dir: Path):
    import onnxruntime as ort
    if feature_code is None:
        raise SystemExit("--fixture needs the wheel (for pipecat's feature code)")
    ns = {}
    exec(compile(feature_code, FEATURES_IN_WHEEL, "exec"), ns)
    features_of = ns["compute_whisper_log_mel_features"]
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.inter_op_num_threads = 1
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(model_bytes, sess_options=so)
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain_session = ort.InferenceSession(model_bytes, sess_options=plain)
    tensors, lengths, ort_p, plain_p, ours_p = {}, [], [], [], []
    pcm_all = []
    for i, (voice, text, silence_ms) in enumerate(CLIPS):
        speech = espeak(voice, text) * 0.5
        audio = np.concatenate([speech, np.zeros(16 * silence_ms, np.float32)])
        pcm = np.clip(np.round(audio * 32768.0), -32768, 32767).astype("<i2")
        audio = pcm.astype(np.float32) / 32768.0  # exactly what the Rust test reads
        window = audio[-128000:] if len(audio) > 128000 else np.pad(audio, (128000 - len(audio), 0))
        feats = features_of(window, do_normalize=True)
        p_ort = float(session.run(None, {"input_features": feats[None]})[0].reshape(-1)[0])
        p_plain = float(plain_session.run(None, {"input_features": feats[None]})[0].reshape(-1)[0])
        p_ours = forward(t, names, feats)
        print(f"clip {i} ({voice}, {text!r}, {silence_ms} ms silence): onnxruntime {p_ort:.6f}, "
              f"without graph optimizations {p_plain:.6f}, numpy forward {p_ours:.6f}")
        ort_p.append(p_ort)
        plain_p.append(p_plain)
        ours_p.append(p_ours)
        lengths.append(len(pcm))
        pcm_all.append(pcm)
        if i == 0:
            tensors["features0"] = feats.astype("<f4")
    tensors["pcm"] = np.concatenate(pcm_all)
    tensors["lengths"] = np.array(lengths, "<i4")
    tensors["probability"] = np.array(ort_p, "<f4")
    tensors["probability_unoptimized"] = np.array(plain_p, "<f4")
    tensors["probability_numpy"] = np.array(ours_p, "<f4")
    ort_p, plain_p, ours_p = map(np.array, (ort_p, plain_p, ours_p))
    for name, a, b in [("numpy forward - onnxruntime", ours_p, ort_p),
                       ("numpy forward - onnxruntime unoptimized", ours_p, plain_p),
                       ("onnxruntime unoptimized - onnxruntime", plain_p, ort_p)]:
        d = np.abs(a - b)
        agree = int(np.sum((a >= 0.5) == (b >= 0.5)))
        print(f"{name}: mean |diff| {d.mean():.4f}, max {d.max():.4f}, same side of 0.5 {agree}/{len(a)}")
    metadata = {
        "model_sha256": hashlib.sha256(model_bytes).hexdigest(),
        "clips": json.dumps(CLIPS),
        "onnxruntime": ort.__version__,
        "espeak": subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout.strip(),
    }
    write_safetensors(out_dir / "smart_turn_reference.safetensors", tensors, metadata)
    print(f"wrote {out_dir / 'smart_turn_reference.safetensors'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", type=Path, help="the pipecat-ai wheel, or the .onnx file itself")
    ap.add_argument("out", type=Path, help="the weight file to write (.safetensors)")
    ap.add_argument("--fixture", type=Path, help="also write the test reference into this directory")
    args = ap.parse_args()
    model_bytes, feature_code = read_sources(args.source)
    t, names = extract(model_bytes)
    metadata = {
        "source": "smart-turn-v3.2-cpu.onnx (pipecat-ai wheel), BSD-2-Clause, Copyright (c) 2024-2026 Daily",
        "model_sha256": hashlib.sha256(model_bytes).hexdigest(),
        "activations": json.dumps(names),
    }
    write_safetensors(args.out, t, metadata)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {len(t)} tensors, {len(names)} activation quantizations)")
    if args.fixture:
        make_fixture(model_bytes, feature_code, t, names, args.fixture)


if __name__ == "__main__":
    main()
