"""``ServiceClient`` against real aiohttp servers on loopback (``create_app`` over fake sandboxes).

Each test checks one property of the multi-replica client: spreading, input order, what is retried
(connection refused, 503) and what is not (500, an unreadable body), bounded attempts, back-pressure.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest
from aiohttp import web

from execrl.rewards import RewardConfig, score_batch
from execrl.sandbox import ExecutionRequest, ExecutionResult, InvalidRequestError, SandboxFailure, Verdict
from execrl.sandbox.service.client import ClientConfig, ServiceClient
from execrl.sandbox.service.server import create_app


class EchoSandbox:
    """Passes every request, echoing its program; fails the first ``fail_first`` calls with a 503."""

    def __init__(self, *, fail_first: int = 0, delay_s: float = 0.0) -> None:
        self.calls = 0
        self.fail_first = fail_first
        self.delay_s = delay_s
        self.in_flight = 0
        self.max_in_flight = 0

    async def arun(self, request: ExecutionRequest) -> ExecutionResult:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise SandboxFailure("worker pool exhausted")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        return ExecutionResult(verdict=Verdict.PASSED, stdout=request.program)

    async def arun_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        return [await self.arun(r) for r in requests]


@contextmanager
def serving(app: web.Application) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) from a thread of its own; yields the base url."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def dead_url() -> str:
    """A loopback port nothing listens on (bound then closed): connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def programs(n: int) -> list[ExecutionRequest]:
    return [ExecutionRequest(language="python", program=f"print({i})") for i in range(n)]


def test_requests_spread_over_replicas_and_results_keep_input_order() -> None:
    a, b = EchoSandbox(delay_s=0.01), EchoSandbox(delay_s=0.01)
    with serving(create_app(a)) as url_a, serving(create_app(b)) as url_b:
        client = ServiceClient(ClientConfig(urls=(url_a, url_b), max_in_flight_per_replica=2))
        results = client.run_batch(programs(12))
    assert [r.stdout for r in results] == [f"print({i})" for i in range(12)]
    assert a.calls + b.calls == 12 and a.calls >= 3 and b.calls >= 3
    stats = client.stats()
    assert (stats.requests, stats.attempts, stats.retries, stats.gave_up) == (12, 12, 0, 0)
    assert sum(stats.sent_per_replica) == 12


def test_connection_refused_is_retried_on_another_replica_and_counted_once() -> None:
    good = EchoSandbox()
    with serving(create_app(good)) as url:
        client = ServiceClient(ClientConfig(urls=(dead_url(), url), backoff_s=0.0, backoff_max_s=0.0))
        results = client.run_batch(programs(8))
    assert len(results) == 8 and all(r.passed for r in results)
    assert good.calls == 8  # every request ran exactly once
    stats = client.stats()
    assert stats.requests == 8 and stats.gave_up == 0
    assert stats.retries == stats.attempts - 8 >= 1


def test_503_is_retried_until_the_replica_recovers() -> None:
    flaky = EchoSandbox(fail_first=2)
    with serving(create_app(flaky)) as url:
        client = ServiceClient(ClientConfig(urls=(url,), max_in_flight_per_replica=1, backoff_s=0.0))
        results = client.run_batch(programs(1))
    assert results[0].passed
    assert (client.stats().attempts, client.stats().retries) == (3, 2)


def test_a_request_failing_every_attempt_is_an_invalid_score_with_its_reason() -> None:
    client = ServiceClient(ClientConfig(urls=(dead_url(),), max_attempts=3, backoff_s=0.0))
    (result,) = client.run_batch(programs(1))
    assert result.verdict is Verdict.SANDBOX_ERROR
    assert result.sandbox_error is not None and "gave up after 3 attempts" in result.sandbox_error
    assert (client.stats().attempts, client.stats().gave_up) == (3, 1)


def test_score_batch_through_the_client_gives_invalid_scores_not_zeros() -> None:
    """A reward computed through a dead service is invalid with the service's reason, never a 0."""
    from execrl.sandbox.types import CallTest
    from execrl.tasks.schema import CodeSpec, Task, TaskMetadata

    task = Task(
        id="add",
        domain="code",
        prompt="Write add.",
        spec=CodeSpec(kind="function", entry_point="add"),
        metadata=TaskMetadata(family="test"),
        hidden_tests=(CallTest(name="t", entry_point="add", args=(1, 2), expected=3),),
    )
    client = ServiceClient(ClientConfig(urls=(dead_url(),), max_attempts=2, backoff_s=0.0))
    completion = "```python\ndef add(a, b):\n    return a + b\n```"
    (score,) = score_batch([task], [completion], sandbox=client, config=RewardConfig())
    assert not score.valid
    assert score.reason_code == "sandbox_error"
    assert "gave up after 2 attempts" in score.reason


def test_errors_after_sending_are_not_retried() -> None:
    calls = 0

    async def broken(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.Response(status=500, text="internal error")

    app = web.Application()
    app.router.add_post("/v1/execute", broken)
    with serving(app) as url:
        client = ServiceClient(ClientConfig(urls=(url,), backoff_s=0.0))
        (result,) = client.run_batch(programs(1))
    assert calls == 1
    assert result.verdict is Verdict.SANDBOX_ERROR and "HTTP 500" in (result.sandbox_error or "")


def test_back_pressure_bounds_requests_in_flight_per_replica() -> None:
    slow = EchoSandbox(delay_s=0.05)
    with serving(create_app(slow)) as url:
        client = ServiceClient(ClientConfig(urls=(url,), max_in_flight_per_replica=2))
        results = client.run_batch(programs(8))
    assert len(results) == 8 and all(r.passed for r in results)
    assert slow.max_in_flight == 2


def test_backoff_doubles_and_is_capped() -> None:
    config = ClientConfig(urls=("http://h:1",), backoff_s=0.1, backoff_max_s=0.3)
    assert [config.backoff(a) for a in (1, 2, 3, 4)] == pytest.approx([0.1, 0.2, 0.3, 0.3])


@pytest.mark.parametrize("url", ["h:8080", "ftp://h", "http://h:1?x=1", ""])
def test_a_bad_url_is_refused_naming_it(url: str) -> None:
    with pytest.raises(InvalidRequestError, match="is not http"):
        ClientConfig(urls=(url,))


def test_a_replica_listed_twice_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="twice"):
        ClientConfig(urls=("http://h:1", "http://h:1/"))
