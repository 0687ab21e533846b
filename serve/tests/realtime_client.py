"""The realtime test's client: the official OpenAI Python SDK on the server's /v1/realtime.

Usage: realtime_client.py WS_BASE_URL MODEL DIR [vad]. Reads DIR/q0.pcm and DIR/q1.pcm (PCM16
mono, 24 kHz), and for each: appends it in 100 ms chunks, commits, asks for a response of 40
steps and writes the audio deltas' PCM to DIR/reply<i>.pcm; DIR/report.json gets each turn's
response.done (as the SDK parsed it), the event types seen and, with `vad`, where the server's
VAD heard the speech start and stop. With `vad` the session uses server_vad: no commit and no
response.create, the VAD does both (each question is padded with silence for it).
"""

import asyncio
import base64
import json
import pathlib
import sys

from openai import AsyncOpenAI

CHUNK = 2400 * 2  # 100 ms of PCM16 at 24 kHz


async def main(base_url: str, model: str, out: pathlib.Path, vad: bool) -> None:
    client = AsyncOpenAI(api_key="unused", websocket_base_url=base_url)
    turns = []
    async with client.realtime.connect(model=model) as conn:
        first = await conn.recv()
        assert first.type == "session.created", first
        await conn.session.update(
            session={
                "type": "realtime",
                "max_output_tokens": 40,
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500} if vad else None,
                    },
                },
            }
        )
        updated = await conn.recv()
        assert updated.type == "session.updated", updated
        for i in range(2):
            pcm = (out / f"q{i}.pcm").read_bytes()
            for at in range(0, len(pcm), CHUNK):
                await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[at : at + CHUNK]).decode())
            if not vad:
                await conn.input_audio_buffer.commit()
                await conn.response.create(response={"max_output_tokens": 40})
            audio = bytearray()
            kinds = []
            heard = {}
            async for event in conn:
                kinds.append(event.type)
                if event.type == "error":
                    raise SystemExit(f"error event: {event.error}")
                if event.type == "input_audio_buffer.speech_started":
                    heard["start_ms"] = event.audio_start_ms
                if event.type == "input_audio_buffer.speech_stopped":
                    heard["end_ms"] = event.audio_end_ms
                if event.type == "response.output_audio.delta":
                    audio += base64.b64decode(event.delta)
                if event.type == "response.done":
                    done = event.response.to_dict()
                    break
            (out / f"reply{i}.pcm").write_bytes(bytes(audio))
            turns.append({"done": done, "events": kinds, "heard": heard})
    (out / "report.json").write_text(json.dumps({"turns": turns}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), sys.argv[4:] == ["vad"]))
