"""SandboxFusion's ``POST /run_jupyter`` on a session: the cells run in order in one interpreter.

Request and response as SandboxFusion defines them (``sandbox/runners/types.py`` and
``sandbox/server/sandbox_api.py`` of bytedance/SandboxFusion, read at commit 469de08; no code taken):
request ``cells`` (list of code), ``cell_timeout`` (0: none), ``total_timeout`` (45 s),
``memory_limit_MB`` (-1: the server's default), ``kernel`` (``"python3"``), ``files`` (path -> base64),
``fetch_files``; response ``status`` (Success | Failed | SandboxError), ``message``, ``driver`` (a
command result: status Finished | TimeLimitExceeded | Error, execution_time, return_code, stdout,
stderr), ``cells`` (per cell ``stdout``, ``stderr``, ``display``: ``[{"text/plain": repr}]`` for the
value of its last expression, ``error``: ``[{"ename", "evalue", "traceback": [lines]}]``),
``executor_pod_name`` and ``files`` (path -> base64). As in Jupyter, a cell that raises does not stop
the cells after it, and the request succeeds.

Where execrl differs, and why:
* a session, not an IPython kernel: no IPython syntax (``%magic``, ``!shell``), no rich display
  (``display`` holds only ``text/plain``; no matplotlib images), tracebacks without colour codes and
  with the cells' own frames only (``zygote/session_kernel.py``, ``cell_traceback``);
* ``cell_timeout`` is enforced (SandboxFusion accepts and ignores it): the cell is interrupted, its
  ``error`` says so and the next cell runs; a cell that does not stop, a crash of the interpreter or
  ``total_timeout`` end the request ``Failed`` with the cells run so far (SandboxFusion answers
  ``cells: []`` then) and the driver's status ``TimeLimitExceeded`` or ``Error``;
* memory is a cgroup limit of the whole session; output is capped per cell and stream
  (``SessionLimits.max_output_bytes``, 1 MiB or the server's ``--max-output-bytes``), marked in
  ``message``; ``fetch_files`` follow ``/run_code``'s rules (regular files, no link followed; why one was
  not returned is in ``message``);
* the cells run in the server's ``--run-code-python-runtime`` (standard library by default).
"""

from __future__ import annotations

import base64
import math
import time
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web
from pydantic import BaseModel, field_validator

from execrl.sandbox.errors import SandboxError
from execrl.sandbox.service.fusion import python_runtime_of
from execrl.sandbox.service.serialize import FieldProblem, RequestFieldError, decode_base64_files
from execrl.sandbox.service.sessions import SessionEndpoints, parse
from execrl.sandbox.sessions.types import CellResult, SessionClosedError, SessionLimits
from execrl.sandbox.types import (
    Limits,
    Verdict,
    fetch_path_problems,
    work_path_problems,
    workdir_space_problems,
)

if TYPE_CHECKING:
    from execrl.sandbox.sessions.api import Session

__all__ = ["JupyterEndpoint", "RunJupyterRequest", "add_jupyter_route", "cell_entry"]


class RunJupyterRequest(BaseModel):
    """The ``/run_jupyter`` body: lax types and ignored extra keys, like SandboxFusion's FastAPI model."""

    cells: list[str]
    cell_timeout: float = 0
    total_timeout: float = 45
    memory_limit_MB: int = -1
    kernel: Literal["python3"] = "python3"
    files: dict[str, str | None] = {}
    fetch_files: list[str] = []

    @field_validator("total_timeout")
    @classmethod
    def _total(cls, value: float) -> float:
        if not math.isfinite(value) or not 0 < value <= 3600:
            raise ValueError("must be a number of seconds in (0, 3600]")
        return value

    @field_validator("cell_timeout")
    @classmethod
    def _cell(cls, value: float) -> float:
        if not math.isfinite(value) or not 0 <= value <= 3600:
            raise ValueError("must be a number of seconds in [0, 3600] (0: no limit but total_timeout)")
        return value


def cell_entry(result: CellResult) -> dict[str, Any]:
    """One cell of the response: streams, the last expression's repr as ``display``, the exception
    (or the limit that interrupted the cell) as ``error``."""
    display = [{"text/plain": result.value}] if result.value is not None else []
    error = []
    if result.error_type is not None:
        error.append(
            {
                "ename": result.error_type,
                "evalue": result.error_message or "",
                "traceback": list(result.traceback),
            }
        )
    if result.limit is not None and result.verdict is not Verdict.PASSED:
        error.append({"ename": result.verdict.value, "evalue": result.message, "traceback": []})
    return {"stdout": result.stdout, "stderr": result.stderr, "display": display, "error": error}


def _command(
    status: str, execution_time: float | None, return_code: int | None, stderr: str = ""
) -> dict[str, Any]:
    return {
        "status": status,
        "execution_time": execution_time,
        "return_code": return_code,
        "stdout": "",
        "stderr": stderr,
    }


