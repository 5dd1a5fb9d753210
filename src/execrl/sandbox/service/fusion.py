"""SandboxFusion's ``POST /run_code`` schema on top of execrl's sandbox, so its clients work unchanged.

Field names and meanings follow SandboxFusion (bytedance/SandboxFusion, ``sandbox/server/sandbox_api.py``,
observed at commit 469de08) and what verl's client (``verl/utils/reward_score/sandbox_fusion/utils.py``)
sends and reads. Request: ``code``, ``language``, ``run_timeout``, ``compile_timeout``, ``memory_limit_MB``,
``stdin``, ``files`` (path -> base64), ``fetch_files``. Response: ``status`` (Success | Failed |
SandboxError), ``message``, ``compile_result``/``run_result`` ({status Finished | TimeLimitExceeded | Error,
execution_time, return_code, stdout, stderr}), ``executor_pod_name`` and ``files`` (path -> base64).

Languages (``SANDBOX_FUSION_NAMES``): SandboxFusion's ``python``, ``cpp``, ``nodejs``, ``go``, ``java``,
``rust``, ``bash``, ``typescript``, ``pytest``, ``go_test`` and ``junit`` run as execrl's languages of the
same names (``nodejs`` as ``javascript``); ``python3``, ``c``, ``javascript``, ``js`` and ``ts`` are
accepted too, and so is any name in execrl's registry (``typescript-transpile``...). A name SandboxFusion
does not know is a 422 (as its own schema validation does); a name it knows that execrl does not run here
(``php``, ``jest``, ``csharp``, ... or one of the languages above whose toolchain or runtime this server
lacks) answers ``status: SandboxError`` with a message listing what runs: what SandboxFusion returns when a
runner is unavailable, and what verl counts as a sandbox fault (-1), not as a wrong answer.

Where execrl differs, and why (all documented, none silent):
* ``python`` runs the server's ``run_code_python_runtime`` (``ServiceConfig``): by default ``python-data``
  (numpy, pandas, scipy, scikit-learn, pytest) when it is installed, as SandboxFusion's Python has numpy
  and HumanEval-X's harness imports it, else the standard library (the server says so when it starts).
  SandboxFusion's has 101 packages: a run that dies importing one of them that this server lacks is
  ``Failed`` with a ``message`` naming the package and the option (``_missing_package``), never a
  silent ``Failed`` that reads as the program's fault (nor a ``SandboxError``, which the program could
  choose by importing one).
* ``pytest``, ``go_test`` and ``junit`` run as execrl's languages of those names (SandboxFusion's
  test-runner modes: ``langs/scripts.py``, ``langs/native.py``, ``langs/jvm.py`` give the verdict
  rules: the runner's exit status, 0 when no test failed); ``jest`` is not run (SandboxFusion's jest
  runs TypeScript tests through babel, which Debian's jest package lacks): ``SandboxError``.
* ``typescript`` runs as ``typescript-transpile`` (types ignored, as SandboxFusion's ``tsx``) unless the
  server says ``--run-code-typescript check``; ``console.assert`` only prints, as on SandboxFusion,
  unless the server says ``--run-code-console-assert fail`` (the ``-asserts`` variants, ``langs/node.py``).
* ``run_result.execution_time`` is the run alone; the compile step's time is ``compile_result``'s.
* An empty ``code`` runs, as there (Python and Bash succeed, C++ fails to link).
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
  SandboxFusion inherits).
"""

from __future__ import annotations

import base64
import functools
import math
import re
import signal
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, field_validator

