"""SandboxFusion's ``POST /run_code`` schema on top of execrl's sandbox, so its clients work unchanged.

Field names and meanings follow SandboxFusion (bytedance/SandboxFusion, ``sandbox/server/sandbox_api.py``,
observed at commit 469de08) and what verl's client (``verl/utils/reward_score/sandbox_fusion/utils.py``)
sends and reads. Request: ``code``, ``language``, ``run_timeout``, ``compile_timeout``, ``memory_limit_MB``,
``stdin``, ``files`` (path -> base64), ``fetch_files``. Response: ``status`` (Success | Failed |
SandboxError), ``message``, ``compile_result``/``run_result`` ({status Finished | TimeLimitExceeded | Error,
execution_time, return_code, stdout, stderr}), ``executor_pod_name`` and ``files``.

Where execrl differs, and why (all documented, none silent):
* Languages: those in execrl's registry (``python``, alias ``python3``, and ``cpp``) run. A name SandboxFusion does not know is a 422
  (as SandboxFusion's own schema validation does); a name SandboxFusion knows but execrl does not run
  (``go``, ``nodejs``, ...) answers ``status: SandboxError`` with a message listing what runs, which is what
  SandboxFusion returns when a runner is unavailable, and what verl counts as a sandbox fault (-1), not as
  a wrong answer.
* ``run_timeout`` becomes both the wall-clock and the CPU-time limit of the run; ``compile_timeout`` both
  limits of the compile step (``Limits.compile_timeout_s``).
* ``memory_limit_MB`` is a cgroup limit on the whole sandbox (SandboxFusion sets RLIMIT_AS); ``-1`` (or any
  value <= 0) means the server's default (``default_memory_mb``). Exceeding it shows as a failed run killed
  by SIGKILL (``return_code: -9``), SandboxFusion shows a ``MemoryError`` with return code 1.
* ``files`` must decode to UTF-8 text (execrl's work-directory files are text); ``null`` entries are
  skipped as SandboxFusion does. ``fetch_files`` must be empty: the sandbox's work directory is a private
  tmpfs that vanishes at teardown, so there is nothing to fetch (a non-empty list is a 422, never a silent
  empty answer).
* ``return_code`` of a process killed by signal ``n`` is ``-n`` (Python's subprocess convention, which
  SandboxFusion inherits). ``execution_time`` of a compile step is ``null``: execrl measures the execution
  as a whole.
"""

from __future__ import annotations

import base64
import binascii
import math
import signal
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, field_validator

from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.languages import get_language, list_languages
from execrl.sandbox.serialize import (
    FieldProblem,
    RequestFieldError,
    find_unencodable,
    problems_from_validation_error,
)
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, Limits, Verdict

__all__ = [
    "LANGUAGE_ALIASES",
    "SANDBOX_FUSION_LANGUAGES",
    "execrl_language",
    "RunCodeRequest",
    "UnsupportedLanguage",
    "parse_run_code",
    "run_code_response",
    "unsupported_language_response",
]

# Every value SandboxFusion's ``language`` field accepts (its ``Language`` literal).
SANDBOX_FUSION_LANGUAGES: tuple[str, ...] = (
    "python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript", "sql",
    "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest", "junit",
    "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket",
)  # fmt: skip
# Extra names accepted for execrl languages; any language in execrl's registry is accepted as itself.
LANGUAGE_ALIASES: dict[str, str] = {"python3": "python"}


def execrl_language(name: str) -> str | None:
    """The execrl language a ``/run_code`` language name runs as, or None if execrl does not run it."""
    resolved = LANGUAGE_ALIASES.get(name, name)
    return resolved if resolved in list_languages() else None


def _runnable() -> list[str]:
    return sorted([*list_languages(), *LANGUAGE_ALIASES])


class RunCodeRequest(BaseModel):
    """The ``/run_code`` body. Lax types and ignored extra keys, like SandboxFusion's FastAPI model."""

    code: str
    language: str
    run_timeout: float = 10.0
    compile_timeout: float = 10.0
    memory_limit_MB: int = -1
    stdin: str | None = None
    files: dict[str, str | None] = {}
    fetch_files: list[str] = []

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        if value not in SANDBOX_FUSION_LANGUAGES and execrl_language(value) is None:
            raise ValueError(f"unknown language {value!r}; execrl runs {_runnable()}")
        return value

    @field_validator("run_timeout", "compile_timeout")
    @classmethod
    def _finite_positive(cls, value: float) -> float:
        if not math.isfinite(value) or not 0 < value <= 3600:
            raise ValueError("must be a number of seconds in (0, 3600]")
        return value

    @field_validator("fetch_files")
    @classmethod
    def _no_fetch(cls, value: list[str]) -> list[str]:
        if value:
            raise ValueError(
                "fetch_files is not supported: execrl's work directory is a private tmpfs discarded at "
                "teardown; print what you need to stdout instead (send [])"
            )
        return value


class UnsupportedLanguage(InvalidRequestError):
    """A SandboxFusion language that execrl does not run (answered as ``status: SandboxError``)."""


def _decode_files(files: dict[str, str | None]) -> dict[str, str]:
    out: dict[str, str] = {}
    for path, encoded in files.items():
        if encoded is None:
            continue
        try:
            out[path] = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            raise RequestFieldError(
                [FieldProblem(f"files.{path}", f"must be base64 of UTF-8 text ({exc})")]
            ) from None
    return out


