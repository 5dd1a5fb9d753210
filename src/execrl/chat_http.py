"""One OpenAI chat-completions request over HTTP: the answer as typed data, or one typed error.

Why its own module: an endpoint is not trusted (``execrl tools run`` evaluates any server, and the
rollout loop's HTTP model backend samples from one), and everything it sends back ends up in an
episode. Every caller posts through :func:`post_chat` and gets either a :class:`ChatAnswer` whose
strings all encode as UTF-8 and whose JSON nests at most ``max_json_depth`` deep, or a :class:`ChatError`
naming what was wrong; nothing else leaves it (issue 35, class 10: a list, a string ``message``, a
non-JSON page or deep ``arguments`` crashed the run and lost its finished episodes). Standard library
only (``http.client``): it sits in the bottom layer, under everything that talks to a model.

What is checked, and the failure each check answers:

- **a total deadline** per request (``ChatLimits.deadline_s``): every socket operation after the connect
  gets the time that is left, so an answer trickling a byte a second ends at the deadline (urllib's
  ``timeout`` restarts at each read, and never ended);
- **bytes read are capped**: ``max_answer_bytes`` of a 2xx answer (a ``Content-Length`` over it is refused
  before a byte is read), ``max_error_bytes`` kept of an error body, the rest never read (urllib read a
  huge error body whole into memory);
- **no redirects**: a 3xx is an error naming its ``Location``. urllib followed it, sending the
  ``Authorization`` header to the other host, and the page found there was scored as the model's turn;
- **the JSON**: UTF-8, nested at most ``max_json_depth`` deep (measured on the bytes, before parsing), an
  object of OpenAI's shape; a wrong shape names its JSON path (``choices[0].message: expected an
  object, got a string``);
- **text**: ``"\\ud800"`` is valid JSON but not text; every lone surrogate of the answer (and of the request
  body) becomes U+FFFD, so no string raises later in a tokenizer or in ``json.dumps(ensure_ascii=False)``.
  A tool call's ``arguments`` string is kept as sent; :func:`load_arguments` decodes it under the same
  depth bound and text rule, raising ``ValueError`` like any bad JSON.

Errors: one class, :class:`ChatError`, whose ``kind`` says which rule refused::

    ChatError.kind
      "request"     the URL or API key cannot be sent (scheme, host, control characters)
      "connection"  refused, reset, DNS or TLS failure, not HTTP
      "timeout"     no complete answer within deadline_s
      "redirect"    a 3xx (never followed)
      "status"      any other non-2xx, or a 2xx whose body is an OpenAI error object
      "too_large"   the body passed max_answer_bytes
      "not_json"    not UTF-8 or not JSON
      "too_deep"    nested past max_json_depth
      "shape"       JSON, but not a chat completion (names the path)

Limits: only ``choices[0]`` is read (the callers ask for one); ``content`` must be a string or null (a list
of content parts is refused as a shape); name resolution (``getaddrinfo``) is not bounded by the deadline,
the TCP connect and the TLS handshake are each bounded by the time left when they start.
"""

from __future__ import annotations

import http.client
import io
import itertools
import json
import operator
import re
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit

__all__ = [
    "ChatAnswer",
    "ChatError",
    "ChatLimits",
    "ChatToolCall",
    "ChatUsage",
    "MAX_JSON_DEPTH",
    "check_api_key",
    "check_base_url",
    "clean_text",
    "decode_answer",
    "json_depth",
    "load_arguments",
    "parse_answer",
    "post_chat",
]

MAX_JSON_DEPTH = 64  # an answer nests ~6 levels; tool arguments rarely more than ten
_CHUNK_BYTES = 1 << 16
_SHOWN_CHARS = 300  # of an error body or a wrong value, in a message
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_STRING = re.compile(rb'"[^"]*"')  # once escaped backslashes and quotes are removed
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")  # an opener steps +1 and a closer -1, after - 1


