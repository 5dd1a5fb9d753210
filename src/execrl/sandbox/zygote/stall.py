"""Telling a blocked compiler from a slow one, from inside the sandbox: the CPU time its session gains.

Why: a source can make its compiler wait forever without using any CPU (``#include "/dev/stdout"`` opens
the compiler's own output pipe for reading), and the compile step's limit (30 s for C++, in CPU and in
wall-clock time) then cost a worker 30 s of wall time even when the request's own wall limit was 1 s.
A compiler that works uses CPU, even on a loaded host (a sixth of a core each with 12 busy processes on
2 cores), so the harness stops a compile whose session has gained no CPU time for the request's
``timeout_s`` (at least ``FLOOR_S``): the same ``compile_error`` the compile limit would have given,
sooner. How compile and run limits combine, then: the compile step has its own limit
(``Limits.compile_timeout_s`` or the language's), CPU and wall; it may wait without working for at most
the run's wall limit; the run that follows gets ``timeout_s``/``cpu_time_s`` afresh.

Read from the sandbox's own ``/proc`` (its pid namespace only): ``utime + stime + cutime + cstime`` of
every process of the compiler's session, in clock ticks; a child reaped by its parent moves its ticks to
the parent's ``cut``/``cst`` fields, so the sum only grows. Standard library only (the zygote stays lean).
"""

from __future__ import annotations

import os
import time

FLOOR_S = 1.0  # the shortest wait counted as blocked: the kernel accounts CPU in 10 ms ticks
POLL_S = 0.2


class StallWatch:
    """Whether the processes of ``session`` (a compiler's, which leads its own) gained no CPU tick for
    ``idle_s`` seconds (at least ``FLOOR_S``), reading ``/proc`` at most every ``POLL_S``."""

    def __init__(self, session: int, idle_s: float) -> None:
        self.session = session
        self.idle_s = max(FLOOR_S, idle_s)
        self.ticks = -1
        self.since = time.monotonic()
        self.checked = float("-inf")

    def stalled(self, now: float) -> bool:
        if now - self.checked < POLL_S:
            return False
        self.checked = now
        ticks = session_ticks(self.session)
        if ticks != self.ticks:
            self.ticks, self.since = ticks, now
            return False
        return now - self.since >= self.idle_s


def session_ticks(session: int) -> int:
    """CPU clock ticks used so far by the live processes of ``session`` and the children they reaped."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # gone already
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        fields = data.rsplit(b")", 1)[-1].split()  # after "pid (comm)": state ppid pgrp session ...
        if len(fields) > 14 and int(fields[3]) == session:
            total += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return total
