"""HTTP front end of the sandbox: execrl's own JSON API plus SandboxFusion's ``/run_code``.

Endpoints (all JSON):

    POST /v1/execute        ExecutionRequest (see ``serialize.py``)      -> ExecutionResult
    POST /v1/execute_batch  {"requests": [ExecutionRequest, ...]}      -> {"results": [...]} (input order)
    POST /run_code          SandboxFusion's request (see ``fusion.py``) -> SandboxFusion's response
    GET  /v1/ping           -> "pong"
    /v1/sessions..., POST /run_jupyter: sandbox sessions (``sessions.py``, ``jupyter.py``)

verl's SandboxFusion reward client works unchanged: set its ``sandbox_fusion_url`` to
``http://HOST:PORT/run_code`` (see ``fusion.py`` for where the semantics differ and why).

Bad input never reaches the sandbox and never stops the server: a body that is not UTF-8 or not JSON, a
wrong field type, an unknown field or language, an empty /v1 program or an out-of-range limit answers HTTP 422
(as FastAPI, hence SandboxFusion, does) with ``{"error": "<field>: <problem>", "detail": [{"loc": [...],
"field": ..., "msg": ..., "type": ...}]}``; so do JSON nested deeper than ``caps.MAX_JSON_DEPTH``, an
integer past Python's 4,300-digit limit or a lone surrogate (naming the field), and a request above one
of ``ServiceConfig``'s caps (output per stream, tests, batch size, worst-case result size: ``type:
cap_exceeded``); unknown routes 404, wrong methods 405, bodies over ``max_body_mb`` 413 (by
Content-Length, before the body is read), a POST whose Content-Type is not ``application/json`` (or whose
charset is not UTF-8, or which has a ``Content-Encoding``) 415 and a POST whose ``Origin`` header is not
in ``allowed_origins`` 403, all as JSON. These body rules live in ``http_edge.py``, shared with ``execrl serve``; bodies over 1 MiB are
decoded off the event loop. A sandbox that cannot run (not the candidate's fault) answers 503 on the native endpoints and
``status: SandboxError`` on ``/run_code``, like SandboxFusion.

Concurrency is the sandbox's: handlers ``await sandbox.arun(...)``, which queues on the sandbox's bounded
worker pool without blocking the event loop, so many slow requests cannot starve ``/v1/ping``. The HTTP
queue itself is unbounded, and there is no authentication: bind to loopback (the default) or put a
proxy with authentication and a connection limit in front (README, "Exposing the sandbox service").
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from aiohttp import web

from execrl.sandbox.errors import InvalidRequestError, SandboxError
from execrl.sandbox.service.caps import check_batch, check_execution, fit_default_output
from execrl.sandbox.service.fusion import UnsupportedLanguage, parse_run_code, run_code_response
from execrl.sandbox.service.fusion import unsupported_language_response as _unsupported
from execrl.sandbox.service.http_edge import BodyRefused, read_json_body
from execrl.sandbox.service.jupyter import add_jupyter_route
from execrl.sandbox.service.serialize import (
    FieldProblem,
    RequestFieldError,
    request_from_dict,
    result_to_dict,
)
from execrl.sandbox.service.sessions import SessionServiceConfig, add_session_routes
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, Verdict

__all__ = ["ServiceConfig", "SupportsAsyncRun", "create_app", "serve"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SHUTDOWN_GRACE_S = 10.0  # what requests still in flight get once SIGTERM arrived


class SupportsAsyncRun(Protocol):
    """What the service needs from a sandbox (``execrl.sandbox.Sandbox`` provides it)."""

    async def arun(self, request: ExecutionRequest) -> ExecutionResult: ...

    async def arun_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]: ...


@dataclass(frozen=True)
class ServiceConfig:
    """Edge limits of the HTTP service (the sandbox's own limits are per request).

    ``default_memory_mb`` is used when a SandboxFusion request says ``memory_limit_MB: -1`` ("no limit"
    there; execrl always sets a cgroup limit). Caps, each answered 422 naming the field and the cap:
    ``max_output_bytes`` per stream of one execution (``limits.max_output_bytes``; ``/run_code`` runs with
    the smaller of this and execrl's 1 MiB default), ``max_tests`` per execution, ``max_batch_requests``
    per batch, and ``max_result_mb``: the most text one request's results can hold, worst case (see
    ``result_bytes``), summed over a batch. With them the server's memory is bounded by requests in
    flight x ``max_result_mb`` (times ~6 while a response is JSON-encoded: control characters become
    ``\\u`` escapes); bodies over ``max_body_mb`` answer 413. ``allowed_origins``: browser origins
    (``https://host[:port]``) whose POSTs are served; any POST carrying another ``Origin`` header
    answers 403 (none by default: the API is for programs, not web pages).
    ``run_code_python_runtime``: the runtime ``/run_code``'s ``python`` runs in (``"auto"``, the default:
    ``python-data`` when installed, as SandboxFusion's Python has numpy; ``None``: the standard library;
    ``"python-data"``: required, the server refuses to start without it). ``run_code_typescript``:
    ``"transpile"`` (default, SandboxFusion's ``tsx``: types ignored) or ``"check"`` (type errors are
    compile errors); ``run_code_console_assert``: ``"log"`` (default, as SandboxFusion: a failed
    ``console.assert`` only prints) or ``"fail"`` (it fails the run). ``fusion.py`` says why.
    """

    default_memory_mb: int = 1024
    max_batch_requests: int = 1024
    max_body_mb: int = 64
    max_output_bytes: int = 4 << 20
    max_tests: int = 1024
    max_result_mb: int = 256
    allowed_origins: tuple[str, ...] = ()
    run_code_python_runtime: str | None = "auto"
    run_code_typescript: Literal["transpile", "check"] = "transpile"
    run_code_console_assert: Literal["log", "fail"] = "log"

    def __post_init__(self) -> None:
        names = ("default_memory_mb", "max_batch_requests", "max_body_mb", "max_tests", "max_result_mb")
        for name in names:
            if getattr(self, name) < 1:
                raise InvalidRequestError(f"ServiceConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 64 <= self.max_output_bytes <= 1 << 30:
            raise InvalidRequestError(
                f"ServiceConfig.max_output_bytes={self.max_output_bytes} is out of range; set it in [64, {1 << 30}]"
            )
        if self.run_code_typescript not in ("transpile", "check"):
            raise InvalidRequestError(
                f"run_code_typescript={self.run_code_typescript!r}: use transpile or check"
            )
        if self.run_code_console_assert not in ("log", "fail"):
            raise InvalidRequestError(
                f"run_code_console_assert={self.run_code_console_assert!r}: use log or fail"
            )
        if self.run_code_python_runtime not in (None, "auto"):  # refuse to start without it, naming the setup
            from execrl.sandbox.langs.runtimes import resolve_runtime

            resolve_runtime("python", self.run_code_python_runtime)
        for origin in self.allowed_origins:
            if not re.fullmatch(r"https?://[^/\s]+", origin):
                raise InvalidRequestError(
                    f"allowed origin {origin!r} is not scheme://host[:port] (e.g. https://app.example.com)"
                )


_SANDBOX_KEY = web.AppKey("sandbox", SupportsAsyncRun)
_CONFIG_KEY = web.AppKey("config", ServiceConfig)


_HEADER_KINDS = frozenset({"unsupported_media_type", "origin_forbidden"})


def _loc(problem: FieldProblem) -> list[str]:
    """FastAPI-style location: ["body", field] for body fields, ["path", path] for routing errors."""
    if problem.kind == "http_error":
        return ["path", problem.field]
    if problem.kind in _HEADER_KINDS:
        return ["header", problem.field]
    return ["body"] if problem.field == "body" else ["body", problem.field]


def _error_response(status: int, problems: Sequence[FieldProblem]) -> web.Response:
    detail = [{"loc": _loc(p), "field": p.field, "msg": p.message, "type": p.kind} for p in problems]
    message = "; ".join(f"{p.field}: {p.message}" for p in problems)
    return web.json_response({"error": message, "detail": detail}, status=status)


@web.middleware
async def _errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure becomes a JSON body; nothing a client sends can take the server down."""
    try:
        return await handler(request)
    except BodyRefused as exc:
        return _error_response(exc.status, [exc.problem])
    except RequestFieldError as exc:
        return _error_response(422, exc.problems)
    except InvalidRequestError as exc:
        return _error_response(422, [FieldProblem("body", str(exc))])
    except SandboxError as exc:
        return _error_response(503, [FieldProblem("sandbox", str(exc), "sandbox_error")])
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error_response(exc.status, [FieldProblem(request.path, exc.reason, "http_error")])


async def _read_json(request: web.Request) -> Any:
    """The body as JSON under the shared edge rules (``http_edge``: Origin, Content-Type and charset,
    Content-Length checked before reading, UTF-8, depth and size, integers and surrogates; a large body
    decoded off the event loop)."""
    config = request.app[_CONFIG_KEY]
    return await read_json_body(
        request, allowed_origins=config.allowed_origins, max_body_bytes=config.max_body_mb << 20
    )


def _check_language(execution: ExecutionRequest, field: str) -> ExecutionRequest:
    """Refuse a language the sandbox does not run before queueing (422 naming the field)."""
    from execrl.sandbox.langs.registry import get_language

    try:
        get_language(execution.language)
    except InvalidRequestError as exc:
        raise RequestFieldError([FieldProblem(field, str(exc))]) from None
    return execution


def _parse_execution(request: web.Request, data: Any, prefix: str = "") -> ExecutionRequest:
    config = request.app[_CONFIG_KEY]
    execution = fit_default_output(request_from_dict(data, prefix=prefix), config.max_output_bytes)
    _check_language(execution, f"{prefix}.language" if prefix else "language")
    check_execution(
        execution,
        max_output_bytes=config.max_output_bytes,
        max_tests=config.max_tests,
        max_result_mb=config.max_result_mb,
        prefix=prefix,
    )
    return execution


async def _execute(request: web.Request) -> web.Response:
    execution = _parse_execution(request, await _read_json(request))
    result = await request.app[_SANDBOX_KEY].arun(execution)
    return web.json_response(result_to_dict(result))


async def _execute_batch(request: web.Request) -> web.Response:
    data = await _read_json(request)
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
        raise RequestFieldError([FieldProblem("requests", 'send {"requests": [ExecutionRequest, ...]}')])
    extra = sorted(set(data) - {"requests"})
    if extra:
        raise RequestFieldError([FieldProblem(extra[0], "Extra inputs are not permitted", "extra_forbidden")])
    config = request.app[_CONFIG_KEY]
    if len(data["requests"]) > config.max_batch_requests:
        raise RequestFieldError([FieldProblem(
            "requests",
            f"has {len(data['requests'])} items; send <= {config.max_batch_requests} "
            "(server option --max-batch-requests)",
            "cap_exceeded",
        )])  # fmt: skip
    executions = [
        _parse_execution(request, item, f"requests[{i}]") for i, item in enumerate(data["requests"])
    ]
    check_batch(executions, max_result_mb=config.max_result_mb)
    results = await request.app[_SANDBOX_KEY].arun_batch(executions)
    return web.json_response({"results": [result_to_dict(r) for r in results]})


async def _run_code(request: web.Request) -> web.Response:
    data = await _read_json(request)
    try:
        config = request.app[_CONFIG_KEY]
        execution = parse_run_code(
            data,
            default_memory_mb=config.default_memory_mb,
            max_output_bytes=config.max_output_bytes,
            python_runtime=config.run_code_python_runtime,
            typescript=config.run_code_typescript,
            console_assert=config.run_code_console_assert,
        )
    except UnsupportedLanguage as exc:
        return web.json_response(_unsupported(exc))
    try:
        result = await request.app[_SANDBOX_KEY].arun(execution)
    except InvalidRequestError:
        raise
    except SandboxError as exc:  # the sandbox broke: SandboxFusion answers 200 with SandboxError
        body = run_code_response(_sandbox_error_result(str(exc)), execution.language)
        return web.json_response(body)
    response = run_code_response(
        result,
        execution.language,
        max_output_bytes=execution.limits.max_output_bytes,
        runtime=execution.runtime,
    )
    return web.json_response(response)


def _sandbox_error_result(message: str) -> ExecutionResult:
    return ExecutionResult(verdict=Verdict.SANDBOX_ERROR, sandbox_error=message)


async def _ping(request: web.Request) -> web.Response:
    return web.json_response("pong")


def create_app(
    sandbox: SupportsAsyncRun,
    config: ServiceConfig | None = None,
    sessions: SessionServiceConfig | None = None,
) -> web.Application:
    """The aiohttp application serving ``sandbox``; the caller owns the sandbox's lifetime. A sandbox
    with sessions (``execrl.sandbox.Sandbox``) also gets the session endpoints and ``/run_jupyter``
    (``sessions.py``, ``jupyter.py``; capped by ``sessions``)."""
    config = config or ServiceConfig()
    app = web.Application(middlewares=[_errors_as_json], client_max_size=config.max_body_mb << 20)
    app[_SANDBOX_KEY] = sandbox
    app[_CONFIG_KEY] = config
    app.router.add_post("/v1/execute", _execute)
    app.router.add_post("/v1/execute_batch", _execute_batch)
    app.router.add_post("/run_code", _run_code)
    app.router.add_get("/v1/ping", _ping)
    if callable(getattr(sandbox, "sessions", None)):
        endpoints = add_session_routes(
            app, manager=sandbox.sessions, config=sessions or SessionServiceConfig(),  # type: ignore[attr-defined]
            max_output_bytes=config.max_output_bytes, read_json=_read_json,
        )  # fmt: skip
        add_jupyter_route(
            app,
            endpoints,
            default_memory_mb=config.default_memory_mb,
            python_runtime=config.run_code_python_runtime,
        )
    return app


async def _serve_until_signal(app: web.Application, host: str, port: int) -> None:
    # auto_decompress off: compressed bodies are refused (``http_edge``), and the unread rest of one is
    # drained as it came, never inflated on the event loop. On SIGTERM, running cells are killed first
    # (``on_shutdown``), then requests in flight get ``SHUTDOWN_GRACE_S`` (aiohttp's default: 60 s).
    runner = web.AppRunner(
        app, access_log=None, handle_signals=False, auto_decompress=False, shutdown_timeout=SHUTDOWN_GRACE_S
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        print(f"execrl sandbox service listening on http://{bound_host}:{bound_port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def serve(
    *, host: str, port: int, workers: int | None, config: ServiceConfig | None = None,
    sessions: SessionServiceConfig | None = None,
) -> None:  # fmt: skip
    """Start a sandbox with ``workers`` workers and serve it until SIGINT/SIGTERM.

    The sandbox (its zygote and worker pool) is started before the event loop so that no thread exists
    when it forks. ``workers=None`` keeps the sandbox's default. ``port=0`` picks a free port; the bound address is printed on one line.
    """
    from execrl.sandbox import Sandbox, SandboxConfig  # the isolation engine, imported only when serving

    config = config or ServiceConfig()
    if config.run_code_python_runtime == "auto":
        from execrl.sandbox.langs.runtimes import get_runtime

        problem = get_runtime("python-data").problem()
        if problem is not None:  # stderr: the first stdout line is the address
            print(
                f"execrl sandbox serve: /run_code's python has the standard library only ({problem})",
                file=sys.stderr,
            )
    sessions = sessions or SessionServiceConfig()
    sandbox_config = SandboxConfig(max_sessions=sessions.max_sessions)
    if workers is not None:
        sandbox_config = SandboxConfig(workers=workers, max_sessions=sessions.max_sessions)
    with Sandbox(sandbox_config) as sandbox:
        asyncio.run(_serve_until_signal(create_app(sandbox, config, sessions), host, port))
