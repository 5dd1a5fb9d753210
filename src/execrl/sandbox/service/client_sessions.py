"""Sessions on sandbox service replicas: what ``ServiceClient.open_template`` returns (issue 36, item 3: tool
episodes on ``sandbox.urls``).

    template = client.open_template(setup=["n = 7"], limits=SessionLimits(cell_timeout_s=5))
    forks = template.fork(4)                      # RemoteSessions, on the template's replica
    forks[0].run("n * 6").value                   # '42': the same CellResult as in process
    forks[0].stats().peak_memory_mb; [f.close() for f in forks]; template.close()

The names and signatures are the in-process ones (``Sandbox.open_template``, ``SessionTemplate.fork``,
``Session.run``/``stats``/``close``), so ``execrl.tools.env.ToolEnvironment`` runs on either. The wire is
``service/sessions.py``'s (its docstring lists the endpoints); the replicas must run with
``--session-templates`` (``ServiceClient.sessions_problem`` checks that before a run starts).

Sticky: a template opens on the replica with the fewest sessions this client holds there (ties: round
robin), and it and its forks stay on that replica (a fork shares its template's memory). When the replica
cannot be reached on any attempt, that template's sessions are *lost* (a restarted replica no longer knows
them): each of their cells answers at once, without a request, a ``sandbox_error`` cell that says why,
with ``session_alive=False``; the episode goes on and is judged (its judge runs on the other replicas).

Retry policy, ``ClientConfig``'s (``max_attempts``, ``backoff_s`` doubling to ``backoff_max_s``,
``request_timeout_s``), and what is safe to send twice, as for executions (``client.py``):

* a connection that could not be made (nothing was sent): retried, an open on another replica;
* opening: 503 (the sandbox could not start it) and 429 (the replica is full) are retried on another
  replica; a 429 on every attempt raises ``SessionError`` naming ``--session-max-sessions``;
* forking: 503 and 429 are retried on the template's replica (nothing forked), the same 429 rule;
* a cell, a stats read, a close: only the connection is retried: a cell that may have run is never sent
  twice (its session would change twice).

Anything else that is the service's fault becomes data, never an exception out of an episode: a cell
whose answer is missing, not JSON, not exactly ``CellResult.to_dict()``'s fields and types (read strictly:
it is untrusted output), a 404 (the replica forgot the session), another 5xx or a timeout is a
``sandbox_error`` cell that ends its session; a fork or an open that fails that way gives lost sessions;
a stats read gives empty stats naming the reason. Each is counted (``ClientStats.session_errors``).
What raises, as in process: a setup cell that fails (``SessionError`` with its result), a replica that
refuses templates (``SessionError`` naming ``--session-templates``), a 409 on fork
(``SessionForkError``), a 422 on open or fork (``InvalidRequestError``: the replica's caps are tighter
than the request), any call on a closed session (``SessionClosedError``). A 422 on a cell is the model's
code (e.g. a lone surrogate, which JSON cannot carry): a ``sandbox_error`` cell, the session alive.

``ServiceClient.close`` closes the sessions its caller left open, as ``Sandbox.close`` does. The calls
themselves: ``session_wire.py`` (stdlib HTTP, the retry loop, the strict readers).

Limits: synchronous only (no ``arun``/``afork``: the tool environment calls one cell at a time); no
``open_session``, ``run_setup`` or ``read_files``. A session whose open or fork answer was lost stays on
its replica until its ``idle_timeout_s``/``lifetime_s``, holding a slot there.
"""

from __future__ import annotations

import base64
import contextlib
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.service.session_wire import (
    Answer,
    GaveUp,
    MaybeRan,
    Wire,
    cell_from_dict,
    short,
    stats_from_dict,
)
from execrl.sandbox.sessions.types import (
    CellResult,
    SessionClosedError,
    SessionError,
    SessionForkError,
    SessionLimits,
    SessionStats,
)
from execrl.sandbox.types import Verdict

if TYPE_CHECKING:
    from execrl.sandbox.service.client import ClientConfig

__all__ = ["RemoteSession", "RemoteTemplate", "SessionPool"]

FORKS_PER_CALL = 16  # the server's default --session-max-forks: a larger fork is sent in parts
MAX_FORKS = 64  # SessionTemplate.fork's own bound
_DEFAULTS = SessionLimits()
_RETRY_OPEN = frozenset({429, 503})  # nothing was opened or forked: safe to ask again


