"""``execrl tools run`` against hostile endpoints and careless inputs (issue 35, class 10).

Regressions, each a traceback before: every answer that was not an OpenAI chat completion (not JSON, a
list, a string ``message``, arguments nested 5,000 deep) crashed the run and lost the finished episodes;
an answer trickled a byte at a time never timed out; a redirect was followed (the key sent along, the
page scored); a bad ``--url``, a missing ``--tokenizer`` and a ``--json`` that is a directory ended in
tracebacks, the last one after every episode had run. Now a bad answer is a counted endpoint error (or,
for what the model wrote, a counted parse error) and the run goes on; a bad input is one ``error:`` line
and exit 2 before any request; a run stopped early writes the episodes that finished.

The endpoint is a loopback server that stops by itself (``hostile_http.py``); the command runs in this
process through ``execrl.cli.main`` (the SIGTERM case in a subprocess).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile_http import Request, hostile_server, http_answer

from execrl.cli import main

DEEP_ARGUMENTS = "[" * 5000 + "]" * 5000


def _message(message: Any) -> bytes:
    return http_answer(200, json.dumps({"choices": [{"message": message, "finish_reason": "stop"}]}).encode())


def _answer(text: str) -> bytes:
    return _message({"role": "assistant", "content": text})


def _deep_call() -> bytes:
    call = {"id": "c1", "type": "function", "function": {"name": "python", "arguments": DEEP_ARGUMENTS}}
    return _message({"role": "assistant", "content": None, "tool_calls": [call]})


def _trickle(_request: Request, sock: socket.socket) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n")
    for _ in range(200):
        sock.sendall(b" ")
        time.sleep(0.05)


def _scripted(
    answers: list[Callable[[Request, socket.socket], None] | bytes],
) -> Callable[[Request, socket.socket], None]:
    """The i-th request gets ``answers[i]`` (bytes, or a function writing the answer); then plain ones."""

    def respond(request: Request, sock: socket.socket) -> None:
        answer = answers[request.index] if request.index < len(answers) else _answer("The answer is 0.")
        if callable(answer):
            answer(request, sock)
        else:
            sock.sendall(answer)

    return respond  # fmt: skip


def _run(url: str, report: Path, *extra: str) -> int:
    return main(
        ["tools", "run", "--url", url, "--model", "m", "--json", str(report), "--timeout-s", "1", *extra]
    )


def test_hostile_answers_are_counted_and_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    redirect = http_answer(302, b"", headers={"Location": "http://127.0.0.1:9/v1/chat/completions"})
    answers: list[Any] = [
        http_answer(200, b"<html>502 Bad Gateway</html>", headers={"Content-Type": "text/html"}),
        http_answer(200, b"[]"),
        _message("a string message"),
        _deep_call(),  # the model's deep arguments: a parse error, then the episode goes on (next answer)
        _answer("The answer is \ud800."),
        _message({"role": "assistant", "content": "x", "tool_calls": "not a list"}),
        redirect,
        http_answer(500, b"e" * (4 << 20)),
        _trickle,
    ]
    report = tmp_path / "report.json"
    with hostile_server(_scripted(answers)) as (url, seen):
        rc = _run(url, report, "--limit", "8")
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads(report.read_text(encoding="utf-8"))
    episodes = data["episodes"]
    assert data["partial"] is False and len(episodes) == 8 and len(seen) == 9
    stops = [e["stop"] for e in episodes]
    assert stops == ["error", "error", "error", "answer", "error", "error", "error", "error"], stops
    errors = [e["error"] for e in episodes if e["stop"] == "error"]
    for expected in ("not JSON", "top level: expected an object", "choices[0].message: expected an object",
                     "tool_calls: expected a list", "not followed", "HTTP 500", "deadline"):  # fmt: skip
        assert any(expected in error for error in errors), (expected, errors)
    deep = episodes[3]
    assert (
        deep["parse_errors"] == 1
        and deep["calls"] == ["!bad_json"]
        and deep["final_text"] == "The answer is \ufffd."
    )
    assert data["summary"]["endpoint_errors"] == 7 and "8 episodes: pass rate" in out


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--url", "ftp://127.0.0.1/v1"], "--url"),
        (["--url", "127.0.0.1:8000"], "--url"),
        (["--url", "http:///v1"], "--url"),
        (["--tokenizer", "/nonexistent/tokenizer"], "--tokenizer"),
        (["--api-key", "k\nX-Injected: 1"], "--api-key"),
    ],
    ids=["scheme", "no-scheme", "no-host", "tokenizer-missing", "key-newline"],
)
def test_bad_inputs_are_one_error_line_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    report = tmp_path / "report.json"
    with hostile_server(_scripted([])) as (url, seen):
        argv = ["--url", url, *args] if args[0] != "--url" else args
        rc = main(["tools", "run", "--model", "m", "--json", str(report), "--limit", "1", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and named in err and err.count("\n") == 1, err
    assert seen == [] and not report.exists()


def test_a_report_path_that_is_a_directory_is_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: the traceback came after every episode had run, and the episodes were lost."""
    with hostile_server(_scripted([])) as (url, seen):
        rc = _run(url, tmp_path, "--limit", "1")
        blocked = tmp_path / "file"
        blocked.write_text("x")
        rc_under_file = _run(url, blocked / "report.json", "--limit", "1")
    err = capsys.readouterr().err
    assert (rc, rc_under_file) == (2, 2) and seen == [], err
    assert f"error: {tmp_path}: is a directory" in err and "is not a directory" in err


def test_a_bug_mid_run_still_writes_the_finished_episodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import execrl.tools.remote as remote

    rollout = remote.run_episodes
    calls = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a bug in the second episode")
        return rollout(*args, **kwargs)

    monkeypatch.setattr(remote, "run_episodes", failing)
    report = tmp_path / "report.json"
    with hostile_server(_scripted([])) as (url, _), pytest.raises(RuntimeError, match="a bug"):
        _run(url, report, "--limit", "3")
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["partial"] is True and "RuntimeError" in data["stopped"] and len(data["episodes"]) == 1


class _NotHandled(Exception):
    pass


def _outer_handler(signum: int, frame: object) -> None:
    raise _NotHandled(signum)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_writes_the_finished_episodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: signal.Signals
) -> None:
    """A signal during the second episode: the first is written as a partial report, exit 130. SIGTERM's
    default action ended the process on the spot; the test's own handler stands in for it (so the test
    fails instead of killing pytest when the run does not handle the signal itself)."""

    def interrupt(_request: Request, _sock: socket.socket) -> None:
        os.kill(os.getpid(), signum)  # the main thread is waiting for this answer
        time.sleep(1)

    report = tmp_path / "report.json"
    previous = signal.signal(signal.SIGTERM, _outer_handler)
    try:
        with hostile_server(_scripted([_answer("The answer is 1."), interrupt])) as (url, _):
            rc = _run(url, report, "--limit", "3")
        assert signal.getsignal(signal.SIGTERM) is _outer_handler  # the run put it back
    except (KeyboardInterrupt, _NotHandled) as exc:  # the run did not handle it: nothing was written
        pytest.fail(f"the run let {exc!r} through; report written: {report.exists()}")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert rc == 130, capsys.readouterr()
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["partial"] is True and signum.name in data["stopped"] and data["episodes_planned"] == 3
    assert [e["stop"] for e in data["episodes"]] == ["answer"]
