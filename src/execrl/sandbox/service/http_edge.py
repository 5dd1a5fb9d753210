"""Reading a JSON request body at an HTTP edge: the rules every execrl server applies before its own schema.

Used by the sandbox service (``server.py``) and ``execrl serve``; each maps the refusals below into its
own API's error shape (the sandbox's ``{"error", "detail"}`` 4xx, OpenAI's ``{"error": {...}}``).

Headers first, body never read when they refuse (:func:`check_headers`):

- an ``Origin`` header not in ``allowed_origins``: 403. A web page's cross-origin ``text/plain`` or form
  POST needs no CORS preflight, so without this any page a user opens could call the API; browsers always
  send ``Origin`` on a cross-origin POST (and on DNS-rebound ones), programs send none unless told to;
- a Content-Type other than ``application/json``, or a ``charset`` other than UTF-8 (RFC 8259: JSON is
  UTF-8): 415;
- a ``Content-Encoding`` other than ``identity``: 415. A gzip body passes the ``Content-Length`` check
  at a thousandth of its size; inflating two 1 GB ones on the event loop (to refuse them past
  ``client_max_size``, then while draining the rest) stalled ``/v1/ping`` for seconds (issue 35,
  class 8). Serve with ``auto_decompress=False`` too, so that the unread rest is never inflated;
- a ``Content-Length`` over the cap: 413 at once, before a byte of the body is read (a 66 MB body was
  read whole before aiohttp's own cap refused it).

Then the body (:func:`decode_json`): not UTF-8, not JSON, nested deeper than ``caps.MAX_JSON_DEPTH`` or
holding more than ``caps.MAX_JSON_ITEMS`` values, an integer longer than Python's 4,300-digit
conversion limit (``json.loads`` raised a ``ValueError`` that became a 500) and a string with a lone
surrogate (``"\\ud800"``: valid JSON, but no text; it made the tokenizer raise) are each a
:class:`~execrl.sandbox.service.serialize.RequestFieldError` naming the field path (``limits.timeout_s``,
``messages[0].content``). A body over ``offload_bytes`` is decoded on a worker thread.

Large bodies are decoded one at a time, on a thread of their own, in pieces (``caps.body_slices``):
UTF-8, the shape scan and the surrogate search are C calls of ~1 MiB each, so the GIL changes hands
between them and a health check waits milliseconds, not the ~0.5 s one call over 60 MiB held it (two
such bodies at once stalled ``/v1/ping`` for seconds: issue 35, class 8). Limits, measured: ``json.loads``
of a body the checks let through is still one call (~0.15 s for 60 MiB); the body cap
(``--max-body-mb``), which the ``Content-Length`` check enforces without reading, bounds it.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from execrl.sandbox.service.caps import SLICE_BYTES, check_json_shape, json_too_deep
from execrl.sandbox.service.serialize import FieldProblem, RequestFieldError

__all__ = ["BodyRefused", "HugeInt", "check_headers", "decode_json", "read_json_body"]

OFFLOAD_BYTES = 1 << 20
_DECODER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="execrl-body")  # large bodies, in turn
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # the only way JSON text can carry a surrogate


class BodyRefused(Exception):
    """A request refused on its headers, before its body is read (403, 413, 415)."""

    def __init__(self, status: int, problem: FieldProblem) -> None:
        super().__init__(problem.message)
        self.status = status
        self.problem = problem


@dataclass(frozen=True)
class HugeInt:
    """An integer literal too long to convert (kept as its digit count while parsing, then refused)."""

    digits: int


def check_headers(request: web.Request, *, allowed_origins: tuple[str, ...], max_body_bytes: int) -> None:
    """Refuse by the headers alone (see the module docstring); raises :class:`BodyRefused`."""
    origin = request.headers.get("Origin")
    if origin is not None and origin not in allowed_origins:
        message = f"{origin!r} is not allowed (server option --allow-origin); browsers may not call this API"
        raise BodyRefused(403, FieldProblem("Origin", message, "origin_forbidden"))
    if request.content_type != "application/json":
        message = f"is {request.content_type!r}; send the body as JSON with Content-Type: application/json"
        raise BodyRefused(415, FieldProblem("Content-Type", message, "unsupported_media_type"))
    charset = request.charset
    if charset is not None and charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
        message = f"declares charset {charset[:40]!r}; JSON is UTF-8 (send charset=utf-8 or none)"
        raise BodyRefused(415, FieldProblem("Content-Type", message, "unsupported_media_type"))
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        message = f"is {encoding[:40]!r}; send the body uncompressed (no Content-Encoding)"
        raise BodyRefused(415, FieldProblem("Content-Encoding", message, "unsupported_media_type"))
    length = request.content_length
    if length is not None and length > max_body_bytes:
        message = (
            f"Request Entity Too Large: the body is {length} bytes; this server reads at most "
            f"{max_body_bytes} bytes per request (server option --max-body-mb)"
        )  # named by the path, as aiohttp's own 413 for a chunked body is
        raise BodyRefused(413, FieldProblem(request.path, message, "http_error"))


async def read_json_body(
    request: web.Request,
    *,
    allowed_origins: tuple[str, ...],
    max_body_bytes: int,
    offload_bytes: int = OFFLOAD_BYTES,
) -> Any:
    """The decoded JSON body of ``request`` after :func:`check_headers`; bodies over ``offload_bytes`` are
    decoded on a worker thread. A chunked body without ``Content-Length`` is capped by aiohttp's
    ``client_max_size`` (set it to ``max_body_bytes``) while it is read."""
    check_headers(request, allowed_origins=allowed_origins, max_body_bytes=max_body_bytes)
    raw = await request.read()
    if len(raw) <= offload_bytes:
        return decode_json(raw)
    return await asyncio.get_running_loop().run_in_executor(_DECODER, decode_json, raw)


def _int_or_huge(text: str) -> int | HugeInt:
    digits = len(text.lstrip("-"))
    limit = sys.get_int_max_str_digits() or 1 << 62
    return HugeInt(digits) if digits > limit else int(text)


def decode_json(raw: bytes) -> Any:
    """``raw`` as JSON under the rules of the module docstring; raises ``RequestFieldError``."""
    text = _utf8(raw)
    check_json_shape(raw)
    huge: list[bool] = []

    def parse_int(literal: str) -> int | HugeInt:
        value = _int_or_huge(literal)
        if isinstance(value, HugeInt):
            huge.append(True)
        return value

    try:
        value = json.loads(text, parse_int=parse_int)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise RequestFieldError(
            [FieldProblem("body", f"is not JSON: {exc.msg} ({where})", "json_invalid")]
        ) from None
    except RecursionError:  # unbalanced brackets that nest past the parser's stack
        raise RequestFieldError([json_too_deep()]) from None
    if huge or any(_SURROGATE_ESCAPE.search(piece) for piece in _overlapping(raw, 5)):
        _refuse_untextual(value)
    return value


def _utf8(raw: bytes) -> str:
    """``raw`` decoded as UTF-8 in pieces of ``caps.SLICE_BYTES``, or the 422 naming the offset."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts = []
    for start in range(0, len(raw), SLICE_BYTES):
        buffered = len(decoder.getstate()[0])  # the end of a character cut by the previous piece
        try:
            parts.append(
                decoder.decode(raw[start : start + SLICE_BYTES], final=start + SLICE_BYTES >= len(raw))
            )
        except UnicodeDecodeError as exc:
            offset = start - buffered + exc.start
            raise RequestFieldError(
                [FieldProblem("body", f"is not UTF-8 (invalid byte at offset {offset})", "unicode_error")]
            ) from None
    return "".join(parts)


