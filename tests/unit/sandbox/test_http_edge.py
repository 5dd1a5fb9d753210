"""``sandbox/service/http_edge.py``: the JSON-body rules shared by the sandbox service and ``execrl serve``
(issue 24, classes 1 and 6), on hand-made bodies and an in-process aiohttp app."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from aiohttp import web

from execrl.sandbox.service import http_edge
from execrl.sandbox.service.http_edge import decode_json, read_json_body
from execrl.sandbox.service.serialize import RequestFieldError
from execrl.serve.background import serve_in_thread


def _problem(raw: bytes) -> tuple[str, str]:
    with pytest.raises(RequestFieldError) as caught:
        decode_json(raw)
    problem = caught.value.problems[0]
    return problem.field, problem.kind


def test_integers_past_the_conversion_limit_are_refused_naming_their_path() -> None:
    """Bug: json.loads raised ValueError for a 4,301-digit integer; both servers answered 500."""
    big = "7" * 4301
    assert _problem(f'{{"a": {{"b": [1, {big}]}}}}'.encode()) == ("a.b[1]", "int_parsing")
    assert _problem(f"[-{big}]".encode()) == ("[0]", "int_parsing")
    assert _problem(big.encode()) == ("body", "int_parsing")
    assert decode_json(("9" * 4300).encode()) == int("9" * 4300)  # the limit itself is accepted


def test_lone_surrogates_are_refused_and_pairs_kept() -> None:
    """Bug: "\\ud800" is valid JSON but not text; the tokenizer (serve) raised on it, a 500."""
    assert _problem(b'{"messages": [{"content": "x\\udc00"}]}') == ("messages[0].content", "string_unicode")
    assert _problem(b'{"\\ud800": 1}') == ("body", "string_unicode")  # a key is text too
    assert decode_json(b'{"s": "\\ud83d\\ude00", "t": "\\\\ud800"}') == {"s": "\U0001f600", "t": "\\ud800"}


def test_not_utf8_deep_and_not_json_name_the_body() -> None:
    assert _problem(b'{"a": "\xff"}') == ("body", "unicode_error")
    assert _problem(b"[" * 5000 + b"]" * 5000) == ("body", "json_invalid")
    assert _problem(b"{nope") == ("body", "json_invalid")


async def _echo(request: web.Request) -> web.Response:
    try:
        body = await read_json_body(request, allowed_origins=(), max_body_bytes=8 << 20)
    except http_edge.BodyRefused as exc:
        return web.json_response({"field": exc.problem.field}, status=exc.status)
    return web.json_response({"keys": sorted(body)})


def _post(url: str, data: bytes, content_type: str = "application/json") -> int:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_large_body_is_decoded_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: a large body was decoded and parsed on the event loop (0.6 s for 60 MiB on a quiet machine,
    6-8 s under load: past the Deployment's 2 s readiness probe). Bodies over 1 MiB go to a thread; a
    refused charset is never decoded."""
    seen: list[str] = []
    original = http_edge.decode_json

    def recording(raw: bytes) -> Any:
        seen.append(threading.current_thread().name)
        return original(raw)

    monkeypatch.setattr(http_edge, "decode_json", recording)
    app = web.Application(client_max_size=8 << 20)
    app.router.add_post("/", _echo)
    with serve_in_thread(app) as url:
        assert _post(f"{url}/", b'{"small": 1}') == 200
        assert _post(f"{url}/", b'{"big": "' + b"x" * (2 << 20) + b'"}') == 200
        assert _post(f"{url}/", b"{}", "application/json; charset=utf-16") == 415
    loop_thread = "execrl-serve"  # serve_in_thread's event-loop thread
    assert seen == [loop_thread, seen[1]] and seen[1] != loop_thread, seen
