"""``SessionTemplate``: a session of trusted setup cells that forks into isolated sessions (the parent's
side; the jail's side is ``zygote/session_fork.py``, the rule and its reason are in ``execrl.sandbox``'s docstring).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from typing import Any

from execrl.sandbox.errors import SandboxFailure
from execrl.sandbox.sessions import driver
from execrl.sandbox.sessions.api import Session, _SessionBase
from execrl.sandbox.sessions.forks import PendingFork
from execrl.sandbox.sessions.types import CellResult, SessionError, SessionForkError, SessionLimits

__all__ = ["SessionTemplate"]

MAX_FORKS_PER_CALL = 64
FORK_REPLY_TIMEOUT_S = 30.0
FORK_WINDOW = 4  # fork requests sent before the first reply is read (``_fork``)


class _Fork(Session):
    """A session made by a template's fork: its exit status comes from the template."""

    kind = "fork"

    def __init__(self, template: SessionTemplate, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._template = template

    def _exit_unknown(self) -> str:
        return "the fork ended without an exit status (its template ended)"

    def _release(self) -> None:
        if not self._released:
            super()._release()
            self._template.fork_ended(self)


class SessionTemplate(_SessionBase):
    """A session whose cells are *trusted setup* (a task's code, never a model's), forkable into
    isolated sessions that share its state copy-on-write (``fork``). Setup cells run only before the
    first fork. Closing it while forks are alive keeps its sandbox until the last fork closes (a fork's
    pid namespace lies inside the template's, and their shared memory is charged to the template).
    Each fork also charges the kernel memory of its clone (page tables, its namespaces) to the
    template's cgroup, about 1.5 MB for a 100 MB template (``execrl bench sessions``): give the
    template's ``memory_mb`` that headroom per fork alive at once.

    Setup cells are trusted to be the task's, not to be harmless: the template runs unprivileged on
    the host (its slot's uid, in a user namespace of its own that maps no host uid 0, with the
    capabilities its forks' jails need only inside it, no effective one while setup runs, and a
    seccomp filter; ``zygote/session_userns.py``). A malicious setup cell can corrupt its own forks' initial state
    (and make them skip their isolation from each other: the fork path is code in its process), use
    those capabilities in namespaces of its own (mount a tmpfs, a proc, a view of its own cgroup slot;
    the kernel code behind that is reachable), and its slot's CPU, memory and processes. It cannot read
    or write host files outside the jail, mount a host disk, remount the system tree writable, write
    host cgroup files or ``/proc/sys``, become host uid 0, ``setns``, ``ptrace``, ``chroot``, open a
    socket other than ``AF_UNIX``, or see or signal any process outside its own pid namespace: not the
    host's, another template's or its forks, another session's or a run's
    (``tests/security/test_template_hazards.py``). Under the ``allow`` seccomp policy, setup cells run
    under the deny list's template variant (System V IPC and the rest of a setup's needs work, as
    before); the forks' cells get Python's allow list."""

    kind = "template"
    freezes = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        worker = self._endpoint.worker
        self._control = socket.socket(fileno=os.dup(worker.control))
        self._forks: set[_Fork] = set()
        self._forked = False
        self._statuses: dict[int, int] = {}
        self._replies: list[tuple[dict[str, Any], list[int]]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read_control, name="execrl-template", daemon=True)
        self._reader.start()

    def run_setup(
        self, code: str, *, timeout_s: float | None = None, cpu_time_s: float | None = None
    ) -> CellResult:
        """Run one trusted setup cell in the template (before any fork)."""
        if self._forked:
            raise SessionForkError(
                f"template {self.id} has forked; setup cells run only before the first fork"
            )
        return self._run(code, timeout_s, cpu_time_s)

    async def arun_setup(self, code: str, **kwargs: float | None) -> CellResult:
        return await self._manager.in_thread(lambda: self.run_setup(code, **kwargs))

    def fork(self, n: int, *, limits: SessionLimits | None = None) -> list[Session]:
        """``n`` sessions continuing from the template's state, each in a jail of its own (own pid,
        mount, ipc, uts and network namespaces, uid, cgroup slot and copy of the work directory), sharing
        the template's memory copy-on-write. ``limits``: the forks' (default: the template's); their
        lifetime ends with the template's. All or nothing: on failure no fork is left."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_FORKS_PER_CALL:
            raise SessionError(f"n={n!r}; fork 1 to {MAX_FORKS_PER_CALL} sessions at a time")
        limits = limits or self.limits
        with self._lock:
            self._check_open()
            if self._ending is not None:
                raise SessionForkError(f"template {self.id} has ended: {self._ending.message}")
            self._forked = True
            return self._fork(n, limits)

    async def afork(self, n: int, *, limits: SessionLimits | None = None) -> list[Session]:
        return await self._manager.in_thread(lambda: self.fork(n, limits=limits))

    def close(self) -> None:
        """No more forks; the sandbox ends now if no fork is alive (a running setup cell is killed),
        else when the last one ends."""
        with self._state:
            if self._closed:
                return
            self._closed = True
        if not self._forks:
            self._kill()
        with self._lock:
            released = not self._forks
            if released:
                self._release()
        if released:  # else it stays registered, holding its slot, until its last fork ends
            self._manager.forget(self)

    def _idle_applies(self) -> bool:
        return not self._forks

    # -- forking ---------------------------------------------------------------------------------------
    def _fork(self, n: int, limits: SessionLimits) -> list[Session]:
        pending: list[PendingFork] = []
        made = []
        # A few requests ahead of the replies, never more than the template's process limit allows: each
        # fork is born in the template's cgroup and counts there until the parent has moved it.
        window = max(1, min(FORK_WINDOW, self.limits.max_processes))
        try:
            for i in range(n):
                if i >= window:
                    made.append(pending[i - window].finish(self._reply))
                pending.append(PendingFork(self._pool, limits, i))
                pending[-1].send(self._control)
            made += [waiting.finish(self._reply) for waiting in pending[len(made) :]]
            endpoints = []
            for worker, nspid in made:
                endpoint = driver.Endpoint(worker, self._pool.slot(worker), self._status_of(nspid))
                endpoint.wait_ready()
                endpoints.append(endpoint)
        except BaseException:
            for waiting in pending:
                waiting.abandon(self._reply)
            raise
        forks = []
        for endpoint in endpoints:
            if endpoint.slot is not None:
                endpoint.slot.reset()
            fork = _Fork(self, self._manager, self._pool, endpoint, limits, cells_before=self._index,
                         end_of_life=min(time.monotonic() + limits.lifetime_s, self._end_of_life))  # fmt: skip
            self._forks.add(fork)
            forks.append(fork)
        self._manager.adopt(forks)
        return list(forks)

    def fork_ended(self, fork: _Fork) -> None:
        with self._lock:
            self._forks.discard(fork)
            released = self._closed and not self._forks and not self._released
            if released:
                self._release()
        if released:
            self._manager.forget(self)

    def _reply(self, timeout_s: float = FORK_REPLY_TIMEOUT_S) -> tuple[dict[str, Any], list[int]]:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    raise SandboxFailure("the template did not answer a fork request")
                self._cond.wait(min(left, 0.5))
            return self._replies.pop(0)

    def _status_of(self, nspid: int) -> Any:
        def wait_status(timeout_s: float) -> int | None:
            deadline = time.monotonic() + timeout_s
            with self._cond:
                while nspid not in self._statuses:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._reader.is_alive():
                        return None
                    self._cond.wait(min(left, 0.5))
                return self._statuses.pop(nspid)

        return wait_status

    def _read_control(self) -> None:
        """The template's reports: answers to fork requests (with a pidfd) and each fork's exit."""
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self._control, 1 << 16, 1)
            except OSError:
                message, fds = b"", []
            with self._cond:
                if not message:
                    self._cond.notify_all()
                    return
                reply = json.loads(message)
                if reply.get("op") == "exited":
                    self._statuses[int(reply["pid"])] = int(reply["status"])
                else:
                    self._replies.append((reply, fds))
                self._cond.notify_all()

    def _release(self) -> None:
        if not self._released:
            super()._release()
            with contextlib.suppress(OSError):
                self._control.close()
