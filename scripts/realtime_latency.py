"""Time to first audio of one spoken question: the Realtime socket against POST /v1/tasks/stream.

    python scripts/realtime_latency.py http://127.0.0.1:8080 [MORE_URLS] [--rounds 5] [--max-tokens 48]

Needs `espeak-ng` (the question) and the `websockets` package (e.g. the venv `.ci/run` makes).
Per round, each way is a fresh conversation on a running `serve`:
- realtime, manual: the question's PCM16 (24 kHz) appended in 100 ms chunks at real-time pace,
  then `input_audio_buffer.commit` + `response.create`; timed from the commit to the first
  `response.output_audio.delta`.
- realtime, server VAD: the same audio then silence, at real-time pace, with `server_vad`
  (silence_duration_ms 500); timed from the moment the last voiced sample (above -50 dBFS) was
  spoken to the first delta (so it includes the VAD's wait for silence), and to
  `speech_stopped`.
- tasks/stream: the question as a WAV in one `POST /v1/tasks/stream` (SSE) sent once the user
  has finished speaking; timed from the request to its first audio event.
With `--turns server_vad:200,server_vad:500,semantic_vad:low,...` the ways are instead those turn
detections on the first server (the same question, timed as the server-VAD way above), plus, per
detection, questions with mid-sentence pauses (espeak-ng SSML breaks of 300 to 900 ms, sent with
`create_response: false` at real-time pace and 2 s of silence after): a `speech_stopped` whose
`audio_end_ms` is more than 100 ms before the question's last voiced sample is a false cut-in,
and the delay from that sample to the `speech_stopped` that ends the question is timed too.
Prints each figure's p50 and p95 over the rounds (the order of the ways alternates). Every
call speaks the question at a slightly different level (a factor 1 - 0.002 k for the k-th call),
so that no server cache (kept encoder outputs, kept prefill blocks) holds it: each call is a
new question, as a user's would be.
"""

import argparse
import base64
import io
import json
import statistics
import struct
import subprocess
import threading
import time
import urllib.request
import wave

from websockets.sync.client import connect

TEXT = "Could you tell me what the weather will be like in the city tomorrow morning?"
RATE = 24_000
CHUNK = RATE // 10


# Questions with mid-sentence pauses (`|`: an SSML break), for --turns' false cut-ins.
PAUSED = [
    ("What is the | capital of Australia?", [600]),
    ("Set an alarm for seven | thirty tomorrow morning.", [450]),
    ("Please add eggs, milk, | bread and | butter to my shopping list.", [300, 750]),
    ("Can you remind me to call my sister because | it is her birthday tomorrow?", [900]),
    ("Turn off the lights in the kitchen and | the living room.", [600]),
]


def speech(text: str = TEXT, ssml: bool = False) -> list:
    """`text` from espeak-ng (SSML when `ssml`), resampled (linearly) to 24 kHz floats."""
    args = ["espeak-ng", "-v", "en-us", "--stdout"] + (["-m"] if ssml else []) + [text]
    wav = subprocess.run(args, check=True, capture_output=True).stdout
    with wave.open(io.BytesIO(wav)) as w:
        rate, raw = w.getframerate(), w.readframes(w.getnframes())
    x = [s / 32768 for (s,) in struct.iter_unpack("<h", raw)]
    n = int(len(x) * RATE / rate)
    out = []
    for i in range(n):
        p = i * rate / RATE
        k = int(p)
        f = p - k
        a, b = x[min(k, len(x) - 1)], x[min(k + 1, len(x) - 1)]
        out.append(a + (b - a) * f)
    return out


def pcm16(x) -> bytes:
    return b"".join(struct.pack("<h", int(max(-1.0, min(1.0, v)) * 32767)) for v in x)


def wav24(x) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm16(x))
    return out.getvalue()


def turn_detection(spec: str) -> dict:
    """`server_vad:MS` or `semantic_vad:EAGERNESS` as a `turn_detection` object."""
    kind, _, arg = spec.partition(":")
    if kind == "server_vad":
        return {"type": "server_vad", "silence_duration_ms": int(arg or 500)}
    if kind == "semantic_vad":
        return {"type": "semantic_vad", "eagerness": arg or "auto"}
    raise SystemExit(f"unknown turn detection {spec!r}: server_vad:MS or semantic_vad:EAGERNESS")


