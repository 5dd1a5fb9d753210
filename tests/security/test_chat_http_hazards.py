"""The chat-completions client (``execrl.chat_http``) against hostile endpoints (issue 35, class 10).

Each test names the failure of the client it replaced (``urllib`` in ``tools/remote.py``): an answer
trickled a byte at a time never timed out (the timeout restarted at each read); an error body was read
whole; a redirect was followed with the bearer key, and the page found there scored as the model's turn;
an answer that was not an OpenAI chat completion raised ``KeyError``/``TypeError``/``RecursionError`` in
the caller. Now: a typed answer whose strings all encode as UTF-8, or one ``ChatError``; nothing else.
The endpoints are loopback servers that stop by themselves (``hostile_http.py``).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import pytest
from hostile_http import Request, hostile_server, http_answer, json_answer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from execrl.chat_http import (
    ChatAnswer,
    ChatError,
    ChatLimits,
    check_base_url,
    decode_answer,
    load_arguments,
    post_chat,
)

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
OK = {"choices": [{"message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}]}


def _post(url: str, **limits: Any) -> ChatAnswer:
    return post_chat(url, BODY, api_key="sekret", limits=ChatLimits(**limits))


def _trickle(head: bytes, body_bytes: int, every_s: float) -> Callable[[Request, socket.socket], None]:
    """Headers at once, then the body a byte every ``every_s`` (until the client hangs up)."""

    def respond(_request: Request, sock: socket.socket) -> None:
        sock.sendall(head)
        for _ in range(body_bytes):
            sock.sendall(b" ")
            time.sleep(every_s)

    return respond


def test_an_answer_trickled_a_byte_at_a_time_ends_at_the_deadline() -> None:
    """Regression: urllib's timeout is per read, so 1 byte every 0.1 s never timed out. The deadline is
    total: 1 s here, while the body would take 30 s."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 300\r\n\r\n"
    with hostile_server(_trickle(head, 300, 0.1)) as (url, _):
        started = time.monotonic()
        with pytest.raises(ChatError) as caught:
            _post(url, deadline_s=1.0)
        took_s = time.monotonic() - started
    assert caught.value.kind == "timeout" and "deadline" in caught.value.message
    assert took_s < 5.0, took_s


def test_headers_trickled_a_byte_at_a_time_end_at_the_deadline() -> None:
    def respond(_request: Request, sock: socket.socket) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 300:
            sock.sendall(bytes([byte]))
            time.sleep(0.1)

    with hostile_server(respond) as (url, _):
        started = time.monotonic()
        with pytest.raises(ChatError) as caught:
            _post(url, deadline_s=1.0)
        assert time.monotonic() - started < 5.0
    assert caught.value.kind == "timeout"


