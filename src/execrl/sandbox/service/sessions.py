"""Sessions over HTTP, next to ``/run_code`` in ``execrl sandbox serve`` (registered by ``service.create_app``).

    POST   /v1/sessions               {"runtime", "limits", "files", "files_base64", "template", "setup"}
                                      -> {"session_id", "kind", "limits", "setup": [cell results]}
    POST   /v1/sessions/{id}/cells    {"code", "timeout_s", "cpu_time_s"}  -> a cell result
    POST   /v1/sessions/{id}/fork     {"n", "limits"}                      -> {"sessions": [{"session_id", "kind"}]}
    POST   /v1/sessions/{id}/files    {"paths"}                            -> {"files": {path: base64}, "errors": {...}}
    GET    /v1/sessions/{id}          -> the session's stats
    DELETE /v1/sessions/{id}          -> {"session_id", "closed": true}
    POST   /run_jupyter               SandboxFusion's request and response, on a session (``jupyter.py``,
                                      over this module's ``SessionEndpoints``)

A cell result is ``CellResult.to_dict()`` (``types.py``: verdict, stdout, stderr, value, error, limit,
session_alive...). Caps (``SessionServiceConfig``, the ``--session-*`` options of ``execrl sandbox serve``):
sessions open at once (429 above: counted with the opens and forks still in flight, so concurrent opens
past the cap are 429 too), ``limits.lifetime_s``, ``limits.memory_mb`` and ``limits.max_output_bytes``
(422 naming the field; ``/run_jupyter``'s ``total_timeout`` against the same lifetime cap), forks per
call (422). Bad input answers 422 naming the field, an unknown session 404, a fork of a session that is
not a template 409, as JSON in the service's error shape.

One session, one call at a time, and none blocks the server (issue 35, class 7): a session's cells,
forks and file reads queue on the event loop (``MAX_QUEUED`` at most, 429 beyond), so they hold no
worker thread while they wait and another session's cell never waits behind them; ``GET`` answers
without waiting for a running cell; ``DELETE`` and stopping the server kill a running cell at once (its
request answers 404: the session is gone).

Templates run their setup cells with the capabilities a fork's jail needs inside the template's own
user namespace (none on the host,
``zygote/session_userns.py``), which reach more kernel code than a session's cells
do, so they are refused (403) unless the server was started with ``--session-templates``: allow them
only for clients whose setup code you trust. Every session the server opened is killed when it stops.
"""

from __future__ import annotations

import asyncio
import base64
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.service.serialize import (
    FieldProblem,
    RequestFieldError,
    decode_base64_files,
    find_unencodable,
    problems_from_validation_error,
)
from execrl.sandbox.sessions.api import _SessionBase
from execrl.sandbox.sessions.manager import SessionManager
from execrl.sandbox.sessions.template import SessionTemplate
from execrl.sandbox.sessions.types import SessionError, SessionForkError, SessionLimits
from execrl.sandbox.types import fetch_path_problems

__all__ = ["SessionEndpoints", "SessionServiceConfig", "add_session_routes", "parse", "refusal"]

ReadJson = Callable[[web.Request], Awaitable[Any]]
_DEFAULTS = SessionLimits()
MAX_QUEUED = 16  # requests waiting for one session (a client sends one cell at a time)


