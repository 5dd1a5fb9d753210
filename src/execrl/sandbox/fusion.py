"""SandboxFusion's ``POST /run_code`` schema on top of execrl's sandbox, so its clients work unchanged.

Field names and meanings follow SandboxFusion (bytedance/SandboxFusion, ``sandbox/server/sandbox_api.py``,
observed at commit 469de08) and what verl's client (``verl/utils/reward_score/sandbox_fusion/utils.py``)
sends and reads. Request: ``code``, ``language``, ``run_timeout``, ``compile_timeout``, ``memory_limit_MB``,
``stdin``, ``files`` (path -> base64), ``fetch_files``. Response: ``status`` (Success | Failed |
SandboxError), ``message``, ``compile_result``/``run_result`` ({status Finished | TimeLimitExceeded | Error,
execution_time, return_code, stdout, stderr}), ``executor_pod_name`` and ``files`` (path -> base64).

Languages (``SANDBOX_FUSION_NAMES``): SandboxFusion's ``python``, ``cpp``, ``nodejs``, ``go``, ``java``,
``rust``, ``bash`` and ``typescript`` run as execrl's ``python``, ``cpp``, ``javascript``, ``go``, ``java``,
``rust``, ``bash`` and ``typescript``; ``python3``, ``c``, ``javascript``, ``js`` and ``ts`` are accepted
too, and so is any name in execrl's registry. A name SandboxFusion does not know is a 422 (as its own
schema validation does); a name it knows that execrl does not run here (``php``, ``pytest``, ``go_test``,
``junit``, ``jest``, ... or one of the languages above whose toolchain this server lacks) answers
``status: SandboxError`` with a message listing what runs: what SandboxFusion returns when a runner is
unavailable, and what verl counts as a sandbox fault (-1), not as a wrong answer.

Where execrl differs, and why (all documented, none silent):
* ``python`` runs the server's ``run_code_python_runtime`` (``ServiceConfig``): the standard library only
  by default, the fast path; SandboxFusion's Python has 101 packages. Serve with
  ``--run-code-python-runtime python-data`` for numpy, pandas, scipy and scikit-learn.
* ``run_timeout`` becomes both the wall-clock and the CPU-time limit of the run; ``compile_timeout`` both
  limits of the compile step (``Limits.compile_timeout_s``). A compile that hits it answers
  ``compile_result.status: TimeLimitExceeded``, as SandboxFusion does.
* ``memory_limit_MB`` is a cgroup limit on the whole sandbox (SandboxFusion sets RLIMIT_AS); ``-1`` (or any
  value <= 0) means the server's default (``default_memory_mb``). Exceeding it shows as a failed run killed
  by SIGKILL (``return_code: -9``), SandboxFusion shows a ``MemoryError`` with return code 1.
* ``files``: any bytes (``null`` entries are skipped, as SandboxFusion does), under the request paths'
  rules (relative, no ``.``/``..``/empty component) and the work directory's size (``Limits.workdir_mb``).
* ``fetch_files``: returned only if a regular file of the work directory, reached without following a
  symbolic link (SandboxFusion follows links, so a program could make it return any host file it can
  read), of at most ``Limits.max_fetch_file_bytes`` (4 MiB) each and ``Limits.max_fetch_bytes`` (16 MiB)
  in all. A path not returned is left out of ``files`` as SandboxFusion leaves out a missing file, and
  ``message`` says why for each (SandboxFusion's message stays empty).
* ``return_code`` of a process killed by signal ``n`` is ``-n`` (Python's subprocess convention, which
  SandboxFusion inherits). ``args`` (pytest arguments) is not supported: SandboxFusion's ``pytest`` mode
  is not run here.
"""

from __future__ import annotations

import base64
import math
import signal
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, field_validator

from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.languages import get_language, list_languages
from execrl.sandbox.serialize import (
    FieldProblem,
    RequestFieldError,
    decode_base64_files,
    find_unencodable,
    problems_from_validation_error,
)
from execrl.sandbox.types import (
    ExecutionRequest,
    ExecutionResult,
    Limits,
    Verdict,
    fetch_path_problems,
    work_path_problems,
    workdir_space_problems,
)

