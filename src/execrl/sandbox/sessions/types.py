"""Data of sandbox sessions: limits, a cell's result, errors (no I/O; frozen dataclasses).

What ends a cell, and whether the session survives it (the rule behind ``CellResult.session_alive``):

| what happened                                   | verdict         | ``limit``            | session |
|-------------------------------------------------|-----------------|----------------------|---------|
| the cell ran and raised nothing                 | passed          |                      | alive   |
| it raised (``SyntaxError``, ``SystemExit`` too) | runtime_error   |                      | alive   |
| wall time over ``cell_timeout_s``               | time_limit      | ``cell_timeout_s``   | alive if the interrupt ends the cell within 1 s, else killed |
| CPU time over ``cell_cpu_time_s``               | time_limit      | ``cell_cpu_time_s``  | as above |
| stdout or stderr over ``max_output_bytes``      | output_limit    | ``max_output_bytes`` | as above |
| the cgroup's OOM killer killed a process        | memory_limit    | ``memory_mb``        | ended if it was the interpreter, else alive |
| the interpreter died (``os._exit``, a signal)   | runtime_error   |                      | ended (``exit_code``/``signal`` say how) |
| the session's CPU over ``cpu_time_s``           | time_limit      | ``cpu_time_s``       | ended |
| the session older than ``lifetime_s``           | time_limit      | ``lifetime_s``       | ended |
| no cell for ``idle_timeout_s``                  | (next cell)     | ``idle_timeout_s``   | ended |
| the cell would be number ``max_cells + 1``      | runtime_error   | ``max_cells``        | ended, the cell does not run |
| the interpreter broke the record protocol       | runtime_error   |                      | ended |
| the sandbox itself failed                       | sandbox_error   |                      | ended |

"Interrupt": the session's pid 1 kills every process the session started but the interpreter, then the
interpreter gets ``KeyboardInterrupt``; a cell that ignores it is killed with its session. A cell on a
session that already ended does not run: it answers the ending's verdict and ``limit`` with
``session_alive=False``. Cells a process limit stops (``max_processes``: ``fork`` fails) or that fill
the work directory (``workdir_mb``: ``ENOSPC``) raise in the cell like any other error.

Between cells a session computes nothing: its cgroup is frozen from the end of one cell (or fetch) to
the start of the next, so threads and processes a cell leaves running wait, then run on during later
cells, where their CPU counts against that cell's ``cell_cpu_time_s`` (issue 35, class 6). A host whose
cgroups have no freezer (v1 without the ``freezer`` hierarchy) runs them between cells, and their CPU
still counts against the session's ``cpu_time_s``, checked every 0.1 s. Templates (trusted setup) are
never frozen.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.types import Verdict

__all__ = ["CellResult", "SessionClosedError", "SessionError", "SessionForkError", "SessionLimits"]


class SessionError(InvalidRequestError):
    """A session cannot do what it was asked (it is closed, or the rule refuses a fork)."""


class SessionClosedError(SessionError):
    """The caller closed this session (or its sandbox) before the call."""


class SessionForkError(SessionError):
    """A fork was refused: only a template that ran nothing but trusted setup cells forks."""


@dataclass(frozen=True)
class SessionLimits:
    """Limits of one session. Per cell: ``cell_timeout_s`` (wall clock, the parent's watchdog),
    ``cell_cpu_time_s`` (CPU of every process of the session while the cell runs, from its cgroup),
    ``max_output_bytes`` (each of stdout and stderr, and the repr of the last expression). Per session:
    ``memory_mb`` (cgroup memory, swap included), ``max_processes`` (processes and threads, the cgroup's
    ``pids.max``; the session's init and interpreter are not counted), ``workdir_mb``/``workdir_inodes``
    (its private tmpfs), ``max_file_mb`` (RLIMIT_FSIZE), ``max_open_files``, ``max_cells``,
    ``cpu_time_s`` (CPU of every process of the session since it opened, what ran between cells
    included), ``lifetime_s`` (from open), and
    ``idle_timeout_s`` (no cell running for this long ends it)."""

    cell_timeout_s: float = 30.0
    cell_cpu_time_s: float = 30.0
    max_output_bytes: int = 1 << 20
    memory_mb: int = 512
    max_processes: int = 32
    workdir_mb: int = 64
    workdir_inodes: int = 4096
    max_file_mb: int = 16
    max_open_files: int = 256
    max_cells: int = 1000
    cpu_time_s: float = 600.0
    lifetime_s: float = 3600.0
    idle_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        ranges: dict[str, tuple[float, float]] = {
            "cell_timeout_s": (0.01, 3600.0),
            "cell_cpu_time_s": (0.01, 3600.0),
            "max_output_bytes": (64, 1 << 30),
            "memory_mb": (16, 65536),
            "max_processes": (1, 4096),
            "workdir_mb": (1, 16384),
            "workdir_inodes": (16, 1 << 20),
            "max_file_mb": (1, 4096),
            "max_open_files": (16, 65536),
            "max_cells": (1, 1_000_000),
            "cpu_time_s": (0.01, 86400.0),
            "lifetime_s": (0.01, 86400.0),
            "idle_timeout_s": (0.01, 86400.0),
        }
        for name, (low, high) in ranges.items():
            value = getattr(self, name)
            integral = isinstance(SessionLimits.__dataclass_fields__[name].default, int)
            kinds = (int,) if integral else (int, float)
            if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
                kind = "an int" if integral else "a finite number"
                raise InvalidRequestError(f"limits.{name} must be {kind}, got {value!r}")
            if not low <= value <= high:
                raise InvalidRequestError(
                    f"limits.{name}={value!r} is out of range; set it in [{low}, {high}]"
                )

    def jail_limits(self) -> dict[str, Any]:
        """What the session's pid 1 applies itself (``worker.start_kernel``): the rlimits, and the
        session's CPU as RLIMIT_CPU of the interpreter (a backstop behind the cgroup's count)."""
        return {
            "cpu_time_s": self.cpu_time_s,
            "max_file_mb": self.max_file_mb,
            "max_open_files": self.max_open_files,
            "max_processes": self.max_processes,
        }


@dataclass(frozen=True)
class CellResult:
    """What one cell did. ``value``: the repr of the cell's last expression (``None`` when the cell ends
    with a statement, the value is ``None``, or it failed); ``error_type``/``error_message``/``traceback``:
    the exception, with traceback lines of the cells' own frames only (``kernel.cell_traceback``);
    ``wall_s`` from the parent, ``cpu_s`` from the session's cgroup (every process of the session);
    ``limit``: the ``SessionLimits`` field that ended the cell, if any; ``session_alive``: whether the
    session can run another cell (the table in this module's docstring); ``message``: what happened, in
    words, when it was not an ordinary cell; ``exit_code``/``signal``: how the interpreter ended, when
    it did. The texts come from the session's own interpreter and are untrusted, as any sandbox output."""

    verdict: Verdict
    index: int
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: tuple[str, ...] = ()
    wall_s: float = 0.0
    cpu_s: float = 0.0
    limit: str | None = None
    session_alive: bool = True
    message: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    exit_code: int | None = None
    signal: int | None = None

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        data["traceback"] = list(self.traceback)
        return data


@dataclass(frozen=True)
class SessionStats:
    """A session's state as the parent sees it (``Session.stats``)."""

    session_id: str
    kind: str  # "session", "template" or "fork"
    alive: bool
    cells: int
    cpu_s: float
    memory_mb: float
    peak_memory_mb: float
    age_s: float
    idle_s: float
    ended: str  # why it ended ("" while alive)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
