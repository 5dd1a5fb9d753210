"""The zygote: a small, single-threaded fork server that pre-builds isolated workers.

Why a separate process: the parent (trainer, asyncio service) is large and threaded; forking it is slow
(fork cost grows with RSS: a 2 GB parent takes ~35 ms) and unsafe (locks held by other threads). The
zygote is spawned once with ``python -S -s -P -B`` and an environment we build from scratch (``jail.ENV``;
not ``-I``, whose ``-E`` would ignore ``PYTHONHASHSEED=0``), imports only the standard-library modules
the jail and harness need plus the few that candidates import most (``PRELOADED_MODULES``; no
site-packages, no torch: ~14 MB resident), and never starts a thread. Each worker is one raw ``clone`` straight into its new namespaces
(``linux.clone_process``), built while no request waits for it.

Protocol over a ``SOCK_SEQPACKET`` Unix socket pair (one message per datagram):

* parent -> zygote: ``{"op": "spawn", "token": int, "spec": {...JailSpec fields...}}``;
* zygote -> parent: ``{"token": int, "pid": int, "slot": int}`` plus five descriptors by ``SCM_RIGHTS``:
  the job pipe (write end), the result pipe, stdout and stderr (read ends) and a pidfd of the worker's
  pid 1, which the parent polls for exit and signals without pid-reuse races (a session template,
  ``spec.role == "template"``, sends a sixth: its control socket, ``zygote/session_fork.py``). On failure:
  ``{"token", "error"}``.
* zygote -> parent, when a worker's pid 1 has been reaped: ``{"exited": pid, "status": wait status,
  "cpu_hard_s": its hard CPU rlimit at death or null}``.

Then the parent talks to the worker itself: once it is in its cgroups, one warm-start hint line on the
job pipe (``warm.py``); the worker answers ``ready`` on the result pipe (after parking a pre-started
runtime, if hinted); later the job follows the hint on the job pipe, and the records come back.

The zygote is a child subreaper, so it reaps every finished sandbox; it exits when the parent closes
the socket (end of file), and parked workers exit when their job pipe closes, so nothing outlives the
parent.
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import select
import signal
import socket
import sys
import traceback

from execrl.sandbox.zygote import child, harness, jail, linux, seccomp, session_fork, session_worker
from execrl.sandbox.zygote import session_userns as template_userns

# Annotations only: importing ``typing`` would add ~2 MB to the zygote, and to every fork of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn


# Imported once here so that a candidate's ``import`` is a dictionary look-up: nearly every generated
# program starts with ``from typing import List`` (21 of HumanEval's 164 prompts, most LLM answers), and
# importing ``typing`` afresh in each sandbox wrote ~500 pages (each one a page fault) and cost ~1 ms of
# CPU per execution; keeping it in the zygote costs each fork only its page-table entries. Not ``random``
# (its at-fork reseeding would not run after ``linux.clone_process``, so every sandbox would draw the
# same numbers) and nothing that starts threads or loads big shared libraries (``hashlib``).
PRELOADED_MODULES = (
    "typing",
    "math",
    "string",
    "collections",
    "heapq",
    "bisect",
    "itertools",
    "functools",
    "re",
    "copy",
)
# Slots beyond this many get a fresh network namespace per worker instead (each kept namespace holds some
# kernel memory, and making it costs ~1 ms at start).
MAX_SLOT_NETNS = 256
JOB_FD, RESULT_FD = 3, 4
CONTROL_FD = 5  # a session template's control socket (``zygote/session_fork.py``)
WORKER_FDS = 5  # job, result, stdout, stderr, pidfd (+ the control socket of a session template)


_live_workers: dict[int, int] = {}  # pid 1 of every sandbox built and not reaped yet -> its pidfd
_netns_fds: list[int] = []  # the network namespace of each slot (``jail.make_network_namespaces``)
_host_proc: list[int] = []  # the host's /proc, opened before the pivot (``_cpu_hard_limit``)
# Encoded once: every object a worker touches first is a copy-on-write page fault (~3 us each here).
_READY = {w: (json.dumps({"kind": "ready", "workdir": w}) + "\n").encode() for w in (jail.WORKDIR, "")}


def _reap(sock: socket.socket | None, block: bool = False) -> None:
    """Reap finished processes; for a worker's pid 1, tell the parent how it ended (``exited``): when the
    candidate runs in pid 1 itself (``testgroups.runs_inline``) this is the only trustworthy account. It
    includes the hard CPU rlimit pid 1 died with (read from the zombie before reaping it): a program
    can lower its own hard limit, even to 0, and be SIGKILLed by the kernel at once, which must read as
    the program's doing, not as a kill from outside (``runner.Driver._inline_death``)."""
    flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, flags)
        except ChildProcessError:
            return
        if info is None:
            return
        pid = info.si_pid
        killed = info.si_code == os.CLD_KILLED and info.si_status == signal.SIGKILL
        cpu_hard_s = _cpu_hard_limit(pid) if killed and pid in _live_workers else None
        _, status = os.waitpid(pid, 0)
        pidfd = _live_workers.pop(pid, -1)
        if pidfd < 0:
            continue
        os.close(pidfd)
        if sock is not None:
            try:
                sock.send(json.dumps({"exited": pid, "status": status, "cpu_hard_s": cpu_hard_s}).encode())
            except OSError:
                sock = None


