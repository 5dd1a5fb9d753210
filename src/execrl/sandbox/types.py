"""Data that crosses the sandbox boundary: requests, limits, tests and results.

Everything here is a frozen dataclass of plain values (no torch, no I/O) so that tasks, rewards, the HTTP
service and the CLI can build requests and read results without importing the isolation machinery.

A wrong answer, a timeout, a memory blow-up or a crash is a *result* with a verdict, never an exception.
Only the sandbox itself failing raises (see ``errors.py``); when that happens inside a batch the result
carries ``Verdict.SANDBOX_ERROR`` so that rewards can exclude it instead of scoring the candidate 0.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from execrl.sandbox.errors import InvalidRequestError

TRUNCATION_MARKER = "\n...[truncated {n} bytes]"


class Verdict(enum.StrEnum):
    """Outcome of one test, or of a whole execution (the worst test outcome, see ``overall_verdict``)."""

    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    COMPILE_ERROR = "compile_error"
    SANDBOX_ERROR = "sandbox_error"


# Order used to pick the overall verdict of a run from its tests: the first that occurs wins.
VERDICT_PRIORITY: tuple[Verdict, ...] = (
    Verdict.SANDBOX_ERROR,
    Verdict.COMPILE_ERROR,
    Verdict.MEMORY_LIMIT,
    Verdict.OUTPUT_LIMIT,
    Verdict.TIME_LIMIT,
    Verdict.RUNTIME_ERROR,
    Verdict.WRONG_ANSWER,
    Verdict.PASSED,
)

CompareMode = Literal["exact", "whitespace", "float"]


@dataclass(frozen=True)
class Limits:
    """Resource limits of one execution (all tests of one program share one sandbox).

    ``timeout_s`` is the wall-clock limit of the whole execution, enforced by a watchdog outside the
    sandbox; ``cpu_time_s`` is RLIMIT_CPU of the whole execution (CPU time is what rewards should depend
    on, wall time is load-dependent). ``memory_mb`` is a cgroup limit (not RLIMIT_AS, which breaks numpy).
    ``compile_timeout_s`` bounds a compiled language's compile step, in CPU and in wall-clock time, on top
    of ``timeout_s``/``cpu_time_s`` for the run; ``None`` takes the language's default (30 s for cpp). A
    compile that uses no CPU for ``timeout_s`` (at least 1 s; a compiler blocked on a read) is stopped
    then, a ``compile_error`` as at its limit (``stall.py``).
    ``max_fetch_file_bytes``/``max_fetch_bytes``: the most one file of ``ExecutionRequest.fetch_files``,
    and all of them together, may hold to be returned (a larger one is reported in
    ``ExecutionResult.file_errors``, never cut silently).
    """

    timeout_s: float = 10.0
    cpu_time_s: float = 10.0
    memory_mb: int = 512
    max_processes: int = 32
    max_output_bytes: int = 1 << 20  # per stream, and per test's captured stdout
    max_file_mb: int = 16  # RLIMIT_FSIZE
    max_open_files: int = 64
    workdir_mb: int = 64  # size of the private tmpfs work directory
    workdir_inodes: int = 4096
    compile_timeout_s: float | None = None
    max_fetch_file_bytes: int = 4 << 20
    max_fetch_bytes: int = 16 << 20

    def __post_init__(self) -> None:
        checks: list[tuple[str, float, float, float]] = [
            ("timeout_s", self.timeout_s, 0.01, 3600.0),
            ("cpu_time_s", self.cpu_time_s, 0.01, 3600.0),
            ("memory_mb", self.memory_mb, 16, 65536),
            ("max_processes", self.max_processes, 1, 4096),
            ("max_output_bytes", self.max_output_bytes, 64, 1 << 30),
            ("max_file_mb", self.max_file_mb, 1, 4096),
            ("max_open_files", self.max_open_files, 8, 65536),
            ("workdir_mb", self.workdir_mb, 1, 16384),
            ("workdir_inodes", self.workdir_inodes, 16, 1 << 20),
            ("max_fetch_file_bytes", self.max_fetch_file_bytes, 0, 1 << 30),
            ("max_fetch_bytes", self.max_fetch_bytes, 0, 1 << 30),
        ]
        if self.compile_timeout_s is not None:
            checks.append(("compile_timeout_s", self.compile_timeout_s, 0.01, 3600.0))
        for name, value, low, high in checks:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise InvalidRequestError(f"limits.{name} must be a finite number, got {value!r}")
            if not low <= value <= high:
                raise InvalidRequestError(
                    f"limits.{name}={value!r} is out of range; set it in [{low}, {high}]"
                )


@dataclass(frozen=True)
class CodeTest:
    """Python code run after the program, in the program's module namespace; passes if it raises nothing.

    HumanEval style: ``code`` is the task's ``test`` field followed by ``check(entry_point)``.
    """

    name: str
    code: str


@dataclass(frozen=True)
class CallTest:
    """Call ``entry_point(*args, **kwargs)`` and compare with ``expected`` (JSON values).

    Floats compare with ``rel_tol``/``abs_tol``; tuples and lists compare equal (JSON has no tuples).
    """

    name: str
    entry_point: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    expected: Any = None
    rel_tol: float = 1e-6
    abs_tol: float = 1e-9


@dataclass(frozen=True)
class IOTest:
    """Run the program as a main script with ``stdin`` and compare its stdout with ``expected_stdout``.

    ``exact``: byte-for-byte after decoding; ``whitespace``: tokens split on any whitespace;
    ``float``: like ``whitespace`` but numeric tokens compare with ``rel_tol``/``abs_tol``.
    """

    name: str
    stdin: str
    expected_stdout: str
    compare: CompareMode = "whitespace"
    rel_tol: float = 1e-6
    abs_tol: float = 1e-9


def check_tolerances(test_name: str, rel_tol: float, abs_tol: float) -> None:
    """Tolerances are finite numbers >= 0 (``math.isclose`` raises on a negative one and NaN accepts
    nothing): a bad value is the request's error, found before anything runs, not a crash while judging.

    Called by ``Sandbox``'s request validation, not by the dataclasses: the task schema builds tests from
    rows field by field and reports every bad field itself.
    """
    for name, value in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value < 0:
            raise InvalidRequestError(
                f"test {test_name!r}: {name} must be a finite number >= 0, got {value!r}"
            )


TestCase = CodeTest | CallTest | IOTest


@dataclass(frozen=True)
class ExecutionRequest:
    """One program to run, with all its tests, in one fresh sandbox.

    ``files`` are written into the work directory first (relative paths, e.g. a small repository whose
    own test suite is run by ``CodeTest``s; ``str`` is written as UTF-8, ``bytes`` as given);
    ``program`` is then written to ``program_path``. With no tests the program simply runs once with
    ``stdin`` (a plain run, as SandboxFusion's ``/run_code``); an empty program is then run as the
    language runs an empty source file (Python and Bash exit 0, C++ fails to link: SandboxFusion's
    behaviour), while with tests it is the caller's error.

    ``fetch_files``: work-directory paths read back after the run into ``ExecutionResult.files``
    (regular files only: a path that is missing, a symbolic link anywhere along it, or not a regular
    file is reported in ``ExecutionResult.file_errors`` instead, so a candidate cannot make the sandbox
    return a file from outside its work directory). ``runtime``: the interpreter environment of a
    Python program (``runtimes.py``): ``None`` is the language's default (``"python"``, the standard
    library only), ``"python-data"`` adds numpy, pandas, scipy and scikit-learn.
    """

    language: str
    program: str
    tests: tuple[TestCase, ...] = ()
    stdin: str = ""
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    program_path: str | None = None  # default chosen by the language, e.g. "main.py" / "main.cpp"
    limits: Limits = field(default_factory=Limits)
    stop_on_first_failure: bool = False
    fetch_files: tuple[str, ...] = ()
    runtime: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.program, str) or (self.tests and not self.program.strip()):
            raise InvalidRequestError("program is empty; pass the source code to run")
        names = [t.name for t in self.tests]
        if len(set(names)) != len(names):
            raise InvalidRequestError(f"test names must be unique, got {names}")
        problems = (
            work_path_problems(list(self.files), self.program_path)
            or workdir_space_problems(self.files, self.program, self.limits)
            or fetch_path_problems(self.fetch_files)
        )
        if problems:
            raise InvalidRequestError("; ".join(f"{field}: {message}" for field, message in problems))


MAX_PATH_PART_BYTES = 255  # NAME_MAX
MAX_PATH_BYTES = 4095  # PATH_MAX less the terminating NUL
MAX_PATH_DEPTH = 64  # directories above a file; deeper trees are not a program's inputs


def _path_problem(path: object) -> str | None:
    if not isinstance(path, str) or not path:
        return "must be a non-empty string"
    parts = path.split("/")
    if "\x00" in path:
        problem = "contains a NUL byte"
    elif path.startswith("/"):
        problem = "is absolute; give a path relative to the work directory"
    elif any(part in ("", ".", "..") for part in parts):
        problem = "has an empty, '.' or '..' component; write it as a/b/c"
    elif len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        problem = f"is longer than {MAX_PATH_BYTES} bytes"
    elif max(len(part.encode("utf-8", "surrogatepass")) for part in parts) > MAX_PATH_PART_BYTES:
        problem = f"has a component longer than {MAX_PATH_PART_BYTES} bytes"
    elif len(parts) > MAX_PATH_DEPTH + 1:
        problem = f"is nested {len(parts) - 1} directories deep; at most {MAX_PATH_DEPTH}"
    else:
        return None
    return f"{shown_path(path)} {problem}"


MAX_FETCH_FILES = 1024


def fetch_path_problems(paths: object) -> list[tuple[str, str]]:
    """``[("fetch_files", problem)]`` for a list of paths that cannot name files of the work directory:
    each must be relative, without '.', '..' or empty components (as ``files``), listed once, at most
    ``MAX_FETCH_FILES`` of them. Symbolic links are refused when the file is read (``workfiles.py``)."""
    if not isinstance(paths, tuple | list):
        return [("fetch_files", f"must be a list of paths, got {type(paths).__name__}")]
    if len(paths) > MAX_FETCH_FILES:
        return [("fetch_files", f"names {len(paths)} files; at most {MAX_FETCH_FILES}")]
    for path in paths:
        problem = _path_problem(path)
        if problem is not None:
            return [("fetch_files", problem)]
    if len(set(paths)) != len(paths):
        twice = next(p for p in paths if paths.count(p) > 1)
        return [("fetch_files", f"{shown_path(twice)} is listed twice")]
    return []


def shown_path(path: str) -> str:
    """``repr(path)``, shortened: an error message never echoes a 4 KiB name."""
    return repr(path) if len(path) <= 80 else f"{path[:60]!r}... ({len(path)} characters)"


def work_path_problems(files: list[str], program_path: str | None) -> list[tuple[str, str]]:
    """``(field, problem)`` for every path that cannot be written into the work directory as given.

    A path must be relative, without NUL, empty, '.' or '..' components, fit NAME_MAX per component and
    PATH_MAX in all; no file may also be a directory of another (``a`` and ``a/b``) and ``program_path``
    may not be one of ``files`` (the program would replace it). Checked here so that such a request is the
    caller's error, never a ``sandbox_error`` from inside the sandbox.
    """
    named = [("files", path) for path in files] + ([("program_path", program_path)] if program_path else [])
    problems = [(name, p) for name, path in named if (p := _path_problem(path)) is not None]
    if problems:
        return problems
    if program_path in files:
        shown = shown_path(program_path)
        return [("program_path", f"{shown} is also in files; the program would replace that file")]
    paths = {path for _, path in named}
    for name, path in named:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in paths:
                clash = "/".join(parts[:depth])
                return [
                    (name, f"{shown_path(path)} needs the directory {shown_path(clash)}, which is a file")
                ]
    return []


@dataclass(frozen=True)
class TestResult:
    """Outcome of one test. ``got``/``expected``/``input`` are filled for wrong answers (truncated)."""

    name: str
    verdict: Verdict
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    input: str | None = None
    expected: str | None = None
    got: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback_tail: str | None = None  # the last lines of the traceback


@dataclass(frozen=True)
class ExecutionResult:
    """Outcome of one ``ExecutionRequest``.

    ``verdict`` is ``passed`` only if the program ran and every test reported ``passed`` over the
    harness's private channel. ``limit_kind`` says which limit ended a ``time_limit`` ("cpu" or "wall").
    ``stdout``/``stderr`` are truncated to ``limits.max_output_bytes`` with ``TRUNCATION_MARKER``.
    Every path of the request's ``fetch_files`` is in exactly one of ``files`` (its bytes) and
    ``file_errors`` (why it was not returned: missing, a symbolic link, not a regular file, over a
    size limit, or the run ended before the harness could read it).
    """

    verdict: Verdict
    tests: tuple[TestResult, ...] = ()
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    exit_code: int | None = None
    signal: int | None = None
    limit_kind: Literal["cpu", "wall"] | None = None
    compile_output: str = ""
    compile_wall_time_s: float = 0.0
    compile_timed_out: bool = False  # the compile step hit its time limit (compile_timeout_s)
    cpu_time_s: float = 0.0
    wall_time_s: float = 0.0  # the whole execution: files, compile, run
    run_wall_time_s: float = 0.0  # a plain run's program alone, compile excluded (``/run_code``'s time)
    peak_memory_mb: float = 0.0
    sandbox_error: str | None = None  # why the sandbox (not the candidate) failed
    # A plain Python run's uncaught exception, as the program's own process reported it: untrusted,
    # for messages only (the verdict comes from the exit status).
    error_type: str | None = None
    error_message: str | None = None
    files: Mapping[str, bytes] = field(default_factory=dict)  # the request's fetch_files that were read
    file_errors: Mapping[str, str] = field(default_factory=dict)  # fetch_files not returned, and why

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED

    @property
    def tests_passed(self) -> int:
        return sum(t.verdict is Verdict.PASSED for t in self.tests)

    @property
    def pass_fraction(self) -> float:
        """Share of tests passed; 1.0/0.0 for a plain run by its verdict."""
        if not self.tests:
            return 1.0 if self.passed else 0.0
        return self.tests_passed / len(self.tests)

    @property
    def is_sandbox_error(self) -> bool:
        return self.verdict is Verdict.SANDBOX_ERROR


def overall_verdict(verdicts: list[Verdict]) -> Verdict:
    """The worst verdict by ``VERDICT_PRIORITY``; an empty list is ``passed``."""
    present = set(verdicts)
    for verdict in VERDICT_PRIORITY:
        if verdict in present:
            return verdict
    return Verdict.PASSED


def ellipsize(text: str, max_chars: int) -> str:
    """``text`` if it fits in ``max_chars`` characters, else its head ending in "..." (``max_chars`` in all):
    for one-line summaries a person reads, where ``truncate``'s byte count marker would be noise."""
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def truncate(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes and append a marker saying how much was cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text, False
    head = data[:max_bytes].decode("utf-8", "ignore")
    return head + TRUNCATION_MARKER.format(n=len(data) - max_bytes), True


TMPFS_PAGE_BYTES = 4096


def _size(text: str | bytes) -> int:
    return len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))


