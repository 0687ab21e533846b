"""The OpenAI Agents SDK (`openai-agents`) at its defaults on the server's /v1/realtime.

Usage: realtime_agents.py WS_URL DIR [interrupt | text]. A `RealtimeAgent` run by a `RealtimeRunner`
with no model settings (the SDK's default session: `semantic_vad`, input transcription, voice
`ash`, ...) connects to WS_URL; DIR/q.pcm (PCM16 mono, 24 kHz: speech, then silence) is
streamed at real-time pace in 100 ms chunks with `send_audio` (no commit: the server's turn
detection ends the turn and creates the response). Writes the reply's audio (the SDK's `audio`
events) to DIR/reply.pcm and DIR/report.json: the session the server echoed, where it heard the
speech start and stop, each response.done (as the server sent it), the raw server event types
and every `error` event the SDK raised (a server event it could not parse is one).

Without a mode it also waits for the user's transcript (the input transcription the default
session asks for): the `conversation.item.input_audio_transcription.completed` events' and the
SDK's history's user transcripts go to the report (`transcripts`, `history_transcripts`).

With `interrupt`: `session.interrupt()` once half a second of the reply came, then the same
question streamed again for a second turn.

With `text`: no audio is streamed; `session.send_message(DIR/q.txt)` asks a typed question,
whose spoken reply is read as above.
"""

import asyncio
import json
import pathlib
import sys
import time

from agents.realtime import RealtimeAgent, RealtimeRunner

CHUNK = 2400 * 2  # 100 ms of PCM16 at 24 kHz


def user_transcripts(items) -> list:
    """The user's words in the SDK's history `items`: an audio part's transcript, or the text
    the SDK put in its place."""
    return [
        getattr(c, "transcript", None) or getattr(c, "text", None)
        for item in items
        if item.type == "message" and item.role == "user"
        for c in item.content
        if getattr(c, "transcript", None) or getattr(c, "text", None)
    ]


async def main(url: str, out: pathlib.Path, mode: str) -> None:
    interrupt = mode == "interrupt"
    agent = RealtimeAgent(name="Assistant", instructions="You are a helpful voice assistant.")
    runner = RealtimeRunner(starting_agent=agent)
    session = await runner.run(model_config={"url": url, "api_key": "unused"})
    pcm = b"" if mode == "text" else (out / "q.pcm").read_bytes()
    turns = 2 if interrupt else 1
    report = {
        "errors": [], "raw": [], "sessions": [], "heard": [], "done": [], "transcripts": [],
        "history_transcripts": [],
    }
    audio = bytearray()
    answered = asyncio.Event()

    async def stream() -> None:
        if mode == "text":
            await session.send_message((out / "q.txt").read_text())
            return
        for turn in range(turns):
            if turn > 0:
                await answered.wait()
            start = time.monotonic()
            for i, at in enumerate(range(0, len(pcm), CHUNK)):
                await session.send_audio(pcm[at : at + CHUNK])
                # Real-time pace: chunk i goes out 100 ms after chunk i - 1.
                await asyncio.sleep(max(0.0, start + (i + 1) * 0.1 - time.monotonic()))

    async with session:
        sender = asyncio.create_task(stream())
        interrupted = False
        try:
            async with asyncio.timeout(300):
                async for event in session:
                    if event.type == "error":
                        report["errors"].append(str(event.error))
                    elif event.type in ("history_updated", "history_added"):
                        items = event.history if event.type == "history_updated" else [event.item]
                        heard = user_transcripts(items)
                        if event.type == "history_updated":
                            report["history_transcripts"] = heard
                        else:
                            report["history_transcripts"] += heard
                    elif event.type == "audio":
                        if not report["done"]:
                            audio += event.audio.data
                        if interrupt and not interrupted and len(audio) >= 24000:
                            interrupted = True
                            await session.interrupt()
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
                            report["heard"].append({"start_ms": raw["audio_start_ms"]})
                        elif kind == "input_audio_buffer.speech_stopped":
                            report["heard"][-1]["end_ms"] = raw["audio_end_ms"]
                        elif kind == "response.done":
                            report["done"].append(raw["response"])
                            answered.set()
                        elif kind == "conversation.item.input_audio_transcription.completed":
                            report["transcripts"].append(raw["transcript"])
                    transcribed = mode != "" or (
                        len(report["transcripts"]) == turns and report["history_transcripts"]
                    )
                    if len(report["done"]) == turns and transcribed and (
                        not interrupt or "conversation.item.truncated" in report["raw"]
                    ):
                        break
        finally:
            sender.cancel()
    (out / "reply.pcm").write_bytes(bytes(audio))
    (out / "report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], pathlib.Path(sys.argv[2]), (sys.argv[3:] or [""])[0]))
