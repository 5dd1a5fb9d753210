"""``Session`` and ``SessionTemplate``: persistent interpreters in the sandbox's jail, for tool calls.

    from execrl.sandbox import Sandbox, SessionLimits
    with Sandbox() as sandbox:
        with sandbox.open_session(limits=SessionLimits(cell_timeout_s=5)) as session:
            session.run("import math; r = 3")
            session.run("math.pi * r ** 2").value          # '28.274333882308138'
        template = sandbox.open_template(setup=["import json", "data = list(range(10**6))"])
        forks = template.fork(8)                             # each continues from the setup, isolated
        [fork.run("sum(data)").value for fork in forks]
        template.close()                                     # it lives on until its last fork closes

A ``Session`` runs untrusted cells (a model's); it never forks (``fork`` raises ``SessionForkError``:
a process that ran untrusted code may have replaced anything a fork would run, so isolation between
copies of it could not be guaranteed). A ``SessionTemplate`` runs *trusted* setup cells only (a task's
own code, run unprivileged on the host: what a malicious one can do is in its docstring) and forks into
sessions that are as isolated from each other as independent sandboxes. Both are thread-safe (one cell at a time)
and have async twins (``arun``, ``afork``). A cell's failure, limit or crash is a ``CellResult`` (the
table in ``types.py``), never an exception; only misuse (a closed session, a refused fork) and the
sandbox itself failing raise.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from execrl.sandbox.host.cgroups import CgroupSlot
from execrl.sandbox.host.pool import WorkerPool
from execrl.sandbox.sessions import driver
from execrl.sandbox.sessions.judge import ended_answer, judge_cell, refused_cell
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
    from execrl.sandbox.sessions.manager import SessionManager

__all__ = ["Session"]

IDLE_CPU_S = 0.002  # CPU a session may use between two cells before it is frozen between cells for good


class _SessionBase:
    """The cell loop, ending and closing, shared by sessions, templates and forks.

    Two locks: ``_lock`` is held for a whole cell (one cell at a time); ``_state`` only for a few field
    updates, so that ``stats`` and ``close`` never wait for a running cell (``close`` kills it).

    ``freezes``: work a cell leaves running computes only while a later cell runs (issue 35, class 6).
    The watchdog checks every ``WATCH_INTERVAL_S`` whether the session's cgroup used more than
    ``IDLE_CPU_S`` of CPU since its last cell ended; the first time it did, the cgroup is frozen, and
    from then on it is frozen whenever no cell runs (``_exchange`` thaws it for a cell and freezes it
    after). A session that leaves nothing running never pays the freeze (~0.2 ms a cell, measured); one
    that does gets one watchdog interval of it between two cells, charged to its ``cpu_time_s``. A
    template runs trusted setup only and must answer fork requests, so it is never frozen."""

    kind = "session"
    freezes = True

    def __init__(
        self, manager: SessionManager, pool: WorkerPool, endpoint: driver.Endpoint, limits: SessionLimits,
        *, cells_before: int = 0, end_of_life: float | None = None,
    ) -> None:  # fmt: skip
        self.id = uuid.uuid4().hex
        self.limits = limits
        self._manager = manager
        self._pool = pool
        self._endpoint = endpoint
        self._lock = threading.RLock()
        self._state = threading.Lock()
        self._index = cells_before  # cells numbered across a template and its forks
        self._cells = 0
        self._created = time.monotonic()
        self._last = self._created
        self._end_of_life = end_of_life if end_of_life is not None else self._created + limits.lifetime_s
        self._cpu_s = 0.0
        self._peak_mb = 0.0
        self._ending: CellResult | None = None  # how the session ended (answered to later cells)
        self._ended_at = 0.0
        self._closed = False
        self._released = False
        self._frozen = False
        self._always_freeze = False  # set once the watchdog found work left running between cells
        self._rest_cpu_s: float | None = self._cpu_used()  # its CPU when the last cell ended

    # -- public ----------------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._ending is None and not self._closed

    @property
    def holds_slot(self) -> bool:
        """Whether its sandbox slot is still taken (until it ended, or was closed and its forks too)."""
        return not self._released

    @property
    def cells_run(self) -> int:
        return self._cells

    def ended_for(self, now: float) -> float:
        """Seconds since the session ended (0 while it is alive)."""
        return now - self._ended_at if self._ending is not None else 0.0

    def stats(self) -> SessionStats:
        """What the parent sees now; never waits for a running cell (it is read on the HTTP service's
        event loop: issue 35, class 7)."""
        memory, cpu = 0.0, self._cpu_s
        with self._state:  # the slot is this session's while it is not released
            slot = self._endpoint.slot
            if slot is not None and not self._released:
                with contextlib.suppress(OSError):
                    memory = slot.memory_mb()
                    cpu = max(cpu, slot.cpu_time_s())
        now = time.monotonic()
        ended = "closed" if self._closed else (self._ending.message if self._ending else "")
        return SessionStats(
            self.id, self.kind, self.alive, self._cells, cpu, memory, self._peak_mb,
            now - self._created, now - self._last, ended,
        )  # fmt: skip

    def read_files(
        self, paths: Sequence[str], *, max_file_bytes: int = 4 << 20, max_bytes: int = 16 << 20
    ) -> tuple[dict[str, bytes], dict[str, str]]:
        """Files of the work directory, as ``fetch_files`` reads them (``workfiles``: regular files
        only, no link followed): ``(contents, why each other path was not returned)``."""
        with self._lock:
            self._check_open()
            if self._ending is not None:
                return {}, {path: f"the session ended: {self._ending.message}" for path in paths}
            wanted = list(paths)
            budget = driver.CellBudget(
                30.0, 30.0, 4 * max_bytes // 3 + 4096, self._cpu_left(), self._end_of_life
            )
            message = {
                "op": "fetch",
                "paths": wanted,
                "max_file_bytes": max_file_bytes,
                "max_bytes": max_bytes,
            }
            out = self._exchange(message, budget, _fetch_answer(wanted))
            self._account(out)
            self._check_open()
            if out.record is None:
                self._end_from(out, self._index)
                return {}, {path: "the session ended while reading it" for path in wanted}
            return _files_from(out.records)

    def close(self) -> None:
        """End the session: its processes are killed at once (a cell running in another thread ends,
        its ``run`` raises ``SessionClosedError``), its slot is freed. Idempotent."""
        with self._state:
            if self._closed:
                return
            self._closed = True
        self._kill()
        with self._lock:
            self._release()
        self._manager.forget(self)

    async def aclose(self) -> None:
        await self._manager.in_thread(self.close)

    def __enter__(self) -> _SessionBase:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the cell loop ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"{self.kind} {self.id} is closed")

    def _cpu_used(self) -> float:
        """The session's CPU so far: its cgroup's count since it opened, every process and the time
        between cells included (a cell's ``cpu_s`` counts only while it runs)."""
        slot = self._endpoint.slot
        if slot is not None and not self._released:
            with contextlib.suppress(OSError):
                self._cpu_s = max(self._cpu_s, slot.cpu_time_s())
        return self._cpu_s

    def _cpu_left(self) -> float:
        """What is left of ``cpu_time_s`` (as of the last cell or watchdog check: reading the cgroup's
        count costs ~25 us, and the watchdog reads it every 0.1 s between cells)."""
        return self.limits.cpu_time_s - self._cpu_s

    def _freezer(self) -> CgroupSlot | None:
        slot = self._endpoint.slot
        return slot if self.freezes and slot is not None and slot.can_freeze else None

    def _exchange(
        self, message: dict[str, Any], budget: driver.CellBudget, answer: Callable[[dict[str, Any]], str]
    ) -> driver.Outcome:
        """One exchange with the interpreter (the caller holds ``_lock``), its cgroup thawed for it; after
        it, frozen again if work was once found running between cells (the class docstring)."""
        slot = self._freezer()
        if slot is not None and self._frozen:
            slot.thaw()
            self._frozen = False
        self._rest_cpu_s = None
        out = self._endpoint.exchange(message, budget, answer)
        if slot is not None and not out.dead and out.killed is None and not self._closed:
            if self._always_freeze:  # (a dying session stays thawed: a frozen process cannot die)
                slot.freeze()
                self._frozen = True
            self._rest_cpu_s = out.cpu_total_s
        return out

    def _freeze_if_busy(self, cpu_s: float) -> None:
        """The watchdog's check while no cell runs (the class docstring); ``cpu_s``: the session's CPU."""
        slot = self._freezer()
        if slot is None or self._frozen or self._rest_cpu_s is None:
            return
        if cpu_s - self._rest_cpu_s > IDLE_CPU_S:
            slot.freeze()
            self._frozen = self._always_freeze = True

    def _run(self, code: str, timeout_s: float | None, cpu_time_s: float | None) -> CellResult:
        if not isinstance(code, str):
            raise SessionError(f"code must be a str, got {type(code).__name__}")
        with self._lock:
            self._check_open()
            index = self._index + 1
            if self._ending is not None:
                return ended_answer(self._ending, index)
            if self._cells >= self.limits.max_cells:
                self._end(
                    refused_cell(index, "max_cells", f"the session ran its {self.limits.max_cells} cells")
                )
                return self._ending  # type: ignore[return-value]
            self._index = index
            self._cells += 1
            budget = driver.CellBudget(
                timeout_s=min(timeout_s or self.limits.cell_timeout_s, self.limits.cell_timeout_s),
                cpu_s=min(cpu_time_s or self.limits.cell_cpu_time_s, self.limits.cell_cpu_time_s),
                max_output_bytes=self.limits.max_output_bytes,
                session_cpu_left_s=self._cpu_left(),
                end_of_life=self._end_of_life,
            )
            message = {"op": "cell", "i": index, "code": code, "max_repr": self.limits.max_output_bytes}
            out = self._exchange(message, budget, _cell_answer(index))
            self._account(out)
            if self._closed:
                raise SessionClosedError(f"{self.kind} {self.id} was closed while the cell ran")
            ended = out.dead or out.killed is not None
            status = self._endpoint.wait_status(driver.EXIT_REPORT_S) if ended else None
            result = judge_cell(out, index, status, self._exit_unknown())
            if not result.session_alive:
                self._end(result)
            self._last = time.monotonic()
            return result

    def _account(self, out: driver.Outcome) -> None:
        self._cpu_s = max(self._cpu_s + out.cpu_s, out.cpu_total_s)  # the slot's count: between cells too
        if self._endpoint.slot is not None:
            self._peak_mb = max(self._peak_mb, self._endpoint.slot.stats().peak_memory_mb)

    def _exit_unknown(self) -> str:
        """What an unknown exit status means for this kind (a fork's comes from its template)."""
        return "the sandbox's pid 1 ended without an exit status"

    def _end(self, result: CellResult) -> None:
        """The session ended (a cell's result says how): kill what is left and free the slot."""
        if self._ending is None:
            self._ending = result
            self._ended_at = time.monotonic()
        self._release()

    def _end_from(self, out: driver.Outcome, index: int) -> None:
        status = self._endpoint.wait_status(driver.EXIT_REPORT_S)
        self._end(judge_cell(out, index, status, self._exit_unknown()))

    def _kill(self) -> None:
        """Kill the session's sandbox now, from any thread (a running cell sees its pid 1 end)."""
        with self._state:
            if not self._released:
                with contextlib.suppress(OSError):
                    self._endpoint.kill()
                slot = self._freezer()
                if slot is not None:
                    slot.thaw()  # a frozen process dies only once it runs again (cgroup v1)

    def _release(self) -> None:
        if not self._released:
            self._kill()
            with self._state:
                self._released = True
            self._pool.release(self._endpoint.worker)

    # -- the manager's watchdog ------------------------------------------------------------------------
    def watch(self, now: float) -> None:
        """End the session if it died, ran past its lifetime, its CPU or its idle time while no cell
        runs (called by the manager's thread; a running cell enforces these itself)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._ending is not None or self._closed:
                return
            cpu_s = self._cpu_used()  # one read of the cgroup's count per check
            self._freeze_if_busy(cpu_s)
            index = self._index + 1
            if self._endpoint.ended():
                out = driver.Outcome(dead=True, oom=self._endpoint.stats().oom_kills > 0)
                self._end_from(out, self._index)
            elif now >= self._end_of_life:
                self._end(
                    refused_cell(
                        index,
                        "lifetime_s",
                        f"the session reached its lifetime ({self.limits.lifetime_s:g} s)",
                        Verdict.TIME_LIMIT,
                    )
                )
            elif self._idle_applies() and now - self._last >= self.limits.idle_timeout_s:
                self._end(
                    refused_cell(
                        index,
                        "idle_timeout_s",
                        f"the session was idle for {self.limits.idle_timeout_s:g} s",
                        Verdict.TIME_LIMIT,
                    )
                )
            elif cpu_s > self.limits.cpu_time_s:
                self._end(
                    refused_cell(
                        index,
                        "cpu_time_s",
                        f"the session used its {self.limits.cpu_time_s:g} s of CPU",
                        Verdict.TIME_LIMIT,
                    )
                )
        finally:
            self._lock.release()

    def _idle_applies(self) -> bool:
        return True


class Session(_SessionBase):
    """A persistent Python interpreter in the sandbox's jail, for untrusted cells (``Sandbox.open_session``
    or ``SessionTemplate.fork``). Globals, imports and files persist between cells."""

    def run(
        self, code: str, *, timeout_s: float | None = None, cpu_time_s: float | None = None
    ) -> CellResult:
        """Run one cell. ``timeout_s``/``cpu_time_s`` may lower this cell's limits (never raise them)."""
        return self._run(code, timeout_s, cpu_time_s)

    async def arun(
        self, code: str, *, timeout_s: float | None = None, cpu_time_s: float | None = None
    ) -> CellResult:
        return await self._manager.in_thread(self._run, code, timeout_s, cpu_time_s)

    def fork(self, n: int) -> list[Session]:
        """Always refused: a session that may have run untrusted cells cannot be copied with isolation
        the kernel still guarantees (its code, ``os.fork`` and every hook may have been replaced)."""
        raise SessionForkError(
            f"session {self.id} cannot fork: only a SessionTemplate (Sandbox.open_template), which runs "
            "trusted setup cells only, forks; run the shared setup there and fork it instead"
        )


