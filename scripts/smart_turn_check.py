#!/usr/bin/env python3
"""Runs pipecat's smart-turn (onnxruntime, configured as pipecat's LocalSmartTurnAnalyzerV3, with
pipecat's own feature code) on the windows that `TURN_EVAL_DUMP=dir cargo run -p voice-activity
--release --example turn_eval` wrote, and compares with the Rust model's probabilities there
(ours.tsv): per-window differences and the share of "complete" verdicts at mid-sentence pauses
and at the ends of questions, for both. Shows whether what the evaluation measures is the model's
behaviour or the Rust port's.

    target/smart-turn-venv/bin/pip install onnxruntime   # beside onnx, numpy
    target/smart-turn-venv/bin/python scripts/smart_turn_check.py WHEEL DIR
"""
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).parent))
import smart_turn_weights as st  # noqa: E402


def read_float_wav(path):
    data = Path(path).read_bytes()
    # hound's 32-bit float WAV: find the "data" chunk.
    at = data.index(b"data") + 8
    return np.frombuffer(data[at:], "<f4")


def main():
    wheel, folder = Path(sys.argv[1]), Path(sys.argv[2])
    model_bytes, feature_code = st.read_sources(wheel)
    ns = {}
    exec(compile(feature_code, st.FEATURES_IN_WHEEL, "exec"), ns)
    features_of = ns["compute_whisper_log_mel_features"]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(model_bytes, sess_options=so)
    rows = [line.split("\t") for line in (folder / "ours.tsv").read_text().splitlines()]
    ours, theirs, kinds = [], [], []
    for name, kind, p in rows:
        audio = read_float_wav(folder / name)
        window = audio[-128000:] if len(audio) > 128000 else np.pad(audio, (128000 - len(audio), 0))
        feats = features_of(window.astype(np.float32), do_normalize=True)
        theirs.append(float(session.run(None, {"input_features": feats[None]})[0].reshape(-1)[0]))
        ours.append(float(p))
        kinds.append(kind)
    ours, theirs, kinds = np.array(ours), np.array(theirs), np.array(kinds)
    d = np.abs(ours - theirs)
    print(f"{len(ours)} windows: mean |ours - onnxruntime| {d.mean():.4f}, max {d.max():.4f}, "
          f"same side of 0.5 {int(np.sum((ours >= .5) == (theirs >= .5)))}/{len(ours)}")
    for threshold in (0.5, 0.7, 0.9, 0.95):
        for name, p in (("ours", ours), ("onnxruntime", theirs)):
            at_p = np.mean(p[kinds == "pause"] >= threshold) * 100
            at_e = np.mean(p[kinds == "end"] >= threshold) * 100
            print(f"threshold {threshold}: {name:12s} complete at {at_p:5.1f} % of pauses, {at_e:5.1f} % of ends")


if __name__ == "__main__":
    main()
