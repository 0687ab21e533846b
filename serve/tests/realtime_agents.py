"""The OpenAI Agents SDK (`openai-agents`) at its defaults on the server's /v1/realtime.

Usage: realtime_agents.py WS_URL DIR. A `RealtimeAgent` run by a `RealtimeRunner` with no model
settings (the SDK's default session: `semantic_vad`, input transcription, voice `ash`, ...)
connects to WS_URL; DIR/q.pcm (PCM16 mono, 24 kHz: speech, then silence) is streamed at
real-time pace in 100 ms chunks with `send_audio` (no commit: the server's turn detection ends
the turn and creates the response). Writes the reply's audio (the SDK's `audio` events) to
DIR/reply.pcm and DIR/report.json: the session the server echoed, where it heard the speech
start and stop, the first response.done (as the server sent it), the raw server event types
and every `error` event the SDK raised (a server event it could not parse is one).
"""

import asyncio
import json
import pathlib
import sys
import time

from agents.realtime import RealtimeAgent, RealtimeRunner

CHUNK = 2400 * 2  # 100 ms of PCM16 at 24 kHz


async def main(url: str, out: pathlib.Path) -> None:
    agent = RealtimeAgent(name="Assistant", instructions="You are a helpful voice assistant.")
    runner = RealtimeRunner(starting_agent=agent)
    session = await runner.run(model_config={"url": url, "api_key": "unused"})
    pcm = (out / "q.pcm").read_bytes()
    report = {"errors": [], "raw": [], "sessions": [], "heard": {}, "done": None}
    audio = bytearray()

    async def stream() -> None:
        start = time.monotonic()
        for i, at in enumerate(range(0, len(pcm), CHUNK)):
            await session.send_audio(pcm[at : at + CHUNK])
            # Real-time pace: chunk i goes out 100 ms after chunk i - 1.
            await asyncio.sleep(max(0.0, start + (i + 1) * 0.1 - time.monotonic()))

    async with session:
        sender = asyncio.create_task(stream())
        try:
            async with asyncio.timeout(180):
                async for event in session:
                    if event.type == "error":
                        report["errors"].append(str(event.error))
                    elif event.type == "audio":
                        audio += event.audio.data
                    elif event.type == "raw_model_event":
                        data = event.data
                        if data.type != "raw_server_event":
                            continue
                        raw = data.data
                        kind = raw.get("type")
                        report["raw"].append(kind)
                        if kind in ("session.created", "session.updated"):
                            report["sessions"].append(raw["session"])
                        elif kind == "input_audio_buffer.speech_started":
                            report["heard"].setdefault("start_ms", raw["audio_start_ms"])
                        elif kind == "input_audio_buffer.speech_stopped":
                            report["heard"].setdefault("end_ms", raw["audio_end_ms"])
                        elif kind == "response.done":
                            report["done"] = raw["response"]
                            break
        finally:
            sender.cancel()
    (out / "reply.pcm").write_bytes(bytes(audio))
    (out / "report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], pathlib.Path(sys.argv[2])))
