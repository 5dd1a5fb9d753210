"""A client for several sandbox service replicas (``execrl sandbox serve``), used when ``sandbox.urls`` is set.

Why: one sandbox host caps the reward stage at its cores; a cluster runs the service as N replicas
(``deploy/k8s/``) and the trainer spreads its executions over them. Each request goes to the replica with
the fewest requests in flight (ties: round robin), as one ``POST /v1/execute``, so one slow program
holds one slot, not a whole batch.

Retry policy (what is safe to send twice, and only that):

* connection refused / DNS / connect errors (``aiohttp.ClientConnectorError``): the request never left
  this process; retried, on another replica when there is one;
* HTTP 503: the service says its sandbox could not run the request (nothing ran to completion);
  retried.

Anything else is not retried, because the program may already have run: a timeout or a connection
dropped after the body was sent, a 5xx other than 503, a body that is not a result. Those, and a
request that failed every attempt, become ``Verdict.SANDBOX_ERROR`` results that name the replica and
the reason (invalid scores downstream, never a silent 0, never an exception out of a batch). Attempts
are bounded (``max_attempts``) with exponential backoff (``backoff_s`` doubling up to
``backoff_max_s``). A 422 is the request's own fault and raises ``InvalidRequestError``, as the
in-process ``Sandbox`` does; requests are validated locally first, so a 422 means the replica is
configured with tighter caps.

Back-pressure: at most ``max_in_flight_per_replica`` requests per replica; further requests wait in
this process (so a batch of 10 000 never opens 10 000 connections). The counters in ``stats()``
(attempts, retries, gave-up, per-replica sends) are what telemetry logs as ``sandbox/client_*``.

Sessions (tool episodes): ``open_template`` opens a template on one replica, its forks stay there; the
replicas must serve templates (``execrl sandbox serve --session-templates``), which ``sessions_problem``
checks before a run (``client_sessions.py`` has the retry policy of session calls and what a lost
replica's sessions answer).

Limits: a replica's results are trusted as far as their JSON shape (the service is ours); the
candidate's output inside them is data, as always. No TLS client certificates, no authentication
headers: put the service behind a proxy that adds them.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

import aiohttp

from execrl.retry import backoff_delay
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.service.client_sessions import RemoteTemplate, SessionPool
from execrl.sandbox.service.serialize import request_to_dict, result_from_dict
from execrl.sandbox.sessions.types import SessionLimits
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, Verdict, ellipsize

__all__ = ["ClientConfig", "ClientStats", "ServiceClient", "check_url"]

_URL = re.compile(r"https?://[^/\s?#]+(/[^\s?#]*)?")
MAX_REASON_CHARS = 300


def check_url(url: str) -> str:
    """``http(s)://host[:port][/prefix]`` without a trailing slash, or ``InvalidRequestError`` naming it."""
    if not isinstance(url, str) or not _URL.fullmatch(url):
        raise InvalidRequestError(
            f"sandbox url {url!r} is not http(s)://host[:port][/prefix] (e.g. http://10.0.0.5:8080)"
        )
    return url.rstrip("/")


@dataclass(frozen=True)
class ClientConfig:
    urls: tuple[str, ...]
    max_in_flight_per_replica: int = 8
    max_attempts: int = 4
    backoff_s: float = 0.05
    backoff_max_s: float = 2.0
    request_timeout_s: float = 300.0  # one HTTP call: queueing on the replica plus the program's own run

    def __post_init__(self) -> None:
        if not self.urls:
            raise InvalidRequestError("ClientConfig.urls is empty; give at least one sandbox service url")
        object.__setattr__(self, "urls", tuple(check_url(u) for u in self.urls))
        if len(set(self.urls)) != len(self.urls):
            raise InvalidRequestError(f"ClientConfig.urls lists a replica twice: {list(self.urls)}")
        if self.max_in_flight_per_replica < 1 or self.max_attempts < 1:
            raise InvalidRequestError("ClientConfig.max_in_flight_per_replica and max_attempts must be >= 1")
        if self.backoff_s < 0 or self.backoff_max_s < self.backoff_s or self.request_timeout_s <= 0:
            raise InvalidRequestError(
                "ClientConfig: need 0 <= backoff_s <= backoff_max_s and request_timeout_s > 0"
            )

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): execrl's one rule (``execrl.retry``)."""
        return backoff_delay(attempt, base_s=self.backoff_s, max_s=self.backoff_max_s)


@dataclass(frozen=True)
class ClientStats:
    requests: int  # requests finished (a result returned, whatever its verdict)
    attempts: int  # HTTP calls started
    retries: int  # attempts beyond each request's first
    gave_up: int  # requests that became SANDBOX_ERROR because of the service, not the program
    sent_per_replica: tuple[int, ...]  # attempts per url, in ``ClientConfig.urls`` order
    session_calls: int = 0  # HTTP calls of sessions (open, fork, cell, stats, close), retries included
    session_retries: int = 0  # session calls beyond each one's first
    session_errors: int = 0  # opens, forks, cells and stats answered as sandbox errors because of the service


class _Retryable(Exception):
    """A failure of one attempt that is safe to retry (nothing ran)."""


class _Unsafe(Exception):
    """A failure of one attempt that may have run the program: not retried, becomes a SANDBOX_ERROR."""


@dataclass
class _Replica:
    url: str
    slots: asyncio.Semaphore
    in_flight: int = 0
    sent: int = 0


