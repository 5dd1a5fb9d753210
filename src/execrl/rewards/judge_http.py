"""The judge's one HTTP call: an OpenAI chat-completions request, its reply text, or a typed error.

Standard library only (``http.client``), behind one function, :func:`chat_reply`, so a shared client can
replace it (a robust ``execrl.chat_http`` is being written on another branch; swap it in here). What it
bounds: the whole request by one deadline (every socket operation gets the time left, so a reply trickling
a byte a second still ends on time), the bytes read (``max_reply_bytes``; a larger ``Content-Length`` is
refused before reading), no redirects (a 3xx is an error: following one would send the API key to another
host). Errors, one class with a ``kind``::

    JudgeHTTPError.kind: "request" (bad URL) | "connection" | "timeout" | "redirect" | "status" (non-2xx)
                         | "too_large" | "not_json" | "shape" (no choices[0].message)

Limits: name resolution is not bounded by the deadline; only ``choices[0]`` is read.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ChatReply", "JudgeHTTPError", "chat_reply"]

_CHUNK = 1 << 16


class JudgeHTTPError(Exception):
    """The endpoint gave no usable reply; ``kind`` says why (module doc), the message names it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class ChatReply:
    content: str | None
    finish_reason: str | None


def chat_reply(
    base_url: str,
    body: Mapping[str, Any],
    *,
    api_key: str | None = None,
    deadline_s: float = 60.0,
    max_reply_bytes: int = 1 << 20,
) -> ChatReply:
    """POST ``body`` to ``base_url + "/chat/completions"``; ``choices[0]``'s content and finish reason."""
    parts = urlsplit(base_url.rstrip("/") + "/chat/completions")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise JudgeHTTPError("request", f"judge URL {base_url!r} is not http(s)://host[:port]/...")
    deadline = time.monotonic() + deadline_s
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=_left(deadline))
    try:
        connection.request("POST", parts.path, body=json.dumps(body).encode("utf-8"), headers=headers)
        sock = connection.sock  # every later read gets only the time left
        sock.settimeout(_left(deadline))
        response = connection.getresponse()
        data = _read(response, sock, deadline, max_reply_bytes)
    except TimeoutError:
        raise JudgeHTTPError("timeout", f"no reply from {base_url} within {deadline_s:g} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise JudgeHTTPError("connection", f"{base_url}: {type(exc).__name__}: {exc}") from None
    finally:
        connection.close()
    if 300 <= response.status < 400:
        raise JudgeHTTPError("redirect", f"{base_url}: HTTP {response.status} (redirects are not followed)")
    if not 200 <= response.status < 300:
        raise JudgeHTTPError("status", f"{base_url}: HTTP {response.status}: {data[:200]!r}")
    return _parse(data, base_url)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _read(response: http.client.HTTPResponse, sock: socket.socket, deadline: float, cap: int) -> bytes:
    length = response.getheader("Content-Length")
    if length is not None and length.isdigit() and int(length) > cap:
        raise JudgeHTTPError("too_large", f"the reply announces {length} bytes, more than {cap}")
    parts: list[bytes] = []
    size = 0
    while True:
        sock.settimeout(_left(deadline))
        chunk = response.read1(_CHUNK)
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > cap:
            raise JudgeHTTPError("too_large", f"the reply is larger than {cap} bytes")
        parts.append(chunk)
        _left(deadline)


def _parse(data: bytes, base_url: str) -> ChatReply:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise JudgeHTTPError("not_json", f"{base_url}: the reply is not UTF-8 JSON") from None
    choices = value.get("choices") if isinstance(value, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(message, dict) or not isinstance(content, str | None):
        raise JudgeHTTPError("shape", f"{base_url}: the reply has no choices[0].message with string content")
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    return ChatReply(content, reason if isinstance(reason, str) else None)