def _cpu_hard_limit(pid: int) -> int | None:
    """RLIMIT_CPU's hard value of a zombie child, in seconds (``None``: unlimited or unreadable), from its
    ``limits`` file in the host's ``/proc`` (kept open from before the pivot; ``prlimit`` on another uid's
    process needs CAP_SYS_RESOURCE, which containers drop)."""
    try:
        fd = os.open(f"{pid}/limits", os.O_RDONLY | os.O_CLOEXEC, dir_fd=_host_proc[0])
    except (OSError, IndexError):
        return None
    try:
        text = os.read(fd, 1 << 13)
    finally:
        os.close(fd)
    for line in text.splitlines():
        if line.startswith(b"Max cpu time"):
            hard = line.split()[4]  # Max cpu time <soft> <hard> seconds
            return int(hard) if hard.isdigit() else None
    return None


def _shutdown() -> NoReturn:
    """Kill every sandbox still alive (parked or running) and reap them all before exiting."""
    for pid in list(_live_workers):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            os.close(_live_workers.pop(pid))
    _reap(None, block=True)
    os._exit(0)


def _pid1(spec: jail.JailSpec, job_r: int, res_w: int, out_w: int, err_w: int, control: int = -1) -> NoReturn:
    """The worker's pid 1: move the pipes to fixed numbers (which closes every other descriptor of the
    zygote, the namespace descriptors too), isolate, then become the harness (or a session,
    ``zygote/session_worker.py``, for a worker spawned with another ``role``)."""
    try:
        ends = (job_r, res_w, out_w, err_w, *([control] if control >= 0 else []))
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in ends]
        os.dup2(high[2], 1)
        os.dup2(high[3], 2)
        os.dup2(high[0], JOB_FD)
        os.dup2(high[1], RESULT_FD)
        if control >= 0:
            os.dup2(high[4], CONTROL_FD)
        os.closerange(RESULT_FD + 1 + (control >= 0), 1 << 16)
        try:
            workdir = jail.isolate_pid1(spec) if spec.isolate else jail.isolate_unisolated(spec)
            if spec.isolate and spec.role == "template":
                template_userns.lock_down(spec)
        except BaseException as exc:  # noqa: BLE001 - any set-up failure is reported as a sandbox error
            message = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
            os.write(RESULT_FD, (json.dumps({"kind": "setup_error", "message": message}) + "\n").encode())
            os._exit(1)
        if spec.role != "run":
            session_worker.main(spec, session_fork.template_main)
        harness.main(RESULT_FD, JOB_FD, spec.isolate, spec.seccomp_filters.by_language, _READY[workdir])
    finally:
        os._exit(1)


def spawn(sock: socket.socket, command: dict[str, Any], filters: seccomp.Filters) -> None:
    spec = jail.JailSpec(seccomp_filters=filters, **command["spec"])
    job_r, job_w = os.pipe()
    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    parent_ends = [job_w, res_r, out_r, err_r]
    control = -1
    if spec.role == "template":  # the parent passes it each fork's pipes (``zygote/session_fork.py``)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent_ends.append(ours.detach())
        control = theirs.detach()
    reply: dict[str, Any] = {"token": command["token"]}
    ready = -1
    try:
        flags = jail.CLONE_FLAGS_OWN_NET
        if spec.isolate and spec.slot < len(_netns_fds):
            # The zygote itself steps into the slot's network namespace and the worker inherits it: one
            # system call here, where it touches no fresh pages, instead of one in the worker.
            linux.setns(_netns_fds[spec.slot], linux.CLONE_NEWNET)
            flags = jail.CLONE_FLAGS
        if spec.isolate and spec.role == "template":  # its own user namespace (``zygote/session_userns.py``)
            template_userns.prepare_filter()
            pid, ready = template_userns.clone(flags, _host_proc[0], tuple(command["uids"]))
        else:
            pid = linux.clone_process(flags) if spec.isolate else os.fork()
    except OSError as exc:
        pid = -1
        reply["error"] = f"could not create the worker: {exc}"
    if pid == 0:
        try:
            for fd in (sock.fileno(), *parent_ends):
                os.close(fd)
            if ready >= 0:
                template_userns.become(ready, spec.uid)
            _pid1(spec, job_r, res_w, out_w, err_w, control)
        finally:
            os._exit(1)
    for fd in (job_r, res_w, out_w, err_w, *([control] if control >= 0 else [])):
        os.close(fd)
    if pid < 0:
        sock.send(json.dumps(reply).encode())
    else:
        pidfd = os.pidfd_open(pid)
        reply["pid"] = pid
        reply["slot"] = spec.slot
        _live_workers[pid] = pidfd  # kept: it wakes the main loop when the worker exits
        socket.send_fds(sock, [json.dumps(reply).encode()], [*parent_ends[:4], pidfd, *parent_ends[4:]])
    for fd in parent_ends:
        os.close(fd)