class SessionPool:
    """The sessions of one ``ServiceClient``: where a template opens, which are held, the counters."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.wire = Wire(config)
        self.live: set[_RemoteBase] = set()  # held open on a replica, not yet closed
        self._turn = 0

    def pick(self, avoid: str | None = None) -> str:
        """The replica with the fewest sessions held (ties: round robin), another than ``avoid`` if any."""
        urls = [u for u in self.config.urls if u != avoid] or list(self.config.urls)
        held = {u: 0 for u in urls}
        for session in self.live:
            if session.url in held:
                held[session.url] += 1
        self._turn += 1
        start = self._turn % len(urls)
        return min(urls[start:] + urls[:start], key=held.__getitem__)

    def open_template(
        self, *, setup: Sequence[str] = (), runtime: str | None = None, limits: SessionLimits | None = None,
        files: Mapping[str, str | bytes] | None = None,
    ) -> RemoteTemplate:  # fmt: skip
        """A template on one replica, its ``setup`` cells run (a failed one raises ``SessionError``)."""
        limits = limits if limits is not None else _DEFAULTS
        body = _open_body(setup, runtime, limits, files or {})
        try:
            url, answer = self.wire.request("POST", "/v1/sessions", body, to=self.pick, retry=_RETRY_OPEN)
        except GaveUp as exc:
            _raise_if_full(exc)
            return self._lost_template(str(exc), limits)
        except MaybeRan as exc:
            return self._lost_template(str(exc), limits)
        if answer.status == 403:
            raise SessionError(f"replica {url} refuses session templates ({answer.error()}): start every "
                               "sandbox.urls replica with `execrl sandbox serve --session-templates`")  # fmt: skip
        if answer.status == 422:
            raise InvalidRequestError(f"replica {url} refused the session: {answer.error()}")
        if answer.status != 200:
            return self._lost_template(f"{url}: {answer.error()}", limits)
        home = _Home(self, url)
        try:
            session_id, results = _opened(answer.data, len(body["setup"]))
        except ValueError as exc:
            home.delete(answer.data.get("session_id") if isinstance(answer.data, dict) else None)
            return self._lost_template(f"{url}: unreadable answer to an open ({exc})", limits)
        template = RemoteTemplate(home, session_id, limits, results[-1].index if results else 0)
        failed = [r for r in results if not r.passed]
        if failed:
            template.close()
            raise SessionError(f"setup cell {failed[0].index} failed: {failed[0].verdict.value}: "
                               f"{failed[0].error_type or ''} {failed[0].error_message or failed[0].message}")  # fmt: skip
        return template

    def _lost_template(self, reason: str, limits: SessionLimits) -> RemoteTemplate:
        """A template the service could not open (counted): its forks' cells answer sandbox errors."""
        self.wire.error()
        return RemoteTemplate(_Home(self, ""), "", limits, 0, gone=reason)

    def template_problem(self, url: str) -> str | None:
        """Why ``url`` cannot hold tool episodes' templates (one line), or ``None``: an empty template
        opened there and closed again."""
        home = _Home(self, url)
        try:
            answer = home.request("POST", "/v1/sessions", {"template": True})
        except (GaveUp, MaybeRan) as exc:
            return f"sandbox replica {url} did not answer a session request ({exc})"
        if answer.status == 403:
            return (f"sandbox replica {url} does not serve session templates, which tool episodes fork: "
                    "start it with `execrl sandbox serve --session-templates`")  # fmt: skip
        session_id = answer.data.get("session_id") if isinstance(answer.data, dict) else None
        if answer.status != 200 or not isinstance(session_id, str):
            return f"sandbox replica {url} cannot open a session template: {answer.error()}"
        home.delete(session_id)
        return None

    def close_all(self) -> None:
        """Close every session still held: forks first, then templates."""
        for session in sorted(self.live, key=lambda s: s.kind == "template"):
            session.close()


def _raise_if_full(exc: GaveUp) -> None:
    if exc.last is not None and exc.last.status == 429:
        raise SessionError(f"sandbox service full: {exc} (each replica holds at most --session-max-sessions; "
                           "a tool step holds setup.sessions_held(config) at once)")  # fmt: skip


def _open_body(
    setup: Sequence[str], runtime: str | None, limits: SessionLimits, files: Mapping[str, str | bytes]
) -> dict[str, Any]:
    """The open request; the limits sent are those set away from the defaults (a default above a
    replica's cap is lowered to it there, as for its other clients)."""
    if isinstance(setup, str) or not all(isinstance(code, str) for code in setup):
        raise SessionError("setup must be a list of code strings")
    if not isinstance(limits, SessionLimits):
        raise InvalidRequestError(f"limits must be a SessionLimits, got {type(limits).__name__}")
    text = {p: d for p, d in files.items() if isinstance(d, str)}
    raw = {p: d for p, d in files.items() if isinstance(d, bytes)}
    if len(text) + len(raw) != len(files) or not all(isinstance(p, str) for p in files):
        raise InvalidRequestError("files must map relative paths to str or bytes")
    changed = {
        f.name: getattr(limits, f.name)
        for f in fields(SessionLimits)
        if getattr(limits, f.name) != getattr(_DEFAULTS, f.name)
    }
    return {
        "runtime": runtime, "limits": changed, "files": text, "template": True, "setup": list(setup),
        "files_base64": {p: base64.b64encode(d).decode() for p, d in raw.items()},
    }  # fmt: skip


