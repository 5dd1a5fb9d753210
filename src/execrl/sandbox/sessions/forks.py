"""The parent's steps of one fork of a ``SessionTemplate`` (``template.py``; the jail's side is
``zygote/session_fork.py``): a slot and four pipes, the request to the template, the fork's pidfd back,
its move into the slot's cgroups.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
from collections.abc import Callable
from typing import Any

from execrl.sandbox.errors import SandboxFailure
from execrl.sandbox.host.pool import WorkerPool
from execrl.sandbox.host.workers import Worker
from execrl.sandbox.sessions.types import SessionLimits

__all__ = ["SLOT_TIMEOUT_S", "PendingFork"]

SLOT_TIMEOUT_S = 5.0  # how long opening a session, a template or a fork waits for a free slot


def _host_pid(pidfd: int) -> int:
    """The pid (in this process's pid namespace) of the process ``pidfd`` refers to."""
    with open(f"/proc/self/fdinfo/{pidfd}") as fh:
        for line in fh:
            if line.startswith("Pid:"):
                pid = int(line.split()[1])
                if pid > 0:
                    return pid
    raise SandboxFailure("the fork ended before the parent could move it into its cgroups")


class PendingFork:
    """The parent's part of one fork: a slot and four pipes, the request to the template (with the
    child's ends), then (``finish``) the fork's pidfd back, the move into the slot's cgroups and the
    ``go``. Requests for all forks of a call are sent before the first reply is read, so the template
    clones one while the parent moves the previous into its cgroups."""

    def __init__(self, pool: WorkerPool, limits: SessionLimits, index: int) -> None:
        self.pool = pool
        self.limits = limits
        self.index = index
        self.slot = pool.take_slot(SLOT_TIMEOUT_S)
        self.cgroup = pool.cgroups.slots[self.slot] if pool.cgroups is not None else None
        pipes = [os.pipe() for _ in range(4)]  # job, result, stdout, stderr
        self.ours = [pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]]
        self.theirs = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]]
        self.pidfd = -1
        self.sent = False
        self.answered = False
        self.worker: Worker | None = None

    def send(self, control: socket.socket) -> None:
        limits = self.limits
        if self.cgroup is not None:
            self.cgroup.set_limits(memory_mb=limits.memory_mb, max_processes=limits.max_processes + 2)
        child = {
            "uid": self.pool.uid_base + self.slot, "slot": self.slot, "workdir_mb": limits.workdir_mb,
            "workdir_inodes": limits.workdir_inodes, "limits": limits.jail_limits(),
        }  # fmt: skip
        message = json.dumps({"op": "fork", "i": self.index, "child": child}).encode()
        socket.send_fds(control, [message], self.theirs)
        self.sent = True
        self._close(self.theirs)
        self.theirs = []

    def finish(self, reply: Callable[[], tuple[dict[str, Any], list[int]]]) -> tuple[Worker, int]:
        """Returns the fork as a ``Worker`` (for ``pool.release``) and its pid in the template's
        namespace (the key of its exit status)."""
        answer, fds = reply()
        self.answered = True
        if answer.get("op") != "forked" or len(fds) != 1:
            self._close(fds)
            raise SandboxFailure(f"the template could not fork: {answer.get('error', answer)}")
        self.pidfd = fds[0]
        try:
            host_pid = _host_pid(self.pidfd)
            if self.cgroup is not None:
                self.cgroup.attach(host_pid)
            os.write(self.ours[0], b"go\n")
        except OSError as exc:
            raise SandboxFailure(f"the fork ended before it was moved into its cgroups: {exc}") from exc
        key = (self.limits.workdir_mb, self.limits.workdir_inodes)
        job_w, res_r, out_r, err_r = self.ours
        self.worker = Worker(0, host_pid, key, self.slot, job_w, res_r, out_r, err_r, self.pidfd)
        return self.worker, int(answer["pid"])

    def abandon(self, reply: Callable[[float], tuple[dict[str, Any], list[int]]]) -> None:
        """Undo: kill the fork if it exists (by its pidfd: it may still be in the template's cgroup),
        close the pipes and give the slot back. A request sent but not answered yet has its answer read
        here, so that the next fork call never reads a stale one."""
        if self.worker is not None:
            self.pool.release(self.worker)
            return
        if self.sent and not self.answered:
            with contextlib.suppress(SandboxFailure):
                _, fds = reply(5.0)
                self.pidfd = fds[0] if fds else -1
                self._close(fds[1:])
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        self._close([*self.ours, *self.theirs, *([self.pidfd] if self.pidfd >= 0 else [])])
        self.pool.return_slot(self.slot)

    @staticmethod
    def _close(fds: list[int]) -> None:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