from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.langs.registry import get_language, list_languages
from execrl.sandbox.service.serialize import (
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
    "bash": "bash", "typescript": "typescript", "pytest": "pytest", "go_test": "go_test", "junit": "junit",
    "python3": "python", "c": "c", "javascript": "javascript", "js": "javascript", "ts": "typescript",
}  # fmt: skip
TypeScriptMode = Literal["transpile", "check"]
ConsoleAssert = Literal["log", "fail"]
PythonRuntime = str | None  # a runtime name, None (standard library) or "auto" (python-data if installed)
AUTO_RUNTIME = "auto"
# Import names of the packages SandboxFusion's Python runtime installs (runtime/python/requirements.txt
# at 469de08, and the common dependencies they pull in): a program that dies of ModuleNotFoundError for
# one of these is missing this server's package, not making its own mistake (``_missing_package``).
SANDBOX_FUSION_PYTHON_MODULES = frozenset(
    """
    tensorflow torch flask toml PyQt5 pytestqt pytest_mock django grpc grpc_tools nameko wtforms
    flask_limiter scipy rdkit coverage bs4 lxml shapely xlrd numba llvmlite absl cv2 PIL plotly kaleido
    requests requests_toolbelt openpyxl yolk xlsxwriter flask_restful skimage Cryptodome Crypto
    statsmodels patsy fastdtw kneed tree_sitter tree_sitter_languages git docker werkzeug gmpy2 pyscf
    berny redis pika pytest _pytest pymongo bson gridfs mongomock sklearn joblib threadpoolctl jsonlines
    faiss gql graphene flask_graphql graphql flask_sqlalchemy sqlalchemy flask_caching flask_testing
    flask_wtf xgboost gensim smart_open matplotlib mpl_toolkits pandasql psutil datasketch jwt uvloop
    antlr4 numpy pandas arch lightgbm catboost torchinfo torchsummary xarray pmdarima ruptures
    cryptography nltk regex pulp cvxpy docx PyPDF2 apscheduler colorama folium pydantic xlwt textblob
    fitz faker pyzbar pytest_cov astor jupyter jupyter_client IPython ipykernel seaborn tabulate yaml
    dateutil pytz six jinja2 markupsafe click itsdangerous sympy networkx tqdm h5py keras google attr
    attrs certifi urllib3 idna charset_normalizer packaging pyparsing cycler kiwisolver contourpy
    fontTools tenacity typing_extensions
    """.split()  # noqa: SIM905 - import names read best as text
)


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
    python_runtime: PythonRuntime = AUTO_RUNTIME,
    typescript: TypeScriptMode = "transpile",
    console_assert: ConsoleAssert = "log",
) -> ExecutionRequest:
    """Validate a ``/run_code`` body and build the plain-run ``ExecutionRequest``.

    The run's output limit is execrl's default (1 MiB per stream, as SandboxFusion reads) or the server's
    ``max_output_bytes`` if that is smaller: the request has no field for it. A Python program runs in
    ``python_runtime`` (``None``: the standard-library runtime; ``"auto"``: ``python-data`` when it is
    installed). SandboxFusion's ``typescript`` runs as ``typescript-transpile`` (its ``tsx`` checks no
    types) unless ``typescript="check"``; with ``console_assert="fail"`` JavaScript and TypeScript run
    as their ``-asserts`` variants (``langs/node.py``).

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
    if body.language in SANDBOX_FUSION_NAMES:
        language = _variant(language, typescript, console_assert)
    runtime = python_runtime_of(python_runtime) if get_language(language).mode == "python" else None
    _check_runnable(body.language, language, runtime)
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
        runtime=runtime,
        program_path=_java_path(body.code) if language == "junit" else None,
    )


def _variant(language: str, typescript: TypeScriptMode, console_assert: ConsoleAssert) -> str:
    """The execrl language a SandboxFusion JavaScript/TypeScript name runs as under the server's options."""
    if language == "typescript" and typescript == "transpile":
        language = "typescript-transpile"
    if language.startswith(("javascript", "typescript")) and console_assert == "fail":
        language = f"{language}-asserts"
    return language


@functools.cache
def _python_data_installed() -> bool:
    from execrl.sandbox.langs.runtimes import get_runtime

    return get_runtime("python-data").problem() is None


def python_runtime_of(name: PythonRuntime) -> str | None:
    """The runtime a server option names: ``"auto"`` is ``python-data`` when installed, else ``None``
    (the standard library); used by ``/run_code`` and ``/run_jupyter`` alike."""
    if name == AUTO_RUNTIME:
        return "python-data" if _python_data_installed() else None
    return name