def paused(base: str, td: dict, x) -> dict:
    """One paused question with `td` and no responses: false cut-ins and the end's delay."""
    url = base.replace("http", "ws", 1) + "/v1/realtime"
    end_ms = last_voiced(x) * 1000 / RATE
    with connect(url, max_size=None) as ws:
        assert json.loads(ws.recv())["type"] == "session.created"
        ws.send(json.dumps({"type": "session.update", "session": {
            "type": "realtime",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": RATE},
                                "turn_detection": dict(td, create_response=False,
                                                       interrupt_response=False)}}}}))
        while json.loads(ws.recv())["type"] != "session.updated":
            pass
        arrived = []
        reader = threading.Thread(target=read_until_closed, args=(ws, arrived))
        reader.start()
        audio = x + [0.0] * (RATE * 2)
        t_start = time.monotonic()
        for i in range(0, len(audio), CHUNK):
            time.sleep(max(0.0, t_start + i / RATE - time.monotonic()))
            ws.send(json.dumps({"type": "input_audio_buffer.append",
                                "audio": base64.b64encode(pcm16(audio[i:i + CHUNK])).decode()}))
        time.sleep(0.3)
        ws.close()
        reader.join()
    cut_ins, end_delay = 0, None
    for t, ev in arrived:
        if ev["type"] == "error":
            raise SystemExit(f"error event: {ev}")
        if ev["type"] == "input_audio_buffer.speech_stopped":
            if ev["audio_end_ms"] < end_ms - 100:
                cut_ins += 1
            elif end_delay is None:
                end_delay = (t - (t_start + end_ms / 1000)) * 1e3
    out = {"false cut-ins (count)": cut_ins}
    if end_delay is not None:
        out["speech_stopped_ms (paused questions)"] = end_delay
    return out


def read_until_closed(ws, arrived):
    """Appends (arrival time, event) until the socket closes."""
    try:
        while True:
            ev = json.loads(ws.recv())
            # why after recv: the arrival time, not the time the wait began.
            arrived.append((time.monotonic(), ev))
    except Exception:  # noqa: BLE001 (the close ends the loop)
        return


def realtime(base: str, x, max_tokens: int, vad, td: dict | None = None) -> dict:
    url = base.replace("http", "ws", 1) + "/v1/realtime"
    with connect(url, max_size=None) as ws:
        assert json.loads(ws.recv())["type"] == "session.created"
        if td is None:
            td = {"type": "server_vad", "silence_duration_ms": 500} if vad else None
        ws.send(json.dumps({"type": "session.update", "session": {
            "type": "realtime", "max_output_tokens": max_tokens,
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": RATE},
                                "turn_detection": td}}}}))
        while json.loads(ws.recv())["type"] != "session.updated":
            pass
        audio = x + [0.0] * (RATE * 2 if vad else 0)
        # why a reader thread: the server's events (speech_stopped, the first delta) come while
        # the audio is still being sent; they are timed as they arrive.
        arrived = []
        reader = threading.Thread(target=read_events, args=(ws, arrived))
        reader.start()
        t_start = time.monotonic()
        voice_end = None
        for i in range(0, len(audio), CHUNK):
            # why real-time pace: the question's audio arrives as it is spoken.
            time.sleep(max(0.0, t_start + i / RATE - time.monotonic()))
            if arrived and arrived[-1][1]["type"] == "response.done":
                break
            ws.send(json.dumps({"type": "input_audio_buffer.append",
                                "audio": base64.b64encode(pcm16(audio[i:i + CHUNK])).decode()}))
        # VAD: the moment the last voiced sample was spoken (real-time pace from t_start).
        voice_end = t_start + last_voiced(x) / RATE
        if not vad:
            voice_end = time.monotonic()
            ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            ws.send(json.dumps({"type": "response.create"}))
        reader.join()
    out = {}
    for t, ev in arrived:
        kind = ev["type"]
        if kind == "error":
            raise SystemExit(f"error event: {ev}")
        if kind == "input_audio_buffer.speech_stopped":
            out["speech_stopped_ms"] = (t - voice_end) * 1e3
        elif kind == "response.output_audio.delta" and "first_audio_ms" not in out:
            out["first_audio_ms"] = (t - voice_end) * 1e3
    return out