@dataclass(frozen=True)
class SessionServiceConfig:
    """Caps of the session endpoints. ``max_sessions``: open at once (sessions, templates and forks);
    ``max_lifetime_s``/``max_memory_mb``: the most a session's limits may ask; ``max_forks_per_call``;
    ``allow_templates``: serve templates (their setup cells are trusted code, ``zygote/session_fork.py``);
    ``max_jupyter_cells``: cells of one ``/run_jupyter`` request."""

    max_sessions: int = 32
    max_lifetime_s: float = 3600.0
    max_memory_mb: int = 2048
    max_forks_per_call: int = 16
    allow_templates: bool = False
    max_jupyter_cells: int = 256

    def __post_init__(self) -> None:
        for name in ("max_sessions", "max_memory_mb", "max_forks_per_call", "max_jupyter_cells"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidRequestError(f"SessionServiceConfig.{name} must be an int >= 1, got {value!r}")
        if not math.isfinite(self.max_lifetime_s) or self.max_lifetime_s <= 0:
            raise InvalidRequestError(
                f"SessionServiceConfig.max_lifetime_s must be > 0, got {self.max_lifetime_s}"
            )


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SessionLimitsModel(_Strict):
    cell_timeout_s: float = _DEFAULTS.cell_timeout_s
    cell_cpu_time_s: float = _DEFAULTS.cell_cpu_time_s
    max_output_bytes: int = _DEFAULTS.max_output_bytes
    memory_mb: int = _DEFAULTS.memory_mb
    max_processes: int = _DEFAULTS.max_processes
    workdir_mb: int = _DEFAULTS.workdir_mb
    workdir_inodes: int = _DEFAULTS.workdir_inodes
    max_file_mb: int = _DEFAULTS.max_file_mb
    max_open_files: int = _DEFAULTS.max_open_files
    max_cells: int = _DEFAULTS.max_cells
    cpu_time_s: float = _DEFAULTS.cpu_time_s
    lifetime_s: float = _DEFAULTS.lifetime_s
    idle_timeout_s: float = _DEFAULTS.idle_timeout_s


class OpenModel(_Strict):
    runtime: str | None = None
    limits: SessionLimitsModel = SessionLimitsModel()
    files: dict[str, str] = {}
    files_base64: dict[str, str] = {}
    template: bool = False
    setup: list[str] = []


class CellModel(_Strict):
    code: str
    timeout_s: float | None = None
    cpu_time_s: float | None = None

    @field_validator("timeout_s", "cpu_time_s")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or value <= 0):
            raise ValueError("must be a finite number of seconds > 0 (or null for the session's limit)")
        return value


class ForkModel(_Strict):
    n: int
    limits: SessionLimitsModel | None = None


class FilesModel(_Strict):
    paths: list[str]


def refusal(status: int, field: str, message: str, kind: str) -> web.Response:
    """An error in the service's JSON shape (``service._error_response``), for statuses other than 422."""
    where = ["path", field] if field == "session_id" else ["body", field]
    detail = [{"loc": where, "field": field, "msg": message, "type": kind}]
    return web.json_response({"error": f"{field}: {message}", "detail": detail}, status=status)