def _opened(data: Any, setup_cells: int) -> tuple[str, list[CellResult]]:
    """The open answer's session id and setup results (one per setup cell), or ``ValueError``."""
    if not isinstance(data, dict) or not isinstance(data.get("session_id"), str) or not data["session_id"]:
        raise ValueError("no session_id")
    if data.get("kind") != "template" or not isinstance(data.get("setup"), list):
        raise ValueError("not a template with its setup results")
    results = [cell_from_dict(item) for item in data["setup"]]
    if len(results) != setup_cells:
        raise ValueError(f"{len(results)} setup results for {setup_cells} cells")
    return data["session_id"], results


# -- a replica as a template and its forks see it --------------------------------------------------------
@dataclass(eq=False)
class _Home:
    """The replica a template and its forks live on; ``lost`` says why they are gone ("" while reachable)."""

    pool: SessionPool
    url: str
    lost: str = ""

    def request(
        self, method: str, path: str, body: Any = None, *, retry: frozenset[int] = frozenset()
    ) -> Answer:
        """A call on this replica (sticky); failing to connect on every attempt loses it (``GaveUp``)."""
        try:
            return self.pool.wire.request(method, path, body, to=lambda _failed: self.url, retry=retry)[1]
        except GaveUp as exc:
            if exc.last is None:  # never connected: the replica is gone, and its sessions with it
                self.lost = self.lost or str(exc)
            raise

    def delete(self, session_id: object) -> None:
        """Close a session on the replica; nothing to do once lost, and a failure changes nothing here
        (the replica is gone or slow: its sessions die with it or by their idle timeout)."""
        if self.lost or not isinstance(session_id, str) or not session_id:
            return
        with contextlib.suppress(GaveUp, MaybeRan):
            self.request("DELETE", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}")


class _RemoteBase:
    kind = "session"

    def __init__(
        self, home: _Home, session_id: str, limits: SessionLimits, index: int, *, gone: str = ""
    ) -> None:
        self._home = home
        self.id = session_id
        self.limits = limits
        self._index = index  # the last cell index seen (cells are numbered across a template and its forks)
        self._gone = gone  # why the service lost this session ("" while it has it)
        self._alive = True  # what its last cell said
        self._closed = False
        if not (home.lost or gone):
            home.pool.live.add(self)

    @property
    def url(self) -> str:
        """The replica it lives on ("" when it could not be opened)."""
        return self._home.url

    @property
    def alive(self) -> bool:
        return self._alive and not (self._closed or self._gone or self._home.lost)

    def _path(self, tail: str = "") -> str:
        return f"/v1/sessions/{urllib.parse.quote(self.id, safe='')}{tail}"

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"{self.kind} {self.id} is closed")

    def stats(self) -> SessionStats:
        """The replica's stats of this session (``GET``); empty ones naming why when they cannot be read."""
        gone = "closed" if self._closed else (self._gone or self._home.lost)
        if not gone:
            try:
                answer = self._home.request("GET", self._path())
                if answer.status == 200:
                    return stats_from_dict(answer.data)
                gone = f"{self.url}: {answer.error()}"
            except (GaveUp, MaybeRan) as exc:
                gone = str(exc)
            except ValueError as exc:
                gone = f"{self.url}: unreadable stats ({exc})"
            self._home.pool.wire.error()
        return SessionStats(self.id, self.kind, False, 0, 0.0, 0.0, 0.0, 0.0, 0.0, f"sandbox service: {gone}")

    def close(self) -> None:
        """Close it on its replica (idempotent; a lost replica is not called)."""
        if self._closed:
            return
        self._closed = True
        self._home.pool.live.discard(self)
        if not self._gone:
            self._home.delete(self.id)

    def __enter__(self) -> _RemoteBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteSession(_RemoteBase):
    """A fork on a replica: ``run`` answers a ``CellResult`` whatever the service does (module docstring)."""

    kind = "fork"

    def run(
        self, code: str, *, timeout_s: float | None = None, cpu_time_s: float | None = None
    ) -> CellResult:
        """Run one cell. ``timeout_s``/``cpu_time_s`` may lower this cell's limits (never raise them)."""
        if not isinstance(code, str):
            raise SessionError(f"code must be a str, got {type(code).__name__}")
        for name, value in (("timeout_s", timeout_s), ("cpu_time_s", cpu_time_s)):
            if value is not None and (isinstance(value, bool) or not 0 < value < float("inf")):
                raise SessionError(f"{name} must be a finite number of seconds > 0, got {value!r}")
        self._check_open()
        gone = self._gone or self._home.lost
        if gone:
            return self._failed(f"the session is gone: {gone}")
        body = {"code": code, "timeout_s": timeout_s, "cpu_time_s": cpu_time_s}
        try:
            answer = self._home.request("POST", self._path("/cells"), body)
        except (GaveUp, MaybeRan) as exc:
            return self._failed(str(exc), end=True)
        if answer.status == 422:  # the code itself cannot be sent (nothing ran): the session lives on
            return self._failed(f"the service refused the cell: {answer.error()}", alive=True)
        if answer.status != 200:
            return self._failed(f"{self.url}: {answer.error()}", end=True)
        try:
            result = cell_from_dict(answer.data)
        except ValueError as exc:
            return self._failed(f"{self.url}: unreadable cell result ({short(str(exc))})", end=True)
        self._index, self._alive = result.index, result.session_alive
        return result

    def _failed(self, reason: str, *, end: bool = False, alive: bool = False) -> CellResult:
        """A sandbox-error cell saying why (counted); ``end``: the service lost the session."""
        self._home.pool.wire.error()
        if end:
            self._gone = self._gone or reason
        self._index += 1
        return CellResult(
            verdict=Verdict.SANDBOX_ERROR, index=self._index, session_alive=alive,
            message=f"sandbox service: {short(reason)}",
        )  # fmt: skip

    def fork(self, n: int) -> list[RemoteSession]:
        """Always refused, as in process (``Session.fork``)."""
        raise SessionForkError(
            f"session {self.id} cannot fork: only a SessionTemplate (open_template), which runs trusted "
            "setup cells only, forks; run the shared setup there and fork it instead"
        )