def last_voiced(x) -> int:
    """One past the last sample above -50 dBFS (espeak-ng ends its audio with a pause)."""
    return max((i + 1 for i, v in enumerate(x) if abs(v) > 0.00316), default=0)


def read_events(ws, arrived):
    """Appends (arrival time, event) until `response.done` or an error."""
    while True:
        ev = json.loads(ws.recv())
        arrived.append((time.monotonic(), ev))
        if ev["type"] in ("response.done", "error"):
            return


def tasks_stream(base: str, x, max_tokens: int) -> dict:
    body = json.dumps({"model": "lfm2-audio-s2s", "stream_format": "sse", "request": {
        "audio": base64.b64encode(wav24(x)).decode(), "max_tokens": max_tokens}}).encode()
    req = urllib.request.Request(base + "/v1/tasks/stream", data=body,
                                 headers={"content-type": "application/json"})
    t0 = time.monotonic()
    out = {}
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if not line.startswith(b"data:"):
                continue
            ev = json.loads(line[5:])
            if "first_audio_ms" not in out and ev.get("event", {}).get("audio"):
                out["first_audio_ms"] = (time.monotonic() - t0) * 1e3
    return out


def merge(results) -> dict:
    """The paused questions' figures of one round: cut-ins summed, delays as a list."""
    out = {}
    for r in results:
        for k, v in r.items():
            if "count" in k:
                out[k] = out.get(k, 0) + v
            else:
                out.setdefault(k, []).append(v)
    return out


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", nargs="+",
                   help="the server's base URL, e.g. http://127.0.0.1:8080; each further URL "
                        "runs the server-VAD way only, interleaved with the others (e.g. the "
                        "same model with --early-turn-ms 0)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--turns", default="",
                   help="comma-separated turn detections to compare on the first server "
                        "(server_vad:MS, semantic_vad:EAGERNESS), with the paused questions")
    a = p.parse_args()
    speech_once = speech()
    x = list(speech_once)
    tail = (len(x) - last_voiced(x)) / RATE * 1e3
    print(f"question: {len(x) / RATE:.2f} s of espeak-ng audio, the last {tail:.0f} ms silent")
    base = a.base[0]
    ways = {
        "realtime, manual commit": lambda: realtime(base, x, a.max_tokens, False),
        "realtime, server VAD": lambda: realtime(base, x, a.max_tokens, True),
        "tasks/stream": lambda: tasks_stream(base, x, a.max_tokens),
    }
    for other in a.base[1:]:
        ways[f"realtime, server VAD ({other})"] = (
            lambda other=other: realtime(other, x, a.max_tokens, True))
    if a.turns:
        questions = []
        for text, breaks in PAUSED:
            parts = text.split("|")
            ssml = parts[0] + "".join(f'<break time="{ms}ms"/>{p}' for ms, p in zip(breaks, parts[1:]))
            questions.append(speech(f"<speak>{ssml}</speak>", ssml=True))
        ways = {}
        for spec in a.turns.split(","):
            td = turn_detection(spec)
            ways[spec] = lambda td=td: realtime(base, x, a.max_tokens, True, td)
            ways[f"{spec}, paused"] = lambda td=td: merge(paused(base, td, q) for q in questions)
    figures = {}
    calls = 0
    for k in range(a.rounds):
        names = list(ways) if k % 2 == 0 else list(reversed(ways))
        for name in names:
            calls += 1
            level = 1.0 - 0.002 * calls
            x[:] = [v * level for v in speech_once]
            for fig, v in ways[name]().items():
                figures.setdefault((name, fig), []).extend(v if isinstance(v, list) else [v])
    print("| way | figure | p50 ms | p95 ms | rounds |")
    print("|---|---|---:|---:|---:|")
    for (name, fig), v in figures.items():
        print(f"| {name} | {fig} | {statistics.median(v):.0f} | {pct(v, 0.95):.0f} | {len(v)} |")


if __name__ == "__main__":
    main()