def parse(model: type[BaseModel], data: Any) -> Any:
    bad = find_unencodable(data)
    if bad is not None:
        raise RequestFieldError([FieldProblem(bad, "string is not valid Unicode (lone surrogate)")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RequestFieldError(problems_from_validation_error(exc)) from None


class SessionEndpoints:
    """The handlers, over one sandbox's ``SessionManager`` (``/run_jupyter`` uses its caps and manager)."""

    def __init__(
        self,
        manager: Callable[[], SessionManager],
        config: SessionServiceConfig,
        max_output_bytes: int,
        read_json: ReadJson,
    ) -> None:
        self._manager = manager
        self.config = config
        self.max_output_bytes = max_output_bytes
        self.read_json = read_json
        self.opened: set[str] = set()
        self.transient: set[_SessionBase] = set()  # ``/run_jupyter``'s sessions while their request runs
        self._gates: dict[str, _Gate] = {}
        self._reserved = 0  # slots of opens and forks in flight

    @property
    def manager(self) -> SessionManager:
        """The sandbox's sessions, started on the first request that needs them."""
        return self._manager()

    # -- checks ----------------------------------------------------------------------------------------
    def limits(self, model: SessionLimitsModel, field: str = "limits") -> SessionLimits:
        caps = {
            "lifetime_s": (self.config.max_lifetime_s, "--session-max-lifetime-s"),
            "memory_mb": (self.config.max_memory_mb, "--session-max-memory-mb"),
            "max_output_bytes": (self.max_output_bytes, "--max-output-bytes"),
        }
        values = model.model_dump()
        for name, (cap, option) in caps.items():
            if name not in model.model_fields_set:  # a default above the server's cap is lowered to it
                values[name] = min(values[name], cap)
            elif values[name] > cap:
                message = f"is {values[name]}; this server allows at most {cap} (server option {option})"
                raise RequestFieldError([FieldProblem(f"{field}.{name}", message, "cap_exceeded")])
        try:
            return SessionLimits(**values)
        except InvalidRequestError as exc:
            raise RequestFieldError([FieldProblem(field, str(exc).removeprefix("limits."))]) from None

    def reserve(self, wanted: int) -> web.Response | None:
        """Take ``wanted`` of the server's sessions for an open or a fork about to start (give them back
        with ``unreserve`` once it ended, either way), or the 429 if they are not free. On the event
        loop, with no await between the check and the count: concurrent opens cannot all pass it."""
        taken = self.manager.count(holding_slots=True) + self._reserved
        if taken + wanted > self.config.max_sessions:
            message = (
                f"{taken} are open or opening and this asks for {wanted} more; the server allows "
                f"{self.config.max_sessions} (server option --session-max-sessions)"
            )
            return refusal(429, "sessions", message, "cap_exceeded")
        self._reserved += wanted
        return None

    def unreserve(self, wanted: int) -> None:
        self._reserved -= wanted

    def session(self, request: web.Request) -> _SessionBase | None:
        session_id = request.match_info["session_id"]
        session = self.manager.get(session_id) if session_id in self.opened else None
        if session is None:  # closed, or forgotten by the watchdog long after it ended
            self.opened.discard(session_id)
            self._gates.pop(session_id, None)
        return session

    def busy(self, session: _SessionBase) -> web.Response | None:
        """The 429 for a session that already has ``MAX_QUEUED`` requests waiting."""
        gate = self._gates.get(session.id)
        if gate is not None and gate.waiting >= MAX_QUEUED:
            message = f"{gate.waiting} requests already wait for this session; send its calls one at a time"
            return refusal(429, "session_id", message, "busy")
        return None

    async def serial(self, session: _SessionBase, call: Callable[[], Any]) -> Any:
        """Run ``call`` on a worker thread once the session's earlier calls ended (check ``busy`` first)."""
        gate = self._gates.setdefault(session.id, _Gate())
        gate.waiting += 1
        try:
            async with gate.lock:
                return await self.manager.in_thread(call)
        finally:
            gate.waiting -= 1

    @staticmethod
    def unknown(request: web.Request) -> web.Response:
        shown = request.match_info["session_id"][:80]
        return refusal(
            404, "session_id", f"no open session {shown!r} (closed, expired or never opened)", "not_found"
        )

    # -- handlers --------------------------------------------------------------------------------------
    async def open(self, request: web.Request) -> web.Response:
        body: OpenModel = parse(OpenModel, await self.read_json(request))
        limits = self.limits(body.limits)
        if body.template and not self.config.allow_templates:
            message = (
                "session templates are off on this server: their setup cells run with the capabilities a "
                "fork's jail needs (inside the template's own user namespace); start it with "
                "--session-templates for clients whose setup you trust"
            )
            return refusal(403, "template", message, "forbidden")
        if body.setup and not body.template:
            raise RequestFieldError(
                [FieldProblem("setup", 'only a template runs setup cells; set "template": true')]
            )
        files: dict[str, str | bytes] = {
            **body.files,
            **decode_base64_files(body.files_base64, "files_base64"),
        }
        manager, runtime = self.manager, body.runtime
        full = self.reserve(1)
        if full is not None:
            return full
        session: _SessionBase
        try:
            if body.template:
                session, setup = await manager.in_thread(
                    lambda: manager.open_template(
                        setup=body.setup, runtime=runtime, limits=limits, files=files
                    )
                )
            else:
                session = await manager.in_thread(
                    lambda: manager.open_session(runtime=runtime, limits=limits, files=files)
                )
                setup = []
        finally:
            self.unreserve(1)
        self.opened.add(session.id)
        return web.json_response(
            {
                "session_id": session.id,
                "kind": session.kind,
                "limits": _limits_dict(limits),
                "setup": [result.to_dict() for result in setup],
            }  # fmt: skip
        )

    async def cell(self, request: web.Request) -> web.Response:
        session = self.session(request)
        if session is None:
            return self.unknown(request)
        body: CellModel = parse(CellModel, await self.read_json(request))
        run = session.run_setup if isinstance(session, SessionTemplate) else session.run  # type: ignore[attr-defined]
        busy = self.busy(session)
        if busy is not None:
            return busy
        try:
            result = await self.serial(
                session, lambda: run(body.code, timeout_s=body.timeout_s, cpu_time_s=body.cpu_time_s)
            )
        except SessionForkError as exc:
            return refusal(409, "code", str(exc), "conflict")
        except SessionError:  # closed meanwhile
            return self.unknown(request)
        return web.json_response(result.to_dict())

    async def fork(self, request: web.Request) -> web.Response:
        session = self.session(request)
        if session is None:
            return self.unknown(request)
        body: ForkModel = parse(ForkModel, await self.read_json(request))
        if not 1 <= body.n <= self.config.max_forks_per_call:
            message = f"is {body.n}; fork 1 to {self.config.max_forks_per_call} at a time (server option --session-max-forks)"
            raise RequestFieldError([FieldProblem("n", message, "cap_exceeded")])
        limits = self.limits(body.limits, "limits") if body.limits is not None else None
        if not isinstance(session, SessionTemplate):
            return refusal(409, "session_id", str(_refused(session)), "conflict")
        full = self.busy(session) or self.reserve(body.n)
        if full is not None:
            return full
        try:
            forks = await self.serial(session, lambda: session.fork(body.n, limits=limits))
        except SessionForkError as exc:
            return refusal(409, "session_id", str(exc), "conflict")
        except SessionError:  # closed meanwhile
            return self.unknown(request)
        finally:
            self.unreserve(body.n)
        self.opened.update(fork.id for fork in forks)
        return web.json_response({"sessions": [{"session_id": fork.id, "kind": fork.kind} for fork in forks]})

    async def files(self, request: web.Request) -> web.Response:
        session = self.session(request)
        if session is None:
            return self.unknown(request)
        body: FilesModel = parse(FilesModel, await self.read_json(request))
        problems = fetch_path_problems(body.paths)
        if problems:
            raise RequestFieldError([FieldProblem("paths", problems[0][1])])
        busy = self.busy(session)
        if busy is not None:
            return busy
        try:
            found, errors = await self.serial(session, lambda: session.read_files(body.paths))
        except SessionError:  # closed meanwhile
            return self.unknown(request)
        return web.json_response(
            {"files": {p: base64.b64encode(d).decode() for p, d in found.items()}, "errors": errors}
        )

    async def stats(self, request: web.Request) -> web.Response:
        session = self.session(request)
        if session is None:
            return self.unknown(request)
        return web.json_response(session.stats().to_dict())

    async def close(self, request: web.Request) -> web.Response:
        """Kill the session now, even while a cell runs (that cell's request answers 404)."""
        session = self.session(request)
        if session is None:
            return self.unknown(request)
        session._kill()  # at once, on the loop (a signal and a cgroup write): a running cell ends
        await self.manager.in_thread(session.close)
        self.opened.discard(session.id)
        self._gates.pop(session.id, None)
        return web.json_response({"session_id": session.id, "closed": True})

    async def close_all(self, app: web.Application) -> None:
        """The server stops (``on_shutdown``: before aiohttp waits for the requests in flight): every
        session it opened dies at once, running cells included, so that those requests end now."""
        if not self.opened and not self.transient:
            return
        sessions = [self.manager.get(session_id) for session_id in self.opened]
        alive = [s for s in [*sessions, *self.transient] if s is not None]
        for session in alive:
            session._kill()
        await asyncio.gather(*(self.manager.in_thread(session.close) for session in alive))
        self.opened.clear()
        self._gates.clear()


class _Gate:
    """One session's queue: its calls run one at a time, the waiting ones on the event loop."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.waiting = 0


def _refused(session: _SessionBase) -> SessionForkError:
    try:
        session.fork(1)  # type: ignore[attr-defined]
    except SessionForkError as exc:
        return exc
    raise AssertionError("a session that is not a template forked")  # pragma: no cover


def _limits_dict(limits: SessionLimits) -> dict[str, Any]:
    return {field.name: getattr(limits, field.name) for field in fields(limits)}


def add_session_routes(
    app: web.Application, *, manager: Callable[[], SessionManager], config: SessionServiceConfig, max_output_bytes: int,
    read_json: ReadJson,
) -> SessionEndpoints:  # fmt: skip
    """Mount the session endpoints on the service's application; ``/run_jupyter`` (``jupyter.py``) is
    mounted by the caller over the endpoints returned."""
    endpoints = SessionEndpoints(manager, config, max_output_bytes, read_json)
    app.router.add_post("/v1/sessions", endpoints.open)
    app.router.add_post("/v1/sessions/{session_id}/cells", endpoints.cell)
    app.router.add_post("/v1/sessions/{session_id}/fork", endpoints.fork)
    app.router.add_post("/v1/sessions/{session_id}/files", endpoints.files)
    app.router.add_get("/v1/sessions/{session_id}", endpoints.stats)
    app.router.add_delete("/v1/sessions/{session_id}", endpoints.close)
    app.on_shutdown.append(endpoints.close_all)
    return endpoints
