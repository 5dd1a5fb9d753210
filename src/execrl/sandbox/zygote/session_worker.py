"""Pid 1 of a session's sandbox (jail side): the session's init, and the start of its interpreter.

A session worker is built by the zygote like any worker (``jail.isolate_pid1``: fresh namespaces,
private tmpfs work directory, the slot's uid, no capabilities, ``no_new_privs``, not dumpable, the
seccomp deny list) but runs this module instead of the harness (``zygote._pid1``, role ``"session"``;
role ``"template"`` goes to ``session_fork.py``). It reads one ``open`` line from the job pipe (limits and
files), stacks Python's seccomp allow list, writes the files, lowers the session's rlimits and forks
the interpreter ``K`` (``kernel.serve``), which reads the cells from the job pipe itself. Pid 1 stays
the session's init:

* it holds none of the session's pipes (they are ``K``'s), so it never reads anything a cell wrote;
* it reaps every orphan a cell leaves behind (a pid namespace's orphans go to its pid 1), so zombies
  never pile up against the process limit;
* on SIGINT from the parent (a cell hit a limit) it stops ``K``, kills every other process of the
  session, and relays the interrupt to ``K`` as it lets it run again;
* when ``K`` ends it kills what is left and exits with ``K``'s status (``128 + n`` for a signal ``n``),
  which the zygote (or the template, for a fork) reports to the parent: how the interpreter died comes
  from outside the interpreter.

As pid 1 of its namespace it ignores every signal from inside it that it has no handler for (the
kernel's rule), so ``K`` cannot kill it; it is not dumpable and seccomp refuses ``ptrace`` and
``process_vm_*``, so ``K`` cannot reach its memory either.

Standard library only (the zygote imports this module).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import traceback

from execrl.sandbox.zygote import child, warm, workfiles
from execrl.sandbox.zygote import session_kernel as kernel

# Annotations only (the zygote stays lean, see ``child.py``).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from execrl.sandbox.zygote.jail import JailSpec

    TemplateMain = Callable[[JailSpec, kernel.Lines, dict[str, Any]], NoReturn]

JOB_FD, RESULT_FD, CONTROL_FD = (
    3,
    4,
    5,
)  # as ``zygote.JOB_FD``/``RESULT_FD``; the control socket of a template
SIGNAL_EXIT_BASE = 128  # pid 1 exits with 128 + n when the interpreter died of signal n


def encode_status(status: int) -> int:
    if os.WIFSIGNALED(status):
        return (SIGNAL_EXIT_BASE + os.WTERMSIG(status)) & 0xFF
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _visible_pids() -> list[int]:
    """Live (non-zombie) processes of this pid namespace other than pid 1."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            pids.append(int(name))
    return pids


def _reap_orphans(keep: int) -> None:
    """Reap finished children of pid 1 other than ``keep`` (whose status the main loop waits for)."""
    for pid in _visible_pids_and_zombies():
        if pid != keep:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def _visible_pids_and_zombies() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and name != "1"]


def kill_all_but(keep: int) -> None:
    """SIGKILL every process of the session but pid 1 and ``keep`` (a fork bomb converges: the killed
    ones fork no more, and the cgroup bounds how many there are)."""
    for _ in range(1000):
        others = [pid for pid in _visible_pids() if pid != keep]
        if not others:
            break
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _reap_orphans(keep)
    _reap_orphans(keep)


def _init(kernel_pid: int) -> NoReturn:
    """The rest of pid 1's life: reap, relay interrupts, and exit with the interpreter's status."""

    def interrupt(signum: int, frame: object) -> None:
        """Stop the interpreter (so that it starts nothing new), kill the rest, then interrupt it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(kernel_pid, signal.SIGSTOP)
            kill_all_but(kernel_pid)
            os.kill(kernel_pid, signal.SIGINT)  # delivered once it runs again
            os.kill(kernel_pid, signal.SIGCONT)

    signal.signal(signal.SIGINT, interrupt)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == kernel_pid:
            break
    for _ in range(1000):  # everything else dies with the interpreter
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    os._exit(encode_status(status))


def start_kernel(limits: dict[str, Any], reader: kernel.Lines, namespace: dict[str, Any]) -> NoReturn:
    """Lower the session's rlimits, fork the interpreter, and become its init. Shared by new sessions
    and forks of a template (``session_fork.py``), which arrive here already locked down."""
    child.set_job_rlimits(limits)
    resource.setrlimit(resource.RLIMIT_CPU, child.cpu_rlimit(float(limits["cpu_time_s"])))
    pid = os.fork()
    if pid == 0:
        try:
            kernel.serve(reader, RESULT_FD, namespace)
        finally:
            os._exit(70)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.closerange(JOB_FD, 1 << 16)
    _init(pid)


def write_files(opening: dict[str, Any]) -> None:
    """The session's files, into the work directory (the current directory), before any cell runs."""
    workfiles.write_inputs({"files": opening.get("files", {}), "files_b64": opening.get("files_b64", {})})


def _session(spec: JailSpec, reader: kernel.Lines, opening: dict[str, Any]) -> NoReturn:
    allow = spec.seccomp_filters.by_language.get("python")
    if allow is not None:
        allow.install()
    write_files(opening)
    start_kernel(opening["limits"], reader, kernel.new_namespace())


def main(spec: JailSpec, template_main: TemplateMain) -> NoReturn:
    """Entry from ``zygote._pid1`` for roles ``session`` and ``template``: read the warm-start hint every
    worker gets (always none here), then the ``open`` line, then become the session (or, through
    ``template_main``, ``session_fork.template_main``, the template: passed in by the zygote because
    ``session_fork`` imports this module)."""
    try:
        _, head = warm.read_hint(JOB_FD)
        reader = kernel.Lines(JOB_FD, head)
        line = reader.next()
        if line is None:
            os._exit(0)
        opening = json.loads(line)
        if spec.role == "template":
            template_main(spec, reader, opening)
        _session(spec, reader, opening)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the open
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
        with contextlib.suppress(OSError):
            kernel.send(RESULT_FD, {"kind": "setup_error", "message": text})
    finally:
        os._exit(1)
