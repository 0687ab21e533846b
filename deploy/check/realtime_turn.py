"""One Realtime turn against a running `serve`, with Python's standard library only (the image
check runs on a bare host: no `websockets`, no `openai`).

Usage: realtime_turn.py HOST PORT MODEL MAX_OUTPUT_TOKENS [DRAIN_FILE]

Opens ws://HOST:PORT/v1/realtime?model=MODEL (RFC 6455 handshake, its accept key checked),
waits for `session.created`, sends a typed question (`conversation.item.create`) and
`response.create`, and reads events up to `response.done`. Prints one JSON line: the event types
seen (counted), the response's status and usage, and the bytes of PCM16 audio received. Exits 1
when the socket fails, an `error` event comes, or the turn ends without audio.

With DRAIN_FILE (the image check's drain test): creates that file at the first audio delta (the
caller then sends the server SIGTERM), and after `response.done` waits for the server to close
the socket; the report adds the close code and reason (serve's drain: 1001).
"""

import base64
import collections
import hashlib
import json
import os
import socket
import struct
import sys

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, section 1.3


def handshake(sock: socket.socket, host: str, port: int, path: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError(f"connection closed during the handshake: {head!r}")
        head += chunk
    head, rest = head.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    if " 101 " not in lines[0] + " ":
        raise RuntimeError(f"no upgrade: {lines[0]}")
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
    want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    if headers.get("sec-websocket-accept") != want:
        raise RuntimeError(f"bad Sec-WebSocket-Accept: {headers.get('sec-websocket-accept')}")
    return rest


class Socket:
    def __init__(self, sock: socket.socket, pending: bytes):
        self.sock, self.buf = sock, pending
        self.close_code, self.close_reason = None, None

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, opcode: int, payload: bytes) -> None:
        # Client frames are masked (RFC 6455, 5.3).
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send_json(self, event: dict) -> None:
        self.send(0x1, json.dumps(event).encode())

    def recv_message(self):
        """The next text message (fragments joined; pings answered), or None on a close frame."""
        parts = []
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._read(8))
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                if len(payload) >= 2:
                    (self.close_code,) = struct.unpack("!H", payload[:2])
                    self.close_reason = payload[2:].decode(errors="replace")
                return None
            if opcode == 0x9:
                self.send(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode()


def main() -> int:
    host, port, model, max_tokens = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    drain_file = sys.argv[5] if len(sys.argv) > 5 else None
    sock = socket.create_connection((host, port), timeout=120)
    ws = Socket(sock, handshake(sock, host, port, f"/v1/realtime?model={model}"))
    seen = collections.Counter()
    audio = 0
    done = None
    first = json.loads(ws.recv_message())
    if first.get("type") != "session.created":
        print(json.dumps({"error": f"first event {first.get('type')}"}))
        return 1
    seen[first["type"]] += 1
    ws.send_json(
        {
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello, who are you?"}]},
        }
    )
    ws.send_json({"type": "response.create", "response": {"max_output_tokens": max_tokens}})
    while done is None:
        text = ws.recv_message()
        if text is None:
            print(json.dumps({"error": "socket closed before response.done", "seen": seen}))
            return 1
        event = json.loads(text)
        kind = event.get("type")
        seen[kind] += 1
        if kind == "error":
            print(json.dumps({"error": event.get("error"), "seen": seen}))
            return 1
        if kind == "response.output_audio.delta":
            if audio == 0 and drain_file:
                open(drain_file, "w").close()
            audio += len(base64.b64decode(event["delta"]))
        if kind == "response.done":
            done = event["response"]
    report = {"status": done.get("status"), "usage": done.get("usage"), "audio_bytes": audio, "seen": seen}
    if drain_file:
        # The server closes: read to its close frame, then answer it.
        while ws.recv_message() is not None:
            pass
        ws.send(0x8, struct.pack("!H", 1000))
        report["close_code"], report["close_reason"] = ws.close_code, ws.close_reason
    else:
        ws.send(0x8, struct.pack("!H", 1000))
    sock.close()
    print(json.dumps(report))
    ok = audio > 0 and done.get("status") in ("completed", "incomplete")
    if drain_file:
        ok = ok and ws.close_code == 1001
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