def _load_runtime(packages_dir: str | None, preload: list[str]) -> None:
    """A runtime with packages (``runtimes.py``): its directory on ``sys.path`` and its ``preload``
    modules imported once here, so that no sandbox pays for them. The zygote must stay single-threaded
    (a clone of a multi-threaded process copies locks held by threads that do not exist in the copy):
    a module that started a thread is a set-up error, not something to fork with."""
    if packages_dir is not None:
        sys.path.append(packages_dir)
    for name in preload:
        __import__(name)
    if preload:
        tasks = os.open("self/task", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=_host_proc[0])
        try:
            threads = len(os.listdir(tasks))
        finally:
            os.close(tasks)
        if threads != 1:
            raise RuntimeError(
                f"preloading {preload} started {threads - 1} thread(s); the zygote cannot fork"
            )


def main(
    sock_fd: int,
    isolate: bool,
    python_prefix: str,
    slots: int,
    seccomp_policy: str,
    packages_dir: str | None = None,
    preload: list[str] | None = None,
    ro_dirs: list[str] | None = None,
) -> NoReturn:
    sock = socket.socket(fileno=sock_fd)
    jail.prepare_zygote(isolate)  # while the host's /proc is still visible
    _host_proc.append(os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    if isolate:
        _netns_fds.extend(jail.make_network_namespaces(min(slots, MAX_SLOT_NETNS)))
        jail.build_template_root(python_prefix, packages_dir, tuple(ro_dirs or ()))
    linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
    filters = seccomp.Filters(
        seccomp.PreparedFilter(seccomp.build_filter()),
        seccomp.language_filters() if isolate and seccomp_policy == "allow" else {},
    )
    for name in PRELOADED_MODULES:
        __import__(name)
    _load_runtime(packages_dir, preload or [])
    child.find_global_rngs()
    child.prepare_interpreter()
    # Everything imported so far goes to the permanent generation: a collection in a worker or in the
    # candidate's process never walks (and copy-on-write faults) these objects.
    gc.collect()
    gc.freeze()
    sys.stdout.flush()
    while True:
        poller = select.poll()
        for fd in (sock.fileno(), *_live_workers.values()):
            poller.register(fd, select.POLLIN)
        ready = [fd for fd, _ in poller.poll(500)]
        _reap(sock)
        if sock.fileno() not in ready:
            continue
        try:
            message = sock.recv(1 << 20)
        except ConnectionResetError:
            break
        if not message:
            break
        command = json.loads(message)
        if command["op"] == "spawn":
            try:
                spawn(sock, command, filters)
            except BrokenPipeError:
                break
        elif command["op"] == "exit":
            break
    sock.close()
    _shutdown()


# The zygote's command line after the interpreter's path, which every sandbox's pid 1 inherits and shows
# in ``/proc/1/cmdline``: no host path in it (the code, with the source directory, arrives on stdin). The
# interpreter's own path stays ``argv[0]``: Python finds its standard library from it, and the sandbox
# sees that path anyway (the prefix is bound read-only at the same place, ``sys.executable`` names it).
ARGS = ("-S", "-s", "-P", "-B", "-c", "import sys; exec(sys.stdin.read())")


def bootstrap_code(
    src_dir: str,
    sock_fd: int,
    isolate: bool,
    python_prefix: str,
    slots: int,
    seccomp_policy: str,
    packages_dir: str | None = None,
    preload: tuple[str, ...] = (),
    ro_dirs: tuple[str, ...] = (),
) -> str:
    """The code ``ARGS`` reads from stdin: import this module without running the package ``__init__``
    files, put stdin back on ``/dev/null``, then ``main``."""
    return (
        "import os, sys, types\n"
        "null = os.open(os.devnull, os.O_RDONLY); os.dup2(null, 0); os.close(null)\n"
        f"for name, path in (('execrl', {src_dir + '/execrl'!r}), ('execrl.sandbox', {src_dir + '/execrl/sandbox'!r})):\n"
        "    module = types.ModuleType(name); module.__path__ = [path]; sys.modules[name] = module\n"
        "from execrl.sandbox.zygote.server import main\n"
        f"main({sock_fd}, {isolate!r}, {python_prefix!r}, {slots!r}, {seccomp_policy!r}, {packages_dir!r}, "
        f"{list(preload)!r}, {list(ro_dirs)!r})\n"
    )
