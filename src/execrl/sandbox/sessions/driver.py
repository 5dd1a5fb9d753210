"""The parent's side of one session sandbox: its pipes, its pid 1, its cgroup slot, and one cell's loop.

The watchdog of a cell lives here, outside the sandbox: it writes the cell to the job pipe, drains
stdout, stderr and the result pipe continuously (the sandbox never blocks on a full pipe; output past
the limit is read and dropped), polls the slot's cgroup for CPU time, and on a limit interrupts the
cell (SIGINT to the session's pid 1 through its pidfd, which the pid 1 relays) and kills the whole
sandbox if the cell has not answered ``INTERRUPT_GRACE_S`` later. Everything read from the sandbox is
untrusted: records are parsed with bounds (``records.loads``), and a record that is not the answer to
this cell ends the session as a protocol violation, never an exception in the caller.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from execrl.sandbox.errors import SandboxFailure
from execrl.sandbox.host.cgroups import CgroupSlot, CgroupStats
from execrl.sandbox.host.workers import Worker
from execrl.sandbox.zygote import records

INTERRUPT_GRACE_S = 1.0  # a cell interrupted for a limit has this long to answer, then the session dies
CPU_POLL_S = 0.02
READY_TIMEOUT_S = 30.0
EXIT_REPORT_S = 5.0
RECORD_SLACK = 1 << 18  # a record line may exceed the output limit by this much (error text, JSON)
EOF_GRACE_S = 1.0  # the result pipe closed: pid 1 has this long to exit before the parent kills it


@dataclass
class CellBudget:
    """What one cell may use: its own limits and what is left of the session's."""

    timeout_s: float
    cpu_s: float
    max_output_bytes: int
    session_cpu_left_s: float
    end_of_life: float  # time.monotonic() when the session's lifetime ends


@dataclass
class Outcome:
    """What the parent saw of one cell (or of a fetch)."""

    record: dict[str, Any] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    stdout_over: bool = False
    stderr_over: bool = False
    limit: str | None = None  # the SessionLimits field that interrupted or ended the cell
    killed: str | None = None  # why the parent killed the sandbox ("protocol" or a limit's name)
    dead: bool = False  # the sandbox's pid 1 ended
    wall_s: float = 0.0
    cpu_s: float = 0.0
    cpu_total_s: float = 0.0  # the slot's count when it ended (the session's CPU so far)
    oom: bool = False


