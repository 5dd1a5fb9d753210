"""A hostile HTTP endpoint on 127.0.0.1 for the client-side tests (``execrl.chat_http``, ``execrl tools
run``): each request is answered by a scripted function writing whatever bytes it likes (a page that is
not JSON, a redirect, a body trickled a byte at a time, a 50 MB error), and every request is recorded.

It stops by itself: one thread, a bounded number of requests, a lifetime, a timeout on every socket; a
client that hangs up ends the answer being written (the write fails and is dropped).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Request", "Respond", "hostile_server", "http_answer", "json_answer"]


@dataclass(frozen=True)
class Request:
    index: int  # 0 for the first request the server saw
    head: str  # request line and headers
    body: bytes

    def header(self, name: str) -> str | None:
        for line in self.head.split("\r\n")[1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None

    def json(self) -> Any:
        return json.loads(self.body)


Respond = Callable[[Request, socket.socket], None]  # writes the answer on the socket


def http_answer(status: int, body: bytes, *, headers: dict[str, str] | None = None) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {"Content-Type": "application/json"}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def json_answer(payload: Any, status: int = 200) -> Respond:
    data = http_answer(status, json.dumps(payload).encode())
    return lambda _request, sock: sock.sendall(data)


def _read_request(sock: socket.socket, index: int) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    text = head.decode("latin-1")
    length = 0
    for line in text.split("\r\n")[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return Request(index, text, body)


def _serve(listener: socket.socket, respond: Respond, seen: list[Request], stop: threading.Event,
           max_requests: int, lifetime_s: float) -> None:  # fmt: skip
    ends = time.monotonic() + lifetime_s
    while not stop.is_set() and len(seen) < max_requests and time.monotonic() < ends:
        try:
            sock, _ = listener.accept()
        except TimeoutError:
            continue
        with sock:
            sock.settimeout(10.0)
            try:
                request = _read_request(sock, len(seen))
                if request is None:
                    continue
                seen.append(request)
                respond(request, sock)
            except OSError:  # the client hung up (as it should on a too-large or too-slow answer)
                pass


@contextmanager
def hostile_server(
    respond: Respond, *, max_requests: int = 64, lifetime_s: float = 120.0
) -> Iterator[tuple[str, list[Request]]]:
    """``(base URL ending in /v1, the requests seen)`` while the server runs."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    seen: list[Request] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=_serve, args=(listener, respond, seen, stop, max_requests, lifetime_s), daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", seen
    finally:
        stop.set()
        thread.join(timeout=15)
        listener.close()