def _cell_answer(index: int) -> Any:
    def answer(record: dict[str, Any]) -> str:
        return "done" if record.get("kind") == "cell" and record.get("i") == index else "bad"

    return answer


def _fetch_answer(paths: list[str]) -> Any:
    left = list(paths)

    def answer(record: dict[str, Any]) -> str:
        if record.get("kind") == "fetched" and not left:
            return "done"
        if record.get("kind") == "file" and left and record.get("path") == left[0]:
            left.pop(0)
            return "more"
        return "bad"

    return answer


def _files_from(records: list[dict[str, Any]]) -> tuple[dict[str, bytes], dict[str, str]]:
    files: dict[str, bytes] = {}
    errors: dict[str, str] = {}
    for record in records:
        if record.get("kind") != "file":
            continue
        path, data = str(record["path"]), record.get("data")
        if isinstance(data, str):
            try:
                files[path] = base64.b64decode(data, validate=True)
                continue
            except ValueError:
                errors[path] = "the session returned it garbled"
                continue
        errors[path] = str(record.get("error") or "not returned")[:500]
    return files, errors


def encode_files(files: Mapping[str, str | bytes]) -> dict[str, Any]:
    """A session's files as its ``open`` line carries them (text as is, bytes as base64)."""
    return {
        "files": {path: data for path, data in files.items() if isinstance(data, str)},
        "files_b64": {
            path: base64.b64encode(data).decode() for path, data in files.items() if isinstance(data, bytes)
        },
    }
