"""LiveKit Agents' OpenAI realtime client (`livekit-plugins-openai`) on the server's /v1/realtime.

Usage: realtime_livekit.py HTTP_BASE_URL MODEL DIR MODE.

MODE `manual`: `RealtimeModel(base_url=..., turn_detection=None)`; its session, on DIR/q.pcm
(PCM16 mono, 24 kHz): `update_instructions`, `update_tools` (kept and echoed), `push_audio` (100 ms frames), `commit_audio`,
`generate_reply()` (which resolves only when `response.created` echoes the request's
metadata), the reply's audio read from the generation's message stream to DIR/reply.pcm; then
a second `generate_reply()` on the same question (the first reply's history before it) that
`interrupt()` cancels at its first audio.

MODE `default`: `RealtimeModel(base_url=...)` at its defaults (`semantic_vad`, input
transcription); DIR/q.pcm (speech, then silence) pushed at real-time pace; the server's turn
detection ends the turn and creates the response, whose audio is read from the session's
`generation_created` event to DIR/reply.pcm.

MODE `text`: `RealtimeModel(base_url=..., turn_detection=None)`; `update_chat_ctx` with the
session's chat context plus a user message holding DIR/q.txt (a typed question), then
`generate_reply()`, whose audio goes to DIR/reply.pcm; the session's chat context after it
goes to the report (`chat_ctx`: role and text per item).

DIR/report.json: the raw server events (audio deltas left out), the client events sent, the
session's `error` events, and per reply its `response.done`.
"""

import asyncio
import json
import pathlib
import sys
import time

import aiohttp
from livekit import rtc
from livekit.agents import llm
from livekit.plugins import openai

RATE = 24000
FRAME = 2400  # 100 ms


def frames(pcm: bytes):
    for at in range(0, len(pcm), FRAME * 2):
        chunk = pcm[at : at + FRAME * 2]
        yield rtc.AudioFrame(
            data=chunk, sample_rate=RATE, num_channels=1, samples_per_channel=len(chunk) // 2
        )


async def read_generation(gen) -> bytes:
    """The audio of a generation's messages, until the generation ends."""
    audio = bytearray()
    async for msg in gen.message_stream:
        async for frame in msg.audio_stream:
            audio += frame.data.tobytes()
    return bytes(audio)


async def wait_for(report: dict, kind: str, count: int, seconds: float) -> None:
    """Waits until `count` server events of `kind` arrived."""
    async with asyncio.timeout(seconds):
        while sum(1 for e in report["server"] if e.get("type") == kind) < count:
            await asyncio.sleep(0.05)


@llm.function_tool
async def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


async def manual(sess, pcm: bytes, out: pathlib.Path, report: dict) -> None:
    await sess.update_instructions("Answer in one short sentence.")
    await sess.update_tools([get_weather])
    await wait_for(report, "session.updated", 3, 30)
    for f in frames(pcm):
        sess.push_audio(f)
    sess.commit_audio()
    gen = await asyncio.wait_for(sess.generate_reply(), 30)
    report["generate_reply_resolved"] = gen.response_id
    audio = await asyncio.wait_for(read_generation(gen), 120)
    (out / "reply.pcm").write_bytes(audio)
    await wait_for(report, "response.done", 1, 120)

    # A second reply to the same question, interrupted at its first audio.
    for f in frames(pcm):
        sess.push_audio(f)
    sess.commit_audio()
    gen = await asyncio.wait_for(sess.generate_reply(), 30)
    async for msg in gen.message_stream:
        async for _frame in msg.audio_stream:
            sess.interrupt()
            break
        break
    await wait_for(report, "response.done", 2, 120)


async def default(sess, pcm: bytes, out: pathlib.Path, report: dict) -> None:
    generations: asyncio.Queue = asyncio.Queue()
    sess.on("generation_created", generations.put_nowait)
    start = time.monotonic()
    for i, f in enumerate(frames(pcm)):
        sess.push_audio(f)
        await asyncio.sleep(max(0.0, start + (i + 1) * 0.1 - time.monotonic()))
    gen = await asyncio.wait_for(generations.get(), 60)
    report["server_initiated"] = not gen.user_initiated
    audio = await asyncio.wait_for(read_generation(gen), 120)
    (out / "reply.pcm").write_bytes(audio)
    await wait_for(report, "response.done", 1, 120)


async def text(sess, out: pathlib.Path, report: dict) -> None:
    ctx = sess.chat_ctx.copy()
    ctx.add_message(role="user", content=(out / "q.txt").read_text())
    await asyncio.wait_for(sess.update_chat_ctx(ctx), 30)
    gen = await asyncio.wait_for(sess.generate_reply(), 30)
    report["generate_reply_resolved"] = gen.response_id
    audio = await asyncio.wait_for(read_generation(gen), 120)
    (out / "reply.pcm").write_bytes(audio)
    await wait_for(report, "response.done", 1, 120)
    report["chat_ctx"] = [
        {"role": item.role, "text": item.text_content}
        for item in sess.chat_ctx.items
        if item.type == "message"
    ]


async def main(base_url: str, model: str, out: pathlib.Path, mode: str) -> None:
    pcm = b"" if mode == "text" else (out / "q.pcm").read_bytes()
    report = {"server": [], "client": [], "errors": []}
    async with aiohttp.ClientSession() as http:
        kwargs = {"turn_detection": None} if mode in ("manual", "text") else {}
        rt = openai.realtime.RealtimeModel(
            base_url=base_url, model=model, api_key="unused", http_session=http, **kwargs
        )
        sess = rt.session()

        def on_server(e: dict) -> None:
            if e.get("type") == "response.output_audio.delta":
                e = {**e, "delta": len(e["delta"])}
            report["server"].append(e)

        def on_client(e: dict) -> None:
            if e.get("type") == "input_audio_buffer.append":
                return
            report["client"].append(e)

        sess.on("openai_server_event_received", on_server)
        sess.on("openai_client_event_queued", on_client)
        sess.on("error", lambda e: report["errors"].append(repr(e.error)))
        try:
            if mode == "manual":
                await manual(sess, pcm, out, report)
            elif mode == "text":
                await text(sess, out, report)
            else:
                await default(sess, pcm, out, report)
        finally:
            report["done"] = [e["response"] for e in report["server"] if e.get("type") == "response.done"]
            (out / "report.json").write_text(json.dumps(report, default=str))
            await sess.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), sys.argv[4]))
