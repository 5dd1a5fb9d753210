"""Starting a compiler or compiled program from the harness with ``posix_spawn`` instead of fork + exec.

Why: ``os.fork`` of the harness copies its page tables, and until the child's ``execve`` every page the
Python of either process touches takes a copy-on-write fault. For a program that runs for a millisecond
that is most of the cost. Measured on this 2-core VM, quiet, 60 interleaved runs of ``bash main.sh``
printing ``hello`` from a small Python process: fork + ``execve`` 2.7 ms, ``posix_spawn`` 1.2 ms,
``subprocess.run`` 1.6 ms; with 50 MB of Python heap in the parent, fork grew to 6.1 ms and
``posix_spawn`` stayed at 1.5 ms. In the sandbox (``execrl bench sandbox --languages``, quiet, old and
new code back to back) bash's hello world went from 2.84x to 2.18x its plain ``subprocess`` time, its
MultiPL-E-sized problem from 1.81x to 1.52x, and C's worst from 1.18x to 1.10x. glibc implements
``posix_spawn`` with ``clone(CLONE_VM | CLONE_VFORK)`` (``clone3`` first; the deny list answers it ENOSYS
and glibc falls back), so the child shares the harness's memory until it execs and nothing is copied.

Only in the strict backend: there each sandbox has a uid of its own, so the RLIMIT_NPROC the harness
gives itself counts only the sandbox's processes. (The unisolated backend runs as the user, whose other
processes would count too, and keeps fork + exec.)

What the child cannot do here is run Python, so the trusted set-up of ``child.exec_program`` moves:

* descriptors: ``posix_spawn`` file actions ``dup2`` stdin (a memfd), stdout (the capture pipe), stderr
  (merged for compilers) and the call harness's record pipe onto 0-3; every other descriptor of the
  harness is close-on-exec (Python makes its descriptors non-inheritable, PEP 446; the harness marks
  its result pipe so, ``harness.main``), so the program holds the same four as after ``prelude``.
* session and signals: ``setsid``; SIGPIPE, SIGXFSZ and SIGXCPU back to their defaults (the harness
  ignores them); an empty signal mask. One difference from fork + exec, which glibc does not let us
  undo: its two internal signals (32 SIGCANCEL, 33 SIGSETXID) stay ignored in the program, as after
  any ``posix_spawn`` on glibc; every glibc program reinstalls both at start-up, and only processes of
  the same sandbox could send them (``tests/security/test_spawn_hazards.py`` pins the exact mask).
* rlimits: inherited from the harness, so the harness lowers its own first (``SelfLimits``) with the
  functions ``prelude`` calls in a forked child: NOFILE, FSIZE and NPROC once per job
  (``child.set_job_rlimits``), CPU (soft, hard) before each program (``child.cpu_rlimit``). Hard limits
  only go down, which is where this path stops: a program that needs a higher CPU limit than the harness
  already has (only possible for a compile step whose limit is below the run's, ``allows_compile``) and
  jobs with fewer than ``MIN_OPEN_FILES`` descriptors (the harness needs its own) keep fork + exec, and so
  does a job with a stdin larger than its file-size limit (``stdin_fits``: a memfd written after the
  harness lowered RLIMIT_FSIZE is held to it, and the compile step or the first run lowers it for good).
  The harness ignores SIGXCPU, so its own CPU time only matters at the hard limit, a second above the soft
  one; ``lower`` refuses when the harness has used more than the soft limit minus
  ``HARNESS_CPU_MARGIN_S``.

The Python language never comes here: its programs run in a fork of the harness's interpreter, which
is what makes them start without an interpreter start-up.
"""

from __future__ import annotations

import errno
import fcntl
import os
import resource
import signal

from execrl.sandbox.zygote import child

# Annotations only (the zygote stays lean, see ``child.py``).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MIN_OPEN_FILES = 16  # the harness's own descriptors (result pipe, capture and record pipes, pidfd, memfd)
HARNESS_CPU_MARGIN_S = 0.5
DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGXCPU)
# ``posix_spawn`` reports a failed ``execve`` as an exception in the harness; fork + exec turns the same
# failure into the program's exit status 127, which the harness keeps by forking instead.
EXEC_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.ENOEXEC, errno.ENOTDIR, errno.ELOOP, errno.EPERM})