def _limits(body: RunCodeRequest, default_memory_mb: int, max_output_bytes: int) -> Limits:
    memory_mb = body.memory_limit_MB if body.memory_limit_MB > 0 else default_memory_mb
    output = min(Limits().max_output_bytes, max_output_bytes)
    try:
        return Limits(
            timeout_s=body.run_timeout,
            cpu_time_s=body.run_timeout,
            memory_mb=memory_mb,
            max_output_bytes=output,
            compile_timeout_s=body.compile_timeout,
        )
    except InvalidRequestError as exc:
        message = str(exc)
        field = (
            "memory_limit_MB"
            if "memory_mb" in message
            else "compile_timeout"
            if "compile_timeout" in message
            else "run_timeout"
        )
        raise RequestFieldError([FieldProblem(field, f"{exc} (-1 means the server default)")]) from None


def parse_run_code(
    data: Any, *, default_memory_mb: int, max_output_bytes: int = Limits().max_output_bytes
) -> ExecutionRequest:
    """Validate a ``/run_code`` body and build the plain-run ``ExecutionRequest``.

    The run's output limit is execrl's default (1 MiB per stream, as SandboxFusion reads) or the server's
    ``max_output_bytes`` if that is smaller: the request has no field for it.

    Raises ``RequestFieldError`` naming the field (HTTP 422), ``UnsupportedLanguage`` for a SandboxFusion
    language execrl does not run, ``InvalidRequestError`` for values the request dataclass rejects.
    """
    bad = find_unencodable(data)
    if bad is not None:
        raise RequestFieldError([FieldProblem(bad, "string is not valid Unicode (lone surrogate)")])
    try:
        body = RunCodeRequest.model_validate(data)
    except ValidationError as exc:
        raise RequestFieldError(problems_from_validation_error(exc)) from None
    language = execrl_language(body.language)
    if language is None:
        raise UnsupportedLanguage(
            f"language {body.language!r} is not supported by this execrl server; it runs {_runnable()}"
        )
    if not body.code.strip():
        raise RequestFieldError([FieldProblem("code", "is empty; pass the source code to run")])
    return ExecutionRequest(
        language=language,
        program=body.code,
        stdin=body.stdin or "",
        files=_decode_files(body.files),
        limits=_limits(body, default_memory_mb, max_output_bytes),
    )


def _command(
    status: Literal["Finished", "TimeLimitExceeded", "Error"],
    *,
    execution_time: float | None,
    return_code: int | None,
    stdout: str,
    stderr: str,
) -> dict[str, Any]:
    return {
        "status": status,
        "execution_time": execution_time,
        "return_code": return_code,
        "stdout": stdout,
        "stderr": stderr,
    }


def _response(status: str, message: str, compile_result: Any, run_result: Any) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "compile_result": compile_result,
        "run_result": run_result,
        "executor_pod_name": None,
        "files": {},
    }


def _return_code(result: ExecutionResult) -> int | None:
    if result.signal is not None:
        return -result.signal
    if result.verdict is Verdict.OUTPUT_LIMIT and result.exit_code is None:
        return -signal.SIGKILL  # the parent killed the whole sandbox, the program with it
    return result.exit_code


def _message(result: ExecutionResult, return_code: int | None, ok: bool, max_output_bytes: int | None) -> str:
    """Why a run failed when the run_result alone cannot say (SandboxFusion leaves it empty otherwise)."""
    if result.verdict is Verdict.OUTPUT_LIMIT:
        streams = [
            name
            for name, cut in (("stdout", result.stdout_truncated), ("stderr", result.stderr_truncated))
            if cut
        ]
        limit = f"{max_output_bytes} bytes" if max_output_bytes is not None else "the output limit"
        return (
            f"execrl verdict: output_limit: the program wrote more than {limit} to "
            f"{' and '.join(streams) or 'its output'}; what is shown is truncated there"
        )
    if return_code == 0 and not ok:  # e.g. exit code 0 but a protocol violation
        return f"execrl verdict: {result.verdict.value}"
    return ""


def run_code_response(
    result: ExecutionResult, language: str, *, max_output_bytes: int | None = None
) -> dict[str, Any]:
    """SandboxFusion's response for one plain run of ``language`` (an execrl language name).

    A run killed for its output is ``Failed`` with return code -9 (``-SIGKILL``, the subprocess
    convention SandboxFusion inherits for a killed process) and a message naming the stream and the limit
    (``max_output_bytes``, the request's, when given).
    """
    if result.verdict is Verdict.SANDBOX_ERROR:
        message = result.sandbox_error or "sandbox error"
        run = _command("Error", execution_time=None, return_code=None, stdout="", stderr=message)
        return _response("SandboxError", message, None, run)
    compile_result = None
    if get_language(language).mode == "binary":
        failed = result.verdict is Verdict.COMPILE_ERROR
        compile_result = _command(
            "Finished", execution_time=None, return_code=1 if failed else 0, stdout="",
            stderr=result.compile_output,
        )  # fmt: skip
        if failed:
            return _response("Failed", "", compile_result, None)
    timed_out = result.verdict is Verdict.TIME_LIMIT
    return_code = None if timed_out else _return_code(result)
    run = _command(
        "TimeLimitExceeded" if timed_out else "Finished",
        execution_time=result.wall_time_s,
        return_code=return_code,
        stdout=result.stdout,
        stderr=result.stderr,
    )
    ok = not timed_out and return_code == 0 and result.verdict is Verdict.PASSED
    message = _message(result, return_code, ok, max_output_bytes)
    return _response("Success" if ok else "Failed", message, compile_result, run)


def unsupported_language_response(exc: UnsupportedLanguage) -> dict[str, Any]:
    """What SandboxFusion answers when no runner exists for a language it knows."""
    run = _command("Error", execution_time=None, return_code=None, stdout="", stderr=str(exc))
    return _response("SandboxError", str(exc), None, run)