class JupyterEndpoint:
    def __init__(
        self, endpoints: SessionEndpoints, *, default_memory_mb: int, python_runtime: str | None
    ) -> None:
        self.endpoints = endpoints
        self.default_memory_mb = default_memory_mb
        self.python_runtime = python_runtime_of(python_runtime)  # "auto" resolved once, at start

    def _request(self, data: Any) -> tuple[RunJupyterRequest, dict[str, bytes], SessionLimits]:
        body: RunJupyterRequest = parse(RunJupyterRequest, data)
        cap = self.endpoints.config.max_jupyter_cells
        if len(body.cells) > cap:
            message = f"has {len(body.cells)} cells; this server runs at most {cap} per request"
            raise RequestFieldError([FieldProblem("cells", message, "cap_exceeded")])
        files = decode_base64_files(body.files, "files")
        cap_mb = self.endpoints.config.max_memory_mb
        memory_mb = body.memory_limit_MB if body.memory_limit_MB > 0 else min(self.default_memory_mb, cap_mb)
        if memory_mb > cap_mb:
            raise RequestFieldError(
                [
                    FieldProblem(
                        "memory_limit_MB",
                        f"is {memory_mb}; this server allows at most {cap_mb}",
                        "cap_exceeded",
                    )
                ]
            )
        total = self._total_timeout(body)
        per_cell = min(body.cell_timeout or total, total)
        output = min(Limits().max_output_bytes, self.endpoints.max_output_bytes)
        lifetime = min(total + 5, self.endpoints.config.max_lifetime_s)
        limits = SessionLimits(
            cell_timeout_s=per_cell, cell_cpu_time_s=per_cell, max_output_bytes=output,
            memory_mb=max(16, memory_mb), max_cells=max(1, len(body.cells)), cpu_time_s=total,
            lifetime_s=lifetime, idle_timeout_s=lifetime,
        )  # fmt: skip
        problems = (
            work_path_problems(list(files), None)
            or workdir_space_problems(files, " ", Limits())
            or fetch_path_problems(body.fetch_files)
        )
        if problems:
            raise RequestFieldError([FieldProblem(name, problem) for name, problem in problems])
        return body, files, limits

    def _total_timeout(self, body: RunJupyterRequest) -> float:
        """``total_timeout`` under the server's session lifetime cap: an explicit one above it is a 422,
        the default is lowered to it (as ``/v1/sessions`` treats ``limits.lifetime_s``)."""
        cap_s = self.endpoints.config.max_lifetime_s
        if body.total_timeout <= cap_s:
            return body.total_timeout
        if "total_timeout" in body.model_fields_set:
            message = (
                f"is {body.total_timeout}; this server allows at most {cap_s} "
                "(server option --session-max-lifetime-s)"
            )
            raise RequestFieldError([FieldProblem("total_timeout", message, "cap_exceeded")])
        return cap_s

    async def handle(self, request: web.Request) -> web.Response:
        body, files, limits = self._request(await self.endpoints.read_json(request))
        manager = self.endpoints.manager
        full = self.endpoints.reserve(1)
        if full is not None:
            return full
        start = time.monotonic()
        try:
            session = await manager.in_thread(
                lambda: manager.open_session(runtime=self.python_runtime, limits=limits, files=dict(files))
            )
        except SandboxError as exc:  # the sandbox could not start one: SandboxFusion's SandboxError
            return web.json_response(
                _response("SandboxError", str(exc), _command("Error", None, None, str(exc)), [])
            )
        finally:
            self.endpoints.unreserve(1)
        self.endpoints.transient.add(session)  # killed at once if the server stops
        try:
            answer = await manager.in_thread(lambda: self._run(session, body, limits.cpu_time_s, start))
        except SessionClosedError:
            why = "the server stopped while the cells ran"
            answer = _response("SandboxError", why, _command("Error", None, None, why), [])
        finally:
            self.endpoints.transient.discard(session)
            await manager.in_thread(session.close)
        return web.json_response(answer)

    def _run(self, session: Session, body: RunJupyterRequest, total_s: float, start: float) -> dict[str, Any]:
        deadline = start + total_s
        cells, ended, notes = [], None, []
        for code in body.cells:
            left = deadline - time.monotonic()
            if left <= 0:
                ended = CellResult(
                    verdict=Verdict.TIME_LIMIT, index=0, limit="lifetime_s", session_alive=False
                )
                break
            result = session.run(code, timeout_s=left, cpu_time_s=left)
            cells.append(cell_entry(result))
            if result.stdout_truncated or result.stderr_truncated:
                notes.append(
                    f"cell {len(cells)}: output cut at {session.limits.max_output_bytes} bytes per stream"
                )
            total_hit = result.verdict is Verdict.TIME_LIMIT and left <= session.limits.cell_timeout_s
            if not result.session_alive or total_hit:  # the kernel died, or total_timeout ran out
                ended = result
                break
        files: dict[str, bytes] = {}
        if ended is None and body.fetch_files:
            files, errors = session.read_files(body.fetch_files)
            notes += [f"fetch_files not returned: {path!r} {why}" for path, why in errors.items()]
        elapsed = time.monotonic() - start
        if ended is None:
            return _response("Success", "; ".join(notes), _command("Finished", elapsed, 0), cells, files)
        timed_out = ended.verdict is Verdict.TIME_LIMIT
        status = "TimeLimitExceeded" if timed_out else "Error"
        why = ended.message or ("total_timeout reached" if timed_out else "the interpreter ended")
        driver = _command(status, elapsed, None if timed_out else ended.exit_code, why)
        return _response("Failed", "; ".join([why, *notes]), driver, cells)


def add_jupyter_route(
    app: web.Application, endpoints: SessionEndpoints, *, default_memory_mb: int, python_runtime: str | None
) -> None:
    """Mount ``POST /run_jupyter`` over the session endpoints (``sessions.add_session_routes``)."""
    jupyter = JupyterEndpoint(endpoints, default_memory_mb=default_memory_mb, python_runtime=python_runtime)
    app.router.add_post("/run_jupyter", jupyter.handle)


def _response(
    status: str,
    message: str,
    driver: dict[str, Any],
    cells: list[dict[str, Any]],
    files: dict[str, bytes] | None = None,
) -> dict[str, Any]:
    encoded = {path: base64.b64encode(data).decode() for path, data in (files or {}).items()}
    return {
        "status": status,
        "message": message,
        "driver": driver,
        "cells": cells,
        "executor_pod_name": None,
        "files": encoded,
    }
