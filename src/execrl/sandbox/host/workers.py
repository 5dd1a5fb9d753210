"""A parked or running worker as the parent holds it: its pid, pidfd, pipes and slot; how it ended.

Split from ``pool.py`` (which makes, hands out and reaps them): ``runner.py`` and the sessions' driver
use a ``Worker`` without needing the pool.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from dataclasses import dataclass, field

from execrl.sandbox.zygote import warm

WorkerKey = tuple[int, int]  # (workdir_mb, workdir_inodes)


@dataclass(frozen=True)
class WorkerExit:
    """How a worker's pid 1 ended: its wait status and the hard CPU rlimit it died with (seconds, None if
    unlimited), which the program may have lowered itself."""

    status: int
    cpu_hard_s: int | None


@dataclass
class Worker:
    token: int
    pid: int
    key: WorkerKey
    slot: int
    job_w: int
    res_r: int
    out_r: int
    err_r: int
    pidfd: int
    closed: bool = field(default=False)
    hint: bytes = field(default=warm.NO_HINT)  # the warm-start shape it committed to (``warm.py``)
    control: int = field(default=-1)  # a session template's control socket (``zygote/session_fork.py``)

    def alive(self) -> bool:
        """False once pid 1 of the worker has exited (its pidfd turns readable)."""
        return not _readable(self.pidfd, 0.0)

    def reported(self) -> bool:
        """True once pid 1 wrote its first record (ready, after any warm start parked; or why its
        set-up failed) or died."""
        return _readable(self.res_r, 0.0)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def close(self, keep_pidfd: bool = False) -> None:
        if not self.closed:
            self.closed = True
            for fd in (self.job_w, self.res_r, self.out_r, self.err_r, self.control):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        if not keep_pidfd and self.pidfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = -1

    def wait_dead(self, timeout_s: float) -> None:
        """Wait until pid 1 has exited: the kernel reaps the rest of its pid namespace before that
        (``zap_pid_ns_processes``), so the slot's cgroup is then (almost always) already empty."""
        if self.pidfd >= 0:
            _readable(self.pidfd, timeout_s)


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` turns readable (or hung up) within ``timeout_s``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(int(timeout_s * 1000)))