def test_a_huge_error_body_is_not_read_whole() -> None:
    """Regression: a 500 with a 64 MB body was read whole into memory for its message. Now 64 KiB is kept
    and the connection closed: the server cannot send the rest."""
    sent = [0]

    def respond(_request: Request, sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: 67108864\r\n\r\n")
        chunk = b"e" * (1 << 20)
        for _ in range(64):
            sock.sendall(chunk)
            sent[0] += len(chunk)

    with hostile_server(respond) as (url, _), pytest.raises(ChatError) as caught:
        _post(url, max_error_bytes=1 << 16)
    assert caught.value.kind == "status" and caught.value.status == 500
    assert caught.value.message.startswith("HTTP 500 from") and len(caught.value.message) < 1000
    assert sent[0] < 32 << 20, sent  # the kernel's buffers hold a few MB; the rest was never read


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_success_body_over_the_cap_is_refused(chunked: bool) -> None:
    big = json.dumps({**OK, "pad": "x" * (3 << 20)}).encode()

    def respond(_request: Request, sock: socket.socket) -> None:
        if not chunked:
            sock.sendall(http_answer(200, big))
            return
        sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(0, len(big), 1 << 16):
            part = big[i : i + (1 << 16)]
            sock.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        sock.sendall(b"0\r\n\r\n")

    with hostile_server(respond) as (url, _):
        with pytest.raises(ChatError) as caught:
            _post(url, max_answer_bytes=1 << 20)
        assert caught.value.kind == "too_large"
        assert _post(url, max_answer_bytes=8 << 20).content == "fine"


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere_else() -> None:
    """Regression: urllib followed a 302 to another address with ``Authorization: Bearer sekret`` and the
    page found there was scored as the model's turn."""
    with hostile_server(json_answer(OK)) as (elsewhere, seen_elsewhere):
        target = f"{elsewhere}/chat/completions"
        redirect = http_answer(302, b"", headers={"Location": target})
        with (
            hostile_server(lambda _r, sock: sock.sendall(redirect)) as (url, seen),
            pytest.raises(ChatError) as caught,
        ):
            _post(url)
    assert caught.value.kind == "redirect" and target in caught.value.message
    assert seen[0].header("Authorization") == "Bearer sekret"
    assert seen_elsewhere == []


@pytest.mark.parametrize(
    ("raw", "kind", "where"),
    [
        (b"<html>Bad gateway</html>", "not_json", "not JSON"),
        (b"[]", "shape", "top level: expected an object, got a list"),
        (b'"text"', "shape", "top level"),
        (b'{"choices": []}', "shape", "choices: expected a non-empty list"),
        (b'{"choices": [{"message": "hi"}]}', "shape", "choices[0].message: expected an object, got a string"),
        (b'{"choices": [{"message": {"content": ["a"]}}]}', "shape", "choices[0].message.content"),
        (b'{"choices": [{"message": {"tool_calls": {}}}]}', "shape", "message.tool_calls"),
        (b'{"choices": [{"message": {"tool_calls": [{"function": {"name": 3}}]}}]}', "shape", "tool_calls[0].function.name"),
        (b'{"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": 3}}]}}]}', "shape", "arguments"),
        (b'{"choices": [{"message": {}}], "usage": {"prompt_tokens": -1}}', "shape", "usage.prompt_tokens"),
        (b'{"choices": [{"message": {}}], "usage": {"prompt_tokens": true}}', "shape", "usage.prompt_tokens"),
        (b'{"error": {"message": "overloaded"}}', "status", "overloaded"),
        (b"[" * 100_000 + b"]" * 100_000, "too_deep", "more than 64 levels"),
        (b"[" * 100_000, "too_deep", "more than 64 levels"),
        (b'{"choices": [{"message": {}}], "n": ' + b"9" * 5000 + b"}", "not_json", "not JSON"),
        (b"\xff\xfe{}", "not_json", "not UTF-8"),
    ],
    ids=["html", "list", "string", "no-choices", "string-message", "content-parts", "tool-calls-object",
         "name-number", "arguments-number", "usage-negative", "usage-bool", "error-object", "deep",
         "deep-unclosed", "int-5000-digits", "not-utf8"],
)  # fmt: skip
def test_answers_that_are_not_chat_completions_are_typed_errors(raw: bytes, kind: str, where: str) -> None:
    """Regression: each of these raised in the caller (``KeyError``, ``AttributeError``, ``TypeError``,
    ``JSONDecodeError``, ``RecursionError``) and ended ``execrl tools run`` with a traceback."""
    with pytest.raises(ChatError) as caught:
        decode_answer(raw)
    assert caught.value.kind == kind and where in caught.value.message, caught.value.message


def test_lone_surrogates_become_text_and_deep_arguments_a_value_error() -> None:
    """``"\\ud800"`` is valid JSON and not text: it raised in the tokenizer and in ``write_text``."""
    arguments = json.dumps({"code": "print('\ud800')"})  # the escape, inside the arguments string
    raw = json.dumps({"choices": [{"message": {"content": "a\ud800b", "tool_calls": [
        {"id": "c\udfff", "function": {"name": "python", "arguments": arguments}}]}}]}).encode()  # fmt: skip
    answer = decode_answer(raw)
    assert answer.content == "a\ufffdb" and answer.tool_calls[0].id == "c\ufffd"
    assert load_arguments(answer.tool_calls[0].arguments) == {"code": "print('\ufffd')"}
    json.dumps(asdict(answer), ensure_ascii=False).encode("utf-8")
    with pytest.raises(ValueError, match="more than 64 levels"):
        load_arguments("[" * 5000 + "]" * 5000)
    with pytest.raises(ValueError):
        load_arguments("{not json")


@pytest.mark.parametrize(
    "url",
    ["", "ftp://host/v1", "http://", "127.0.0.1:8000/v1", "http://user:pw@host/v1", "http://h:99999/v1",
     "http://h/v1?x=1", "http://h/v 1", "http://hö/v1", "http://h/v1\n"],
)  # fmt: skip
def test_a_bad_base_url_is_refused_before_any_request(url: str) -> None:
    with pytest.raises(ValueError):
        check_base_url(url)
    with pytest.raises(ChatError) as caught:
        post_chat(url, BODY)
    assert caught.value.kind == "request"


def test_a_refused_connection_and_a_bad_key_are_typed_errors() -> None:
    with socket.create_server(("127.0.0.1", 0)) as free:
        port = free.getsockname()[1]
    with pytest.raises(ChatError) as caught:
        post_chat(f"http://127.0.0.1:{port}/v1", BODY, limits=ChatLimits(deadline_s=5))
    assert caught.value.kind == "connection"
    with pytest.raises(ChatError) as caught:
        post_chat(f"http://127.0.0.1:{port}/v1", BODY, api_key="a\r\nX-Injected: 1")
    assert caught.value.kind == "request"


def test_a_well_formed_answer_round_trips_over_http() -> None:
    answer = {"choices": [{"message": {"content": None, "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "python", "arguments": '{"code": "1"}'}}]}, "finish_reason": "tool_calls"}],
              "usage": {"prompt_tokens": 7, "completion_tokens": 3}}  # fmt: skip
    with hostile_server(json_answer(answer)) as (url, seen):
        got = post_chat(url, {**BODY, "messages": [{"role": "user", "content": "x\ud800"}]}, api_key="k")
    assert got.content is None and got.finish_reason == "tool_calls"
    assert (got.tool_calls[0].id, got.tool_calls[0].name) == ("c1", "python")
    assert got.usage is not None and (got.usage.prompt_tokens, got.usage.completion_tokens) == (7, 3)
    assert seen[0].json()["messages"][0]["content"] == "x\ufffd"  # the request body is text too
    assert seen[0].head.startswith("POST /v1/chat/completions ")


# -- fuzz: arbitrary JSON in every place of an answer ------------------------------------------------

TEXT = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
SURROGATE_TEXT = st.lists(st.sampled_from(["a", "\ud800", "\udfff", "\ud83d\ude00", '"', "\\", "<"]),
                          max_size=6).map("".join)  # fmt: skip
LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | TEXT
    | SURROGATE_TEXT
)
JSON = st.recursive(
    LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT | SURROGATE_TEXT, inner, max_size=3),
    max_leaves=12,
)  # fmt: skip
DEEP = st.integers(1, 400).map(lambda n: "[" * n + "]" * n)


@st.composite
def answers(draw: st.DrawFn) -> Any:
    """An OpenAI-shaped answer with any JSON (or a deep or surrogate string) put at one of its places."""
    arguments = draw(st.one_of(JSON.map(json.dumps), DEEP, SURROGATE_TEXT, JSON))
    call = {
        "id": draw(JSON | TEXT),
        "type": "function",
        "function": {"name": draw(JSON | TEXT), "arguments": arguments},
    }
    message = {
        "role": "assistant",
        "content": draw(JSON | TEXT),
        "tool_calls": draw(st.sampled_from([[call], None, draw(JSON)])),
    }
    answer = {"choices": [{"message": message, "finish_reason": draw(JSON)}], "usage": draw(JSON)}
    place = draw(st.sampled_from(["answer", "choices", "choice", "message", "none"]))
    junk = draw(JSON)
    if place == "answer":
        return junk
    if place == "choices":
        answer["choices"] = junk
    elif place == "choice":
        answer["choices"] = [junk]
    elif place == "message":
        answer["choices"][0]["message"] = junk
    return answer  # fmt: skip


def _check_typed(answer: ChatAnswer) -> None:
    """Every string of a typed answer encodes as UTF-8; arguments decode or raise ValueError."""
    json.dumps(asdict(answer), ensure_ascii=False).encode("utf-8")
    for call in answer.tool_calls:
        try:
            value = load_arguments(call.arguments)
        except ValueError:
            continue
        json.dumps(value, ensure_ascii=False).encode("utf-8")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers())
def test_fuzz_any_json_answer_is_typed_or_a_chat_error(answer: Any) -> None:
    try:
        decoded = decode_answer(json.dumps(answer).encode())
    except ChatError:
        return
    _check_typed(decoded)


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=64)
    | DEEP.map(str.encode)
    | st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_fuzz_any_bytes_are_typed_or_a_chat_error(raw: bytes) -> None:
    try:
        decoded = decode_answer(raw)
    except ChatError:
        return
    _check_typed(decoded)  # fmt: skip