class SelfLimits:
    """The harness's own rlimits, lowered to a candidate's before each ``posix_spawn``."""

    def __init__(self, limits: dict[str, Any]) -> None:
        self.limits = limits
        self.usable = int(limits["max_open_files"]) >= MIN_OPEN_FILES
        self.job_limits_set = False

    def allows_compile(self, compile_cpu_s: float, run_cpu_s: float) -> bool:
        """Whether a compile step may spawn: its CPU hard limit must not be below the run's (hard
        limits only go down, and the runs after it need theirs)."""
        return child.cpu_rlimit(compile_cpu_s)[1] >= child.cpu_rlimit(run_cpu_s)[1]

    def lower(self, cpu_left_s: float) -> bool:
        """Lower the harness's rlimits to what a program with ``cpu_left_s`` of CPU gets; False (nothing
        changed) when that is impossible, and the caller forks instead."""
        if not self.usable:
            return False
        soft, hard = child.cpu_rlimit(cpu_left_s)
        current_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        if current_hard != resource.RLIM_INFINITY and hard > current_hard:
            return False
        own = resource.getrusage(resource.RUSAGE_SELF)
        if own.ru_utime + own.ru_stime > soft - HARNESS_CPU_MARGIN_S:
            return False
        if not self.job_limits_set:
            child.set_job_rlimits(self.limits)
            signal.signal(signal.SIGXCPU, signal.SIG_IGN)
            self.job_limits_set = True
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        return True


def stdin_fits(texts: list[str], limit_bytes: int) -> bool:
    """Whether each of ``texts`` (the stdins a job feeds its programs) is at most ``limit_bytes`` once
    encoded. Only then may the harness ``posix_spawn``: ``SelfLimits.lower`` sets its own RLIMIT_FSIZE
    for good, and a stdin memfd written after that is held to it (EFBIG), so a job with a larger one
    forks every program instead, whose ``prelude`` writes the memfd before lowering. The bound ``4 *
    len`` (UTF-8's widest character) decides without encoding; only a text near the limit is encoded."""
    return all(
        4 * len(text) <= limit_bytes or len(text.encode("utf-8", "surrogatepass")) <= limit_bytes
        for text in texts
    )


def stdin_memfd(data: bytes) -> int:
    """A memfd holding ``data``, at offset 0, close-on-exec (only its dup onto 0 is inherited). Write it
    before ``SelfLimits.lower``: RLIMIT_FSIZE applies to memfds too, and a test's stdin may be larger
    than the files the program may write."""
    memfd = os.memfd_create("stdin")
    child.write_all(memfd, data)
    os.lseek(memfd, 0, os.SEEK_SET)
    return memfd


def spawn_program(
    argv: list[str],
    stdin_fd: int | None,
    stdout_fd: int | None,
    env: dict[str, str],
    extra_fds: dict[int, int] | None = None,
    merge_stderr: bool = False,
) -> int:
    """``posix_spawn`` ``argv`` in a new session; returns its pid. The descriptors and environment are
    those ``child.exec_program`` gives (see the module docstring); the rlimits are the harness's own,
    so ``SelfLimits.lower`` must have returned True just before. ``stdin_fd``: dup'ed onto 0 (a
    ``stdin_memfd``, written before the limits went down); ``None`` keeps the harness's ``/dev/null``;
    ``extra_fds``: target -> source, what the program holds besides 0-2
    (a call harness's record pipe on ``child.RECORD_FD``, a warm start's gate, ``warm.py``)."""
    actions: list[tuple[int, int, int]] = []
    opened: list[int] = []
    try:
        if stdin_fd is not None:
            actions.append((os.POSIX_SPAWN_DUP2, stdin_fd, 0))
        if stdout_fd is not None:
            actions.append((os.POSIX_SPAWN_DUP2, stdout_fd, 1))
            if merge_stderr:
                actions.append((os.POSIX_SPAWN_DUP2, stdout_fd, 2))
        for target, fd in (extra_fds or {}).items():
            # A descriptor already numbered ``target`` would be dup2'ed onto itself, which keeps its
            # close-on-exec flag on older C libraries: give it another number first.
            source = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            opened.append(source)
            actions.append((os.POSIX_SPAWN_DUP2, source, target))
        full_env = {**os.environ, **child.in_workdir(env)}
        return os.posix_spawn(
            argv[0],
            argv,
            full_env,
            file_actions=actions,
            setsid=True,
            setsigdef=DEFAULT_SIGNALS,
            setsigmask=(),
        )
    finally:
        for fd in opened:
            os.close(fd)