__all__ = [
    "SANDBOX_FUSION_NAMES",
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
# ``/run_code`` name -> execrl language: SandboxFusion's names first, then extra names clients use. Any
# language in execrl's registry is also accepted as itself.
SANDBOX_FUSION_NAMES: dict[str, str] = {
    "python": "python", "cpp": "cpp", "nodejs": "javascript", "go": "go", "java": "java", "rust": "rust",
    "bash": "bash", "typescript": "typescript",
    "python3": "python", "c": "c", "javascript": "javascript", "js": "javascript", "ts": "typescript",
}  # fmt: skip


def execrl_language(name: str) -> str | None:
    """The execrl language a ``/run_code`` language name runs as, or None if execrl does not run it here."""
    resolved = SANDBOX_FUSION_NAMES.get(name, name)
    return resolved if resolved in list_languages() else None


def _runnable() -> list[str]:
    registered = set(list_languages())
    names = {name for name, language in SANDBOX_FUSION_NAMES.items() if language in registered}
    return sorted(names | registered)


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
        known = value in SANDBOX_FUSION_LANGUAGES or value in SANDBOX_FUSION_NAMES
        if not known and execrl_language(value) is None:
            raise ValueError(f"unknown language {value!r}; execrl runs {_runnable()}")
        return value

    @field_validator("run_timeout", "compile_timeout")
    @classmethod
    def _finite_positive(cls, value: float) -> float:
        if not math.isfinite(value) or not 0 < value <= 3600:
            raise ValueError("must be a number of seconds in (0, 3600]")
        return value


class UnsupportedLanguage(InvalidRequestError):
    """A SandboxFusion language that execrl does not run (answered as ``status: SandboxError``)."""


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
    data: Any,
    *,
    default_memory_mb: int,
    max_output_bytes: int = Limits().max_output_bytes,
    python_runtime: str | None = None,
) -> ExecutionRequest:
    """Validate a ``/run_code`` body and build the plain-run ``ExecutionRequest``.

    The run's output limit is execrl's default (1 MiB per stream, as SandboxFusion reads) or the server's
    ``max_output_bytes`` if that is smaller: the request has no field for it. A Python program runs in
    ``python_runtime`` (``None``: the standard-library runtime).

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
    limits = _limits(body, default_memory_mb, max_output_bytes)
    files: dict[str, str | bytes] = dict(decode_base64_files(body.files, "files"))
    problems = (
        work_path_problems(list(files), None)
        or workdir_space_problems(files, body.code, limits)
        or fetch_path_problems(body.fetch_files)
    )
    if problems:
        raise RequestFieldError([FieldProblem(name, problem) for name, problem in problems])
    return ExecutionRequest(
        language=language,
        program=body.code,
        stdin=body.stdin or "",
        files=files,
        limits=limits,
        fetch_files=tuple(body.fetch_files),
        runtime=python_runtime if language == "python" else None,
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


def _response(
    status: str, message: str, compile_result: Any, run_result: Any, result: ExecutionResult | None = None
) -> dict[str, Any]:
    """The response body; ``result``'s fetched files as base64, and why any others were not returned
    appended to ``message`` (SandboxFusion silently leaves a missing file out)."""
    files = {} if result is None else result.files
    errors = {} if result is None else result.file_errors
    if errors:
        why = "; ".join(f"{path!r} {reason}" for path, reason in errors.items())
        message = f"{message}; " if message else ""
        message += f"fetch_files not returned: {why}"
    return {
        "status": status,
        "message": message,
        "compile_result": compile_result,
        "run_result": run_result,
        "executor_pod_name": None,
        "files": {path: base64.b64encode(data).decode() for path, data in files.items()},
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
    if get_language(language).compile_argv:
        failed = result.verdict is Verdict.COMPILE_ERROR
        timed_out = failed and result.compile_timed_out
        compile_result = _command(
            "TimeLimitExceeded" if timed_out else "Finished",
            execution_time=result.compile_wall_time_s,
            return_code=None if timed_out else 1 if failed else 0,
            stdout="",
            stderr=result.compile_output,
        )
        if failed:
            return _response("Failed", "", compile_result, None, result)
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
    return _response("Success" if ok else "Failed", message, compile_result, run, result)


def unsupported_language_response(exc: UnsupportedLanguage) -> dict[str, Any]:
    """What SandboxFusion answers when no runner exists for a language it knows."""
    run = _command("Error", execution_time=None, return_code=None, stdout="", stderr=str(exc))
    return _response("SandboxError", str(exc), None, run)