def _overlapping(raw: bytes, overlap: int) -> Iterator[bytes]:
    """``raw`` in pieces of ``caps.SLICE_BYTES``, each starting ``overlap - 1`` bytes before the last one
    ended (so a match of up to ``overlap`` bytes is whole in one of them)."""
    for start in range(0, len(raw), SLICE_BYTES):
        yield raw[max(0, start - overlap + 1) : start + SLICE_BYTES]


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """(field path, value) of every value and object key inside ``value``, depth first; iterative (the
    depth is already bounded)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        yield where, item
        if isinstance(item, dict):
            yield from ((where, key) for key in item)  # a key is text of its object
            stack.extend(reversed([(f"{where}.{k}" if where else str(k), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{where}[{i}]", child) for i, child in enumerate(item)]))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _refuse_untextual(value: Any) -> None:
    """Raise naming the first integer past the conversion limit or string with a lone surrogate."""
    for where, item in _walk(value):
        field = where or "body"
        if isinstance(item, HugeInt):
            limit = sys.get_int_max_str_digits()
            message = f"is an integer of {item.digits} digits; at most {limit} digits are accepted"
            raise RequestFieldError([FieldProblem(field, message, "int_parsing")])
        if isinstance(item, str) and _has_surrogate(item):
            message = "holds a lone UTF-16 surrogate escape (\\ud800-\\udfff), which is not text"
            raise RequestFieldError([FieldProblem(field, message, "string_unicode")])