def _check_runnable(requested: str, language: str, runtime: str | None) -> None:
    """A language whose toolchain or runtime this server lacks answers ``SandboxError`` (SandboxFusion's
    answer for a runner it does not have), naming what to install."""
    from execrl.sandbox.langs.runtimes import resolve_runtime

    execrl = get_language(language)
    try:
        execrl.check_available()
        resolve_runtime(language, runtime or execrl.runtime)
    except InvalidRequestError as exc:
        raise UnsupportedLanguage(f"language {requested!r} cannot run on this server: {exc}") from None


def _java_path(code: str) -> str:
    """Where SandboxFusion writes a ``junit`` program: ``<its public class>.java``, else ``Main.java``."""
    match = re.search(
        r"^\s*public\s+(?:(?:final|abstract)\s+)*class\s+([A-Za-z_$][\w$]*)", code, re.MULTILINE
    )
    return f"{match.group(1)}.java" if match else "Main.java"


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


def _run_time_s(result: ExecutionResult) -> float:
    """``run_result.execution_time``: the run alone, as SandboxFusion times its run command (the
    compile step has its own, ``compile_result.execution_time``). A run killed before the harness
    reported it (the whole sandbox stopped at the wall limit or for its output) has no time of its own:
    then the execution's time less the compile's."""
    if result.run_wall_time_s > 0:
        return result.run_wall_time_s
    return max(0.0, result.wall_time_s - result.compile_wall_time_s)


def _missing_package(result: ExecutionResult, language: str, runtime: str | None) -> str | None:
    """The message for a Python run that died importing a package SandboxFusion's runtime has and this
    server's lacks (``SANDBOX_FUSION_PYTHON_MODULES``), else None: the run stays ``Failed`` (the program
    did fail here), with ``message`` saying it is this server's gap and how to close it, never a silent
    ``Failed`` that reads as a wrong program. Not ``SandboxError``: the exception is the program's own
    report, and any program can import (or fake importing) such a package, so a ``SandboxError`` here
    would be a sandbox fault the candidate chooses, which a reward that masks sandbox faults would
    skip instead of scoring. A module SandboxFusion lacks too (a made-up import) gets no message."""
    if get_language(language).mode != "python" or result.error_type != "ModuleNotFoundError":
        return None
    match = re.match(r"No module named '([^'.]+)", result.error_message or "")
    if match is None or match.group(1) not in SANDBOX_FUSION_PYTHON_MODULES:
        return None
    where = f"runtime {runtime!r}" if runtime else "the standard-library runtime"
    hint = (
        "serve with --run-code-python-runtime python-data (numpy, pandas, scipy, scikit-learn, pytest)"
        if runtime is None
        else "SandboxFusion's Python runtime has it; this server's does not"
    )
    return f"module {match.group(1)!r} is not installed in this server's Python ({where}); {hint}"


def run_code_response(
    result: ExecutionResult, language: str, *, max_output_bytes: int | None = None, runtime: str | None = None
) -> dict[str, Any]:
    """SandboxFusion's response for one plain run of ``language`` (an execrl language name) in ``runtime``.

    A run killed for its output is ``Failed`` with return code -9 (``-SIGKILL``, the subprocess
    convention SandboxFusion inherits for a killed process) and a message naming the stream and the limit
    (``max_output_bytes``, the request's, when given). A Python run that could not import a package
    SandboxFusion's runtime has is ``Failed`` with a ``message`` naming the package (``_missing_package``).
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
        execution_time=_run_time_s(result),
        return_code=return_code,
        stdout=result.stdout,
        stderr=result.stderr,
    )
    ok = not timed_out and return_code == 0 and result.verdict is Verdict.PASSED
    message = _message(result, return_code, ok, max_output_bytes)
    missing = None if ok else _missing_package(result, language, runtime)
    if missing is not None:
        message = f"execrl: {missing}"
    return _response("Success" if ok else "Failed", message, compile_result, run, result)


def unsupported_language_response(exc: UnsupportedLanguage) -> dict[str, Any]:
    """What SandboxFusion answers when no runner exists for a language it knows."""
    run = _command("Error", execution_time=None, return_code=None, stdout="", stderr=str(exc))
    return _response("SandboxError", str(exc), None, run)