class _ForkFailed(Exception):
    """The service could not fork (nothing to retry): the forks not made are lost sessions."""


class RemoteTemplate(_RemoteBase):
    """A template on a replica, forkable into ``RemoteSession``s on the same replica."""

    kind = "template"

    def fork(self, n: int) -> list[RemoteSession]:
        """``n`` sessions continuing from the template's state (sent ``FORKS_PER_CALL`` at a time). A
        replica that cannot be reached, or answers 404 or 5xx, gives lost sessions (their cells answer
        sandbox errors, counted); a refusal raises, the forks already made closed (all or nothing)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_FORKS:
            raise SessionError(f"n={n!r}; fork 1 to {MAX_FORKS} sessions at a time")
        self._check_open()
        made: list[RemoteSession] = []
        gone = self._gone or self._home.lost
        try:
            while len(made) < n and not gone:
                made += self._fork_part(min(FORKS_PER_CALL, n - len(made)))
        except _ForkFailed as exc:
            gone = str(exc)
        except BaseException:
            for session in made:
                session.close()
            raise
        for _ in range(n - len(made)):
            self._home.pool.wire.error()
            made.append(RemoteSession(self._home, "", self.limits, self._index, gone=gone))
        return made

    def _fork_part(self, n: int) -> list[RemoteSession]:
        try:
            answer = self._home.request("POST", self._path("/fork"), {"n": n}, retry=_RETRY_OPEN)
        except GaveUp as exc:
            _raise_if_full(exc)
            raise _ForkFailed(str(exc)) from None
        except MaybeRan as exc:
            raise _ForkFailed(str(exc)) from None
        if answer.status == 409:
            raise SessionForkError(f"replica {self.url} refused the fork: {answer.error()}")
        if answer.status == 422:
            raise InvalidRequestError(f"replica {self.url} refused the fork: {answer.error()}")
        ids = _forked(answer.data, n) if answer.status == 200 else None
        if ids is None:
            raise _ForkFailed(f"{self.url}: fork answered {answer.error()}")
        return [RemoteSession(self._home, session_id, self.limits, self._index) for session_id in ids]


def _forked(data: Any, n: int) -> list[str] | None:
    """The fork answer's session ids, exactly ``n`` forks, or ``None``."""
    sessions = data.get("sessions") if isinstance(data, dict) else None
    if not isinstance(sessions, list) or len(sessions) != n:
        return None
    ids = [s.get("session_id") if isinstance(s, dict) and s.get("kind") == "fork" else None for s in sessions]
    return (
        [i for i in ids if isinstance(i, str) and i] if all(isinstance(i, str) and i for i in ids) else None
    )
