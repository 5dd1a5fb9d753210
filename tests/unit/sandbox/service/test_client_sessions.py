"""``ServiceClient``'s sessions (``client_sessions.py``) against scriptable fake replicas on loopback.

One property each: answers read strictly (anything else is a counted sandbox-error cell, never an
exception), what is retried (a connection not made; 503/429 on open and fork) and what is not (a cell that
may have run), stickiness, the refusals that raise as in process, lost replicas, forks sent in parts.
The real server is driven in ``tests/integration/test_tools_on_service.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from test_sandbox_client import dead_url, serving

from execrl.sandbox import Verdict
from execrl.sandbox.service.client import ClientConfig, ServiceClient
from execrl.sandbox.service.session_wire import cell_from_dict, stats_from_dict
from execrl.sandbox.sessions.types import (
    CellResult,
    SessionError,
    SessionForkError,
    SessionLimits,
    SessionStats,
)

GOOD_CELL = CellResult(
    verdict=Verdict.PASSED, index=2, value="42", traceback=("a", "b"), wall_s=0.5
).to_dict()
STATS = SessionStats("f", "fork", True, 1, 0.1, 2.0, 3.5, 1.0, 0.5, "").to_dict()
Answer = tuple[int, Any]  # status, JSON body (or bytes sent as they are)


class Replica:
    """A fake replica: correct answers unless a test replaces one; every call recorded."""

    def __init__(self, name: str = "") -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.open: Callable[[Any], Answer] = lambda body: (200, {
            "session_id": f"{name}t", "kind": "template", "limits": {},
            "setup": [{**GOOD_CELL, "index": i + 1} for i in range(len(body.get("setup", [])))],
        })  # fmt: skip
        self.fork: Callable[[Any], Answer] = lambda body: (200, {
            "sessions": [{"session_id": f"{name}f{len(self.calls)}-{i}", "kind": "fork"} for i in range(body["n"])]
        })  # fmt: skip
        self.cell: Callable[[Any], Answer] = lambda body: (200, GOOD_CELL)
        self.stats: Callable[[Any], Answer] = lambda body: (200, STATS)

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.json() if request.can_read_body else None
            tail = request.match_info.get("tail", "")
            self.calls.append((request.method, request.path, body))
            if request.method == "DELETE":
                return web.json_response({"closed": True})
            if request.method == "GET":
                status, data = self.stats(body)
            elif request.path == "/v1/sessions":
                status, data = self.open(body)
            else:
                status, data = {"fork": self.fork, "cells": self.cell}[tail](body)
            if data == "drop":  # the connection dies after the request was read
                assert request.transport is not None
                request.transport.close()
                await asyncio.sleep(0.1)
            if isinstance(data, bytes):
                return web.Response(status=status, body=data)
            return web.json_response(data, status=status)

        app = web.Application()
        app.router.add_route("*", "/v1/sessions", handle)
        app.router.add_route("*", "/v1/sessions/{session_id}", handle)
        app.router.add_route("*", "/v1/sessions/{session_id}/{tail}", handle)
        return app

    def paths(self, method: str) -> list[str]:
        return [path for m, path, _ in self.calls if m == method]


def _client(*urls: str) -> ServiceClient:
    return ServiceClient(ClientConfig(urls=urls, max_attempts=3, backoff_s=0.0, backoff_max_s=0.0))


def test_results_and_stats_round_trip_exactly() -> None:
    cell = CellResult(verdict=Verdict.TIME_LIMIT, index=3, limit="cell_timeout_s", exit_code=None, signal=9)
    assert cell_from_dict(cell.to_dict()) == cell
    assert stats_from_dict(STATS) == SessionStats(**STATS)


@pytest.mark.parametrize(
    "answer",
    [
        (200, b"not json"),
        (200, {k: v for k, v in GOOD_CELL.items() if k != "stdout"}),  # a field missing
        (200, {**GOOD_CELL, "extra": 1}),  # a field the client does not know
        (200, {**GOOD_CELL, "index": "2"}),  # a wrong type
        (200, {**GOOD_CELL, "session_alive": 1}),  # an int is not a bool
        (200, {**GOOD_CELL, "verdict": "fine"}),  # not a verdict
        (200, {**GOOD_CELL, "traceback": "a"}),
        (200, [GOOD_CELL]),
        (500, {"error": "boom"}),
        (404, {"error": "session_id: no open session"}),
        (200, "drop"),
    ],
)
def test_a_malformed_or_missing_cell_answer_is_a_counted_sandbox_error(answer: Answer) -> None:
    replica = Replica()
    replica.cell = lambda body: answer
    with serving(replica.app()) as url:
        client = _client(url)
        [session] = client.open_template().fork(1)
        result = session.run("1")
        again = session.run("2")
    assert result.verdict is Verdict.SANDBOX_ERROR and not result.session_alive
    assert result.message.startswith("sandbox service: ") and result.index == 1
    assert again.verdict is Verdict.SANDBOX_ERROR and "the session is gone" in again.message
    assert len(replica.paths("POST")) == 3  # open, fork, one cell: neither retried nor sent after
    assert client.stats().session_errors == 2


def test_a_good_answer_is_the_in_process_type_and_the_session_is_sticky() -> None:
    a, b = Replica("a"), Replica("b")
    with serving(a.app()) as url_a, serving(b.app()) as url_b:
        client = _client(url_a, url_b)
        first = client.open_template(setup=["n = 7"], limits=SessionLimits(cell_timeout_s=5))
        second = client.open_template()
        forks = first.fork(2) + second.fork(2)
        results = [fork.run("n * 6") for fork in forks for _ in range(3)]
        peak = forks[0].stats().peak_memory_mb
        client.close()
    assert results == [cell_from_dict(GOOD_CELL)] * 12 and peak == 3.5
    opened = [body for replica in (a, b) for m, path, body in replica.calls if path == "/v1/sessions"]
    assert sorted(len(body["setup"]) for body in opened) == [0, 1]  # one template on each replica
    assert {"cell_timeout_s": 5.0} in [body["limits"] for body in opened]  # only what differs from defaults
    # each replica got its own template's forks, their cells and closes, and nothing of the other's
    for name, replica in (("a", a), ("b", b)):
        assert all(p == "/v1/sessions" or p.startswith(f"/v1/sessions/{name}") for _, p, _ in replica.calls)
    assert len(a.calls) + len(b.calls) == 2 + 2 + 12 + 1 + 6  # opens, forks, cells, a stats read, closes


def test_open_is_retried_on_another_replica_after_503_or_429() -> None:
    busy, free = Replica(), Replica()
    busy.open = lambda body: (503, {"error": "sandbox: worker pool exhausted"})
    with serving(busy.app()) as url_busy, serving(free.app()) as url_free:
        client = _client(url_busy, url_free)
        templates = [client.open_template() for _ in range(2)]
    assert len(free.paths("POST")) == 2 and all(t.url == url_free for t in templates)
    assert client.stats().session_retries >= 1 and client.stats().session_errors == 0


def test_full_replicas_raise_naming_the_cap() -> None:
    full = Replica()
    full.open = lambda body: (
        429,
        {"error": "sessions: 4 are open ... (server option --session-max-sessions)"},
    )
    with serving(full.app()) as url, pytest.raises(SessionError, match="--session-max-sessions"):
        _client(url).open_template()
    assert len(full.paths("POST")) == 3  # max_attempts


def test_a_replica_refusing_templates_is_named_with_the_flag() -> None:
    plain = Replica()
    plain.open = lambda body: (403, {"error": "template: session templates are off on this server"})
    with serving(plain.app()) as url:
        client = _client(url)
        with pytest.raises(SessionError, match=f"{url} refuses session templates.*--session-templates"):
            client.open_template()
        assert "--session-templates" in (client.sessions_problem() or "")
    with serving(Replica().app()) as url:
        assert _client(url).sessions_problem() is None
    assert "did not answer" in (_client(dead_url()).sessions_problem() or "")


def test_a_failed_setup_cell_raises_and_closes_the_template() -> None:
    replica = Replica()
    failed = {**GOOD_CELL, "verdict": "runtime_error", "index": 1, "error_type": "NameError", "value": None}
    replica.open = lambda body: (
        200,
        {"session_id": "t", "kind": "template", "limits": {}, "setup": [failed]},
    )
    failing = pytest.raises(SessionError, match="setup cell 1 failed: runtime_error: NameError")
    with serving(replica.app()) as url, failing:
        _client(url).open_template(setup=["nope"])
    assert replica.paths("DELETE") == ["/v1/sessions/t"]  # the failed template closed


def test_fork_refusals_raise_as_in_process() -> None:
    replica = Replica()
    with serving(replica.app()) as url:
        client = _client(url)
        [session] = client.open_template().fork(1)
        with pytest.raises(SessionForkError, match="cannot fork"):
            session.fork(1)
        replica.fork = lambda body: (409, {"error": "session_id: template t has ended"})
        with pytest.raises(SessionForkError, match="has ended"):
            client.open_template().fork(2)
        with pytest.raises(SessionError, match="fork 1 to 64"):
            client.open_template().fork(65)


def test_a_large_fork_is_sent_in_parts_the_server_accepts() -> None:
    replica = Replica()
    with serving(replica.app()) as url:
        forks = _client(url).open_template().fork(40)
    sizes = [body["n"] for _, path, body in replica.calls if path.endswith("/fork")]
    assert sizes == [16, 16, 8] and len({f.id for f in forks}) == 40


def test_an_unreachable_replica_gives_lost_sessions_not_exceptions() -> None:
    client = _client(dead_url())
    template = client.open_template(setup=["n = 1"])
    forks = template.fork(3)
    results = [fork.run("n") for fork in forks]
    assert all(r.verdict is Verdict.SANDBOX_ERROR and not r.session_alive for r in results)
    assert "cannot connect" in results[0].message
    assert forks[0].stats().ended.startswith("sandbox service: ") and forks[0].stats().peak_memory_mb == 0
    for fork in forks:
        fork.close()
    template.close()
    stats = client.stats()
    assert stats.session_calls == 3 and stats.session_errors == 1 + 3 + 3  # the open, the forks, the cells


def test_a_replica_dying_after_the_fork_loses_its_sessions_after_one_try() -> None:
    replica = Replica()
    with serving(replica.app()) as url:
        client = _client(url)
        template = client.open_template()
        forks = template.fork(2)
    first, second = forks[0].run("1"), forks[1].run("1")  # the server is gone now
    assert "gave up after 3 attempts" in first.message and "the session is gone" in second.message
    assert client.stats().session_calls == 2 + 3  # the second fork never called: its replica was lost


def test_a_cell_the_service_refuses_is_an_error_and_the_session_lives() -> None:
    replica = Replica()
    replica.cell = lambda body: (422, {"error": "code: string is not valid Unicode (lone surrogate)"})
    with serving(replica.app()) as url:
        [session] = _client(url).open_template().fork(1)
        refused = session.run("'\ud800'")
        replica.cell = lambda body: (200, GOOD_CELL)
        assert session.run("1").passed
    assert (
        refused.verdict is Verdict.SANDBOX_ERROR
        and refused.session_alive
        and "lone surrogate" in refused.message
    )


def test_closing_the_client_closes_what_is_left_forks_first() -> None:
    replica = Replica()
    with serving(replica.app()) as url:
        client = _client(url)
        template = client.open_template()
        forks = template.fork(2)
        forks[0].close()
        client.close()
        client.close()
    assert replica.paths("DELETE") == [
        f"/v1/sessions/{forks[0].id}",
        f"/v1/sessions/{forks[1].id}",
        "/v1/sessions/t",
    ]