class ChatError(Exception):
    """The endpoint's answer is unusable or never came; ``kind`` is one of the module doc's table,
    ``status`` the HTTP status where there was one. The message is one line naming the problem."""

    def __init__(self, kind: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.status = kind, message, status


@dataclass(frozen=True)
class ChatLimits:
    """What one request may cost: ``deadline_s`` in total, bytes read, JSON depth."""

    deadline_s: float = 600.0
    max_answer_bytes: int = 8 << 20
    max_error_bytes: int = 64 << 10
    max_json_depth: int = MAX_JSON_DEPTH

    def __post_init__(self) -> None:
        if not self.deadline_s > 0:
            raise ValueError(f"ChatLimits.deadline_s must be > 0, got {self.deadline_s}")
        for name in ("max_answer_bytes", "max_error_bytes", "max_json_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"ChatLimits.{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class ChatToolCall:
    """One ``tool_calls`` entry: ``arguments`` as sent, a JSON string (OpenAI) or an object."""

    id: str | None
    name: str
    arguments: str | dict[str, Any]

    def arguments_text(self) -> str:
        """The arguments as the wire format's string."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class ChatUsage:
    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass(frozen=True)
class ChatAnswer:
    """``choices[0]`` of a chat completion, and the answer's ``usage`` (None when it sent none)."""

    content: str | None
    tool_calls: tuple[ChatToolCall, ...]
    finish_reason: str | None
    usage: ChatUsage | None


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD: it encodes as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def _one_line(text: str, limit: int = _SHOWN_CHARS) -> str:
    flat = " ".join(clean_text(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def check_base_url(url: str) -> str:
    """``url`` without its trailing ``/`` if it can be a base URL (``http(s)://host[:port][/path]``);
    raises ``ValueError`` naming the problem otherwise."""
    if not url or not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError(f"{url!r}: not an http(s) URL (empty, or a space, control or non-ASCII character)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{url!r}: the scheme must be http or https, got {parts.scheme or 'none'!r}")
    if not parts.hostname:
        raise ValueError(f"{url!r}: no host (e.g. http://127.0.0.1:8000/v1)")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{url!r}: credentials in the URL are not sent; pass the API key separately")
    if parts.query or parts.fragment:
        raise ValueError(f"{url!r}: a base URL takes no ?query or #fragment")
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number in range)
    except ValueError as exc:
        raise ValueError(f"{url!r}: {exc}") from None
    return url.rstrip("/")


def check_api_key(key: str) -> None:
    """Raise ``ValueError`` if ``key`` cannot travel in an ``Authorization`` header."""
    if not key.strip():
        raise ValueError("the API key is empty")
    if not key.isascii() or not key.isprintable():
        raise ValueError("the API key holds a control or non-ASCII character")


def json_depth(raw: bytes) -> int:
    """The deepest bracket nesting of the JSON text ``raw`` (strings skipped), without parsing it: C loops
    over the bytes (translate, accumulate), a few times faster than ``json.loads``."""
    bare = _JSON_STRING.sub(b"0", raw.replace(b"\\\\", b"").replace(b'\\"', b""))
    steps = bare.translate(None, _NOT_BRACKETS).translate(_STEP)
    return max(itertools.accumulate(map(operator.sub, steps, itertools.repeat(1))), default=0)


def _clean(value: Any) -> Any:
    """Decoded JSON with every string (keys too) made UTF-8-encodable; ``value`` nests boundedly."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k): _clean(v) for k, v in value.items()}
    return value


def _loads(text: str, raw: bytes, max_depth: int, what: str) -> Any:
    """``json.loads`` under the depth bound; ``ValueError`` naming ``what`` otherwise."""
    if json_depth(raw) > max_depth:
        raise _TooDeep(f"{what} nests more than {max_depth} levels deep")
    try:
        return _clean(json.loads(text))
    except RecursionError:  # brackets the byte count missed (unbalanced): too deep for the parser
        raise _TooDeep(f"{what} nests more than {max_depth} levels deep") from None


class _TooDeep(ValueError):
    pass


def load_arguments(arguments: str | Mapping[str, Any], *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A tool call's arguments decoded: an object is returned as it is; a string is parsed as JSON nested
    at most ``max_depth`` deep, its strings made encodable. Raises ``ValueError`` (not JSON, too deep)."""
    if not isinstance(arguments, str):
        return arguments
    return _loads(arguments, arguments.encode("utf-8", "surrogatepass"), max_depth, "the arguments")


def decode_answer(raw: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> ChatAnswer:
    """A 2xx body as a :class:`ChatAnswer`; :class:`ChatError` (not_json, too_deep, shape, status)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ChatError("not_json", f"the answer is not UTF-8 (invalid byte at offset {exc.start})") from None
    try:
        data = _loads(text, raw, max_depth, "the answer")
    except _TooDeep as exc:
        raise ChatError("too_deep", str(exc)) from None
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's digit limit
        raise ChatError(
            "not_json", f"the answer is not JSON ({_one_line(str(exc), 120)}): {_one_line(text, 120)!r}"
        ) from None
    return parse_answer(data)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), "a number")


def _shape(where: str, expected: str, value: Any) -> ChatError:
    return ChatError("shape", f"the answer's {where}: expected {expected}, got {_kind(value)}")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _shape(where, "an object", value)
    return value


def _optional_str(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _shape(where, "a string or null", value)
    return value


def _count(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _shape(where, "a non-negative integer or null", value)
    return value


def _tool_call(entry: Any, where: str) -> ChatToolCall:
    entry = _object(entry, where)
    function = _object(entry.get("function"), f"{where}.function")
    name = function.get("name")
    if not isinstance(name, str):
        raise _shape(f"{where}.function.name", "a string", name)
    arguments = function.get("arguments")
    arguments = "{}" if arguments is None else arguments
    if not isinstance(arguments, str | dict):
        raise _shape(f"{where}.function.arguments", "a string or an object", arguments)
    return ChatToolCall(_optional_str(entry.get("id"), f"{where}.id"), name, arguments)


def _usage(value: Any) -> ChatUsage | None:
    if value is None:
        return None
    usage = _object(value, "usage")
    return ChatUsage(
        _count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        _count(usage.get("completion_tokens"), "usage.completion_tokens"),
    )


def parse_answer(data: Any) -> ChatAnswer:
    """Decoded JSON (strings already encodable) as a :class:`ChatAnswer`, or ``ChatError`` naming the
    first path of the wrong shape (``shape``), or an OpenAI error object sent with a 2xx (``status``)."""
    answer = _object(data, "top level")
    if "choices" not in answer and "error" in answer:
        error = answer["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise ChatError("status", f"the answer is an error: {_one_line(str(message))}")
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _shape("choices", "a non-empty list", choices)
    choice = _object(choices[0], "choices[0]")
    message = _object(choice.get("message"), "choices[0].message")
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise _shape("choices[0].message.tool_calls", "a list or null", calls)
    return ChatAnswer(
        content=_optional_str(message.get("content"), "choices[0].message.content"),
        tool_calls=tuple(
            _tool_call(c, f"choices[0].message.tool_calls[{i}]") for i, c in enumerate(calls or ())
        ),
        finish_reason=_optional_str(choice.get("finish_reason"), "choices[0].finish_reason"),
        usage=_usage(answer.get("usage")),
    )


class _DeadlineSocket:
    """A connected socket whose every send and receive gets the time left before ``deadline``; what
    ``http.client`` needs of a socket (``sendall``, ``makefile``, ``close``). ``close`` leaves the socket
    open: ``http.client`` closes its connection once the headers say so, before the body is read (a real
    socket counts its ``makefile`` readers for this); :func:`post_chat` closes it at the end."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock, self._deadline = sock, deadline

    def _arm(self) -> None:
        self._sock.settimeout(_left(self._deadline))

    def sendall(self, data: bytes) -> None:
        self._arm()
        self._sock.sendall(data)

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        self._arm()
        return self._sock.recv_into(buffer, nbytes)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_Reader(self))

    def close(self) -> None:
        pass

    def release(self) -> None:
        self._sock.close()


class _Reader(io.RawIOBase):
    def __init__(self, sock: _DeadlineSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline passed")
    return left


def _connect(parts: SplitResult, deadline: float) -> tuple[http.client.HTTPConnection, _DeadlineSocket]:
    """An HTTP connection over a socket bounded by ``deadline`` (TLS for https, certificates checked),
    and that socket (``release`` it when done)."""
    https = parts.scheme == "https"
    host, port = parts.hostname or "", parts.port or (443 if https else 80)
    sock = socket.create_connection((host, port), timeout=_left(deadline))
    try:
        if https:
            sock.settimeout(_left(deadline))
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise
    connection = http.client.HTTPConnection(host, port)
    connection.default_port = 443 if https else 80  # the Host header leaves the scheme's port out
    bounded = _DeadlineSocket(sock, deadline)
    connection.sock = bounded
    return connection, bounded


def _read_capped(response: http.client.HTTPResponse, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of the body, and whether there was more (the rest is not read)."""
    chunks: list[bytes] = []
    total = 0
    while total <= cap:
        chunk = response.read1(min(_CHUNK_BYTES, cap + 1 - total))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)[:cap], True


def _declared_length(response: http.client.HTTPResponse) -> int | None:
    value = response.getheader("Content-Length")
    return int(value) if value is not None and value.strip().isdigit() else None


def _answer(url: str, response: http.client.HTTPResponse, limits: ChatLimits) -> ChatAnswer:
    status = response.status
    if 300 <= status < 400:
        where = _one_line(response.getheader("Location") or "nowhere", 200)
        raise ChatError(
            "redirect",
            f"HTTP {status} from {url}, a redirect to {where!r}: not followed (the API key goes to the URL "
            "given and nowhere else); give the final URL",
            status=status,
        )
    if not 200 <= status < 300:
        body, more = _read_capped(response, limits.max_error_bytes)
        text = _one_line(body.decode("utf-8", "replace"))
        raise ChatError("status", f"HTTP {status} from {url}: {text}{'...' if more else ''}", status=status)
    declared = _declared_length(response)
    too_large = (
        f"{url}: the answer is larger than {limits.max_answer_bytes} bytes (ChatLimits.max_answer_bytes)"
    )
    if declared is not None and declared > limits.max_answer_bytes:
        raise ChatError("too_large", too_large)
    raw, more = _read_capped(response, limits.max_answer_bytes)
    if more:
        raise ChatError("too_large", too_large)
    try:
        return decode_answer(raw, max_depth=limits.max_json_depth)
    except ChatError as exc:
        raise ChatError(exc.kind, f"{url}: {exc.message}", status=status) from None


def post_chat(
    base_url: str,
    body: Mapping[str, Any],
    *,
    api_key: str | None = None,
    limits: ChatLimits | None = None,
) -> ChatAnswer:
    """POST ``body`` (an OpenAI chat-completions request) to ``base_url + "/chat/completions"``; the
    answer's ``choices[0]`` and usage, or :class:`ChatError` (module doc). ``api_key``: sent as
    ``Authorization: Bearer KEY`` to that URL only."""
    limits = limits or ChatLimits()
    try:
        url = check_base_url(base_url) + "/chat/completions"
        if api_key is not None:
            check_api_key(api_key)
    except ValueError as exc:
        raise ChatError("request", str(exc)) from None
    data = clean_text(json.dumps(body, ensure_ascii=False)).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    deadline = time.monotonic() + limits.deadline_s
    parts = urlsplit(url)
    try:
        connection, sock = _connect(parts, deadline)
        try:
            connection.request("POST", parts.path, body=data, headers=headers)
            return _answer(url, connection.getresponse(), limits)
        finally:
            connection.close()
            sock.release()
    except TimeoutError:
        raise ChatError(
            "timeout", f"{url}: no complete answer within {limits.deadline_s:g} s (the request's deadline)"
        ) from None
    except (OSError, http.client.HTTPException, UnicodeError) as exc:
        raise ChatError("connection", f"{url}: {_one_line(str(exc) or type(exc).__name__)}") from None
