#!/usr/bin/env python3
"""N concurrent S2S requests to a running `serve` against the same N one after the other.

    python3 scripts/serve_concurrency.py http://127.0.0.1:8080 [--requests 2] [--rounds 3]
        [--max-tokens 48] [--seconds 6]

Each request is a fresh conversation (`POST /v1/tasks/run`, model `lfm2-audio-s2s`) with a
deterministic speech-like question of its own. Per round (the order alternates) it prints the
wall time one after the other, side by side, and their ratio; at the end the medians. Every reply
must be byte-identical between the two ways of running (the engine's rule), or the script fails.
Only the Python standard library is used.
"""

import argparse
import base64
import io
import json
import math
import statistics
import struct
import sys
import threading
import time
import urllib.request
import wave


def question(i: int, seconds: float) -> bytes:
    """A 16 kHz mono 16-bit WAV: a few gliding harmonics under a syllable-rate envelope."""
    n = int(16_000 * seconds)
    frames = bytearray()
    for t in range(n):
        x = t / 16_000
        f0 = 110 + 20 * i + 30 * math.sin(2 * math.pi * 0.7 * x)
        env = 0.5 + 0.5 * math.sin(2 * math.pi * (3 + 0.3 * i) * x)
        v = sum(math.sin(2 * math.pi * k * f0 * x) / k for k in (1, 2, 3)) * env * 0.25
        frames += struct.pack("<h", int(max(-1.0, min(1.0, v)) * 32767))
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(bytes(frames))
    return out.getvalue()


def run(base: str, body: bytes) -> dict:
    req = urllib.request.Request(
        base + "/v1/tasks/run", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.loads(r.read())


def one_after_the_other(base, bodies):
    t0 = time.monotonic()
    out = [run(base, b) for b in bodies]
    return time.monotonic() - t0, out


def side_by_side(base, bodies):
    out = [None] * len(bodies)
    start = threading.Barrier(len(bodies) + 1)

    def worker(i):
        start.wait()
        out[i] = run(base, bodies[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    return time.monotonic() - t0, out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="the server's base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--requests", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--seconds", type=float, default=6.0)
    a = p.parse_args()
    bodies = [
        json.dumps(
            {
                "model": "lfm2-audio-s2s",
                "request": {
                    "audio": base64.b64encode(question(i, a.seconds)).decode(),
                    "max_tokens": a.max_tokens,
                    "seed": 7 + i,
                },
            }
        ).encode()
        for i in range(a.requests)
    ]
    # Warm-up (and the reference replies).
    _, want = one_after_the_other(a.base, bodies)
    want = [(r["text"], r["audio"]) for r in want]
    seq, par = [], []
    for k in range(a.rounds):
        runs = [one_after_the_other, side_by_side]
        if k % 2:
            runs.reverse()
        times = {}
        for f in runs:
            wall, out = f(a.base, bodies)
            if [(r["text"], r["audio"]) for r in out] != want:
                sys.exit(f"round {k + 1}: {f.__name__} gave other bytes than the warm-up")
            times[f.__name__] = wall
        s, b = times["one_after_the_other"], times["side_by_side"]
        seq.append(s)
        par.append(b)
        print(f"round {k + 1}: one after the other {s:.3f} s, side by side {b:.3f} s, ratio {b / s:.3f}")
    s, b = statistics.median(seq), statistics.median(par)
    ratios = [y / x for x, y in zip(seq, par)]
    print(
        f"{a.requests} requests, median of {a.rounds} rounds: one after the other {s:.3f} s, "
        f"side by side {b:.3f} s, ratio {statistics.median(ratios):.3f} "
        f"(max {max(ratios):.3f}); replies byte-identical"
    )


if __name__ == "__main__":
    main()