def workdir_space_problems(
    files: Mapping[str, str | bytes], program: str, limits: Limits
) -> list[tuple[str, str]]:
    """``[("files", problem)]`` if the files and the program cannot fit the work directory's tmpfs.

    Counts what the request itself writes: its bytes in whole pages against ``limits.workdir_mb`` and
    one inode per file, directory, the program and the root against ``limits.workdir_inodes``. A lower
    bound (compilers and the program write more), so that a request that can never fit is the caller's
    error, not a ``sandbox_error`` from the harness.
    """
    texts = [*files.values(), program]
    pages = sum(-(-_size(text) // TMPFS_PAGE_BYTES) for text in texts)
    need_kib, have_kib = pages * TMPFS_PAGE_BYTES // 1024, limits.workdir_mb * 1024
    if need_kib > have_kib:
        return [("files", f"need {need_kib} KiB of the work directory with the program ({have_kib} KiB); raise "
                          f"limits.workdir_mb (now {limits.workdir_mb}) or send less")]  # fmt: skip
    directories = {path.rsplit("/", 1)[0] for path in files if "/" in path}
    directories |= {d.rsplit("/", k)[0] for d in directories for k in range(1, d.count("/") + 1)}
    inodes = len(files) + len(directories) + 2  # + the program and the root directory
    if inodes > limits.workdir_inodes:
        return [("files", f"need {inodes} inodes (files, directories, the program, the root); raise "
                          f"limits.workdir_inodes (now {limits.workdir_inodes}) or send fewer files")]  # fmt: skip
    return []
