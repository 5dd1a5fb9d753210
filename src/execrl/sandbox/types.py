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
    of ``timeout_s``/``cpu_time_s`` for the run; ``None`` takes the language's default (30 s for cpp).
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


TestCase = CodeTest | CallTest | IOTest


@dataclass(frozen=True)
class ExecutionRequest:
    """One program to run, with all its tests, in one fresh sandbox.

    ``files`` are written into the work directory first (relative paths, e.g. a small repository whose
    own test suite is run by ``CodeTest``s); ``program`` is then written to ``program_path``. With no
    tests the program simply runs once with ``stdin`` (a plain run, as SandboxFusion's ``/run_code``).
    """

    language: str
    program: str
    tests: tuple[TestCase, ...] = ()
    stdin: str = ""
    files: Mapping[str, str] = field(default_factory=dict)
    program_path: str | None = None  # default chosen by the language, e.g. "main.py" / "main.cpp"
    limits: Limits = field(default_factory=Limits)
    stop_on_first_failure: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.program, str) or not self.program.strip():
            raise InvalidRequestError("program is empty; pass the source code to run")
        names = [t.name for t in self.tests]
        if len(set(names)) != len(names):
            raise InvalidRequestError(f"test names must be unique, got {names}")
        for path in list(self.files) + ([self.program_path] if self.program_path else []):
            parts = path.split("/")
            if not path or path.startswith("/") or ".." in parts or "" in parts:
                raise InvalidRequestError(f"file path {path!r} must be relative, without '..' or '//'")


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
    cpu_time_s: float = 0.0
    wall_time_s: float = 0.0
    peak_memory_mb: float = 0.0
    sandbox_error: str | None = None  # why the sandbox (not the candidate) failed

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


def truncate(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes and append a marker saying how much was cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text, False
    head = data[:max_bytes].decode("utf-8", "ignore")
    return head + TRUNCATION_MARKER.format(n=len(data) - max_bytes), True