class Endpoint:
    """One session sandbox as the parent holds it. ``wait_status(timeout_s)``: the wait status of the
    sandbox's pid 1 once it ended (from the zygote, or from the template for a fork), ``None`` if
    unknown."""

    def __init__(
        self, worker: Worker, slot: CgroupSlot | None, wait_status: Callable[[float], int | None]
    ) -> None:
        self.worker = worker
        self.slot = slot
        self.wait_status = wait_status
        self.buffer = bytearray()
        self.res_open = True
        os.set_blocking(worker.job_w, False)

    # -- signals ---------------------------------------------------------------------------------------
    def interrupt(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self.worker.pidfd, signal.SIGINT)

    def kill(self) -> None:
        self.worker.kill()

    def ended(self) -> bool:
        return self.worker.pidfd < 0 or not self.worker.alive()

    def stats(self) -> CgroupStats:
        return self.slot.stats() if self.slot is not None else CgroupStats(0.0, 0.0, 0)

    # -- records ---------------------------------------------------------------------------------------
    def _lines(self, data: bytes, max_line: int) -> list[dict[str, Any]] | None:
        """Records in ``data`` (buffered across reads); ``None`` once a line is not a JSON object or is
        longer than ``max_line``."""
        self.buffer.extend(data)
        out = []
        while b"\n" in self.buffer:
            line, _, rest = bytes(self.buffer).partition(b"\n")
            self.buffer = bytearray(rest)
            ok, record = records.loads(line, 8)
            if not ok or not isinstance(record, dict) or not isinstance(record.get("kind"), str):
                return None
            out.append(record)
        return None if len(self.buffer) > max_line else out

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Block until the sandbox's interpreter answers ``ready``; ``SandboxFailure`` with its set-up
        error otherwise."""
        deadline = time.monotonic() + timeout_s
        poller = select.poll()
        poller.register(self.worker.res_r, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(int(left * 1000) + 1):
                raise SandboxFailure(f"the session sandbox did not start within {timeout_s:.0f} s")
            data = os.read(self.worker.res_r, 1 << 16)
            if not data:
                raise SandboxFailure("the session sandbox exited while starting")
            got = self._lines(data, 1 << 20)
            if got is None:
                raise SandboxFailure("the session sandbox wrote a malformed record while starting")
            for record in got:
                if record["kind"] == "setup_error":
                    raise SandboxFailure(f"the session sandbox failed to start: {record.get('message')}")
                if record["kind"] == "ready":
                    return

    # -- one exchange ----------------------------------------------------------------------------------
    def exchange(
        self, message: dict[str, Any], budget: CellBudget, done: Callable[[dict[str, Any]], str]
    ) -> Outcome:
        """Send ``message`` and collect until ``done(record)`` answers ``"done"`` for a record (``"more"``:
        keep it and go on; ``"bad"``: a protocol violation, which kills the sandbox), the sandbox dies, or
        a limit ends it. Never raises for what the sandbox does."""
        run = _Exchange(self, budget, done)
        return run.loop(json.dumps(message).encode() + b"\n")


class _Exchange:
    """The poll loop of one cell: pipes, watchdog, interrupts."""

    def __init__(self, endpoint: Endpoint, budget: CellBudget, done: Callable[[dict[str, Any]], str]) -> None:
        self.ep = endpoint
        self.budget = budget
        self.done = done
        self.out = Outcome()
        self.grace_until: float | None = None
        self.eof_at: float | None = None
        self.max_line = 2 * budget.max_output_bytes + RECORD_SLACK

    def loop(self, payload: bytes) -> Outcome:
        ep, worker = self.ep, self.ep.worker
        start = time.monotonic()
        before = ep.stats()
        pending = memoryview(payload)
        deadline = start + self.budget.timeout_s
        streams = {worker.out_r: self.out.stdout, worker.err_r: self.out.stderr}
        last_cpu = start
        while self.out.record is None and not self.out.dead:
            now = time.monotonic()
            if now - last_cpu >= CPU_POLL_S:
                last_cpu = now
                self._check_cpu(before)
            self._check_time(now, deadline)
            poller = select.poll()
            for fd in streams:
                poller.register(fd, select.POLLIN)
            poller.register(worker.pidfd, select.POLLIN)
            if ep.res_open:
                poller.register(worker.res_r, select.POLLIN)
            if pending:
                poller.register(worker.job_w, select.POLLOUT)
            next_event = self.grace_until if self.grace_until is not None else deadline
            wait_s = min(CPU_POLL_S, max(0.0, min(next_event, self.budget.end_of_life) - now))
            for fd, _ in poller.poll(int(wait_s * 1000) + 1):
                if fd == worker.job_w:
                    pending = self._write(pending)
                elif fd == worker.res_r:
                    self._result(os.read(fd, 1 << 16))
                elif fd == worker.pidfd:
                    self.out.dead = True
                else:
                    self._output(fd, streams[fd])
        self._drain(streams)
        if self.out.record is None and ep.res_open:  # it died: what it answered first is in the pipe
            self._drain_results()
        after = ep.stats()
        self.out.wall_s = time.monotonic() - start
        self.out.cpu_s = max(0.0, after.cpu_time_s - before.cpu_time_s)
        self.out.cpu_total_s = after.cpu_time_s
        self.out.oom = after.oom_kills > before.oom_kills
        return self.out

    def _write(self, pending: memoryview) -> memoryview:
        try:
            return pending[os.write(self.ep.worker.job_w, pending) :]
        except BlockingIOError:
            return pending
        except OSError:  # the interpreter is gone: the pidfd says so next
            return pending[len(pending) :]

    def _result(self, data: bytes) -> None:
        if not data:  # the interpreter died (pid 1 exits next) or closed its result pipe (killed soon)
            self.ep.res_open = False
            self.eof_at = time.monotonic()
            return
        got = self.ep._lines(data, self.max_line)
        if got is None:
            self._kill("protocol")
            return
        for record in got:
            answer = self.done(record)
            if answer == "bad":
                self._kill("protocol")
                return
            self.out.records.append(record)
            if answer == "done":
                self.out.record = record
                return

    def _output(self, fd: int, buffer: bytearray) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            return
        room = self.budget.max_output_bytes - len(buffer)
        buffer.extend(data[: max(0, room)])
        if len(data) > room:
            if buffer is self.out.stdout:
                self.out.stdout_over = True
            else:
                self.out.stderr_over = True
            self._interrupt("max_output_bytes")

    def _drain(self, streams: dict[int, bytearray]) -> None:
        """Read what the cell wrote before its record (already in the pipes) without waiting."""
        for fd, buffer in streams.items():
            os.set_blocking(fd, False)
            try:
                for _ in range(64):
                    data = os.read(fd, 1 << 16)
                    if not data:
                        break
                    room = self.budget.max_output_bytes - len(buffer)
                    buffer.extend(data[: max(0, room)])
                    if len(data) > room:
                        self.out.stdout_over |= buffer is self.out.stdout
                        self.out.stderr_over |= buffer is self.out.stderr
                        self.out.limit = self.out.limit or "max_output_bytes"
            except (BlockingIOError, OSError):
                pass
            finally:
                os.set_blocking(fd, True)

    def _drain_results(self) -> None:
        worker = self.ep.worker
        os.set_blocking(worker.res_r, False)
        try:
            while self.out.record is None and self.out.killed != "protocol":
                data = os.read(worker.res_r, 1 << 16)
                if not data:
                    self.ep.res_open = False
                    return
                self._result(data)
        except (BlockingIOError, OSError):
            pass
        finally:
            os.set_blocking(worker.res_r, True)

    def _check_cpu(self, before: CgroupStats) -> None:
        if self.ep.slot is None or self.out.killed is not None:
            return
        used = self.ep.slot.cpu_time_s() - before.cpu_time_s
        if used > self.budget.session_cpu_left_s:
            self._kill("cpu_time_s")
        elif used > self.budget.cpu_s:
            self._interrupt("cell_cpu_time_s")

    def _check_time(self, now: float, deadline: float) -> None:
        if self.out.killed is not None:
            return
        if now >= self.budget.end_of_life:
            self._kill("lifetime_s")
        elif self.eof_at is not None and now - self.eof_at >= EOF_GRACE_S:
            self._kill("protocol")
        elif self.grace_until is not None:
            if now >= self.grace_until:
                self._kill(self.out.limit or "cell_timeout_s")
        elif now >= deadline:
            self._interrupt("cell_timeout_s")

    def _interrupt(self, limit: str) -> None:
        if self.grace_until is None and self.out.killed is None:
            self.out.limit = limit
            self.grace_until = time.monotonic() + INTERRUPT_GRACE_S
            self.ep.interrupt()

    def _kill(self, reason: str) -> None:
        if self.out.killed is None:
            self.out.killed = reason
            if reason != "protocol":
                self.out.limit = reason
            self.ep.kill()