class ServiceClient:
    """``run_batch``/``arun_batch`` over the replicas in ``config.urls`` (``score_batch`` accepts it)."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._counts = {"requests": 0, "attempts": 0, "retries": 0, "gave_up": 0}
        self._sent = [0] * len(config.urls)
        self._turn = 0
        self._sessions = SessionPool(config)

    # -- sync twins: one event loop per call (the training loop is synchronous) -------------------------
    def run(self, request: ExecutionRequest) -> ExecutionResult:
        return self.run_batch([request])[0]

    def run_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        return asyncio.run(self.arun_batch(requests))

    async def arun(self, request: ExecutionRequest) -> ExecutionResult:
        return (await self.arun_batch([request]))[0]

    async def arun_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        """Results in input order; every request validated locally before any is sent."""
        from execrl.sandbox.api import validate_request

        for request in requests:
            validate_request(request)
        replicas = [
            _Replica(u, asyncio.Semaphore(self.config.max_in_flight_per_replica)) for u in self.config.urls
        ]
        timeout = aiohttp.ClientTimeout(total=self.config.request_timeout_s)
        connector = aiohttp.TCPConnector(limit=0)
        try:
            async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
                return list(await asyncio.gather(*(self._send(session, replicas, r) for r in requests)))
        finally:
            for index, replica in enumerate(replicas):
                self._sent[index] += replica.sent

    def stats(self) -> ClientStats:
        return ClientStats(**self._counts, sent_per_replica=tuple(self._sent), **self._sessions.wire.counts)

    # -- sessions: the in-process Sandbox's names, so the tool environment runs on either -----------------
    def open_template(
        self, *, setup: Sequence[str] = (), runtime: str | None = None, limits: SessionLimits | None = None,
        files: Mapping[str, str | bytes] | None = None,
    ) -> RemoteTemplate:  # fmt: skip
        """A forkable session on one replica (``Sandbox.open_template``'s contract: ``setup`` runs first, a
        setup cell that fails raises ``SessionError``); it and its forks stay on that replica."""
        return self._sessions.open_template(setup=setup, runtime=runtime, limits=limits, files=files)

    def sessions_problem(self) -> str | None:
        """Why tool episodes cannot run on these replicas (one line), or ``None``: each must answer and
        serve templates. Probed by opening and closing an empty template on each, before a run starts,
        so a replica without ``--session-templates`` is named then, not by a 403 in the middle of a step."""
        problems = (self._sessions.template_problem(url) for url in self.config.urls)
        return next((p for p in problems if p is not None), None)

    # -- one request: pick, send, retry what is safe ------------------------------------------------------
    def _pick(self, replicas: list[_Replica], avoid: _Replica | None) -> _Replica:
        candidates = [r for r in replicas if r is not avoid] or replicas
        self._turn += 1
        order = candidates[self._turn % len(candidates) :] + candidates[: self._turn % len(candidates)]
        return min(order, key=lambda r: r.in_flight)

    async def _send(
        self, session: aiohttp.ClientSession, replicas: list[_Replica], request: ExecutionRequest
    ) -> ExecutionResult:
        body = request_to_dict(request)
        failed: _Replica | None = None
        reasons: list[str] = []
        for attempt in range(1, self.config.max_attempts + 1):
            replica = self._pick(replicas, failed)
            self._counts["attempts"] += 1
            self._counts["retries"] += attempt > 1
            replica.in_flight += 1
            try:
                async with replica.slots:
                    replica.sent += 1
                    result = await self._attempt(session, replica.url, body)
                self._counts["requests"] += 1
                return result
            except _Unsafe as exc:
                return self._give_up(str(exc))
            except _Retryable as exc:
                failed = replica
                reasons.append(str(exc))
            finally:
                replica.in_flight -= 1
            if attempt < self.config.max_attempts:
                await asyncio.sleep(self.config.backoff(attempt))
        return self._give_up(f"gave up after {self.config.max_attempts} attempts: {'; '.join(reasons[-2:])}")

    def _give_up(self, reason: str) -> ExecutionResult:
        self._counts["requests"] += 1
        self._counts["gave_up"] += 1
        return ExecutionResult(verdict=Verdict.SANDBOX_ERROR, sandbox_error=f"sandbox service: {reason}")

    async def _attempt(
        self, session: aiohttp.ClientSession, url: str, body: dict[str, object]
    ) -> ExecutionResult:
        try:
            async with session.post(f"{url}/v1/execute", json=body) as response:
                text = await response.text(errors="replace")
                status = response.status
        except aiohttp.ClientConnectorError as exc:  # never connected: the request was not sent
            raise _Retryable(f"{url}: cannot connect: {exc}") from None
        except (aiohttp.ClientError, TimeoutError) as exc:  # sent, maybe ran: not safe to repeat
            raise _Unsafe(f"{url}: {type(exc).__name__}: {exc} (not retried: it may have run)") from None
        if status == 503:
            raise _Retryable(f"{url}: 503 {_short(text)}")
        if status == 422:
            raise InvalidRequestError(f"replica {url} rejected the request: {_short(text)}")
        if status != 200:
            raise _Unsafe(f"{url}: HTTP {status}: {_short(text)} (not retried)")
        try:
            return result_from_dict(json.loads(text))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise _Unsafe(f"{url}: unreadable result ({type(exc).__name__}: {exc})") from None

    # -- lifetime: only sessions are held between calls ---------------------------------------------------
    def close(self) -> None:
        """Close the sessions still open (as ``Sandbox.close`` kills them); executions hold nothing."""
        self._sessions.close_all()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _short(text: str) -> str:
    text = " ".join(text.split())
    return ellipsize(text, MAX_REASON_CHARS)
