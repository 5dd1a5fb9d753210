"""The trusted harness ``H``: pid 1 of the sandbox, it runs the job and reports over a private pipe.

Exception, for speed: a job of exactly one Python function/assert test runs the candidate in ``H``'s
own process (``runs_inline``); the parent then validates the records with ``GroupState`` itself and
learns how the process ended from the zygote, so the argument below still holds with the parent in
``H``'s role (see ``runs_inline`` and the package docstring).

Why results cannot be forged (hazard 20: ``exit(0)`` before the asserts, ``os._exit(0)``, patched
builtins, printed fake results, closing or writing file descriptors):

* ``H`` never runs candidate code. Each program run happens in a child ``C`` of ``H`` (a fork, or for
  compilers and compiled programs a ``posix_spawn``, ``spawn.py``); before the first candidate byte runs,
  ``C`` holds no descriptor but stdin/stdout/stderr and its own record pipe (the fork closes the rest,
  a spawn relies on close-on-exec, which ``main`` sets on the result and job pipes; a warm start's gate
  on fd 9 is closed by the gate's own text before the program is opened, ``warm.py``), so the result
  pipe to the parent exists only in ``H``. ``H`` is pid 1 of its pid namespace (the kernel
  drops signals to it from inside the namespace), non-dumpable (no ``/proc/1/fd``, ``/proc/1/mem``), and
  seccomp denies ``ptrace``, ``process_vm_writev`` and ``pidfd_getfd``.
* Expected values never enter the sandbox. For ``CallTest`` ``C`` reports only the returned value (as
  JSON), for ``IOTest`` ``H`` captures ``C``'s stdout; the *parent* compares them with the expected
  values it kept. Printing "PASSED", exiting early or patching builtins cannot produce a value the
  candidate does not know; a test without a record counts as failed, and the run only counts once ``H``
  wrote its final ``done`` record (the parent treats a missing one as a failure).
* ``CodeTest`` (HumanEval's assert style): before the job is built the parent rewrites the common assert
  shapes into probes (``asserts.py``): ``C`` reports the probed values, the parent keeps the expected
  values and compares, so such a test is as strong as a ``CallTest``; an ``ok`` record cannot answer a
  test that has probes. What the rewrite does not recognise (asserts in loops over random inputs,
  comparisons of two computed values, helpers that raise) still runs inside ``C`` in the candidate's
  namespace: early exits and printed results fail, but a candidate written against this harness could
  write that test's record itself. ``execrl bench asserts`` counts the tests in each form.
* Every record from ``C`` is parsed with bounds (``records.py``): a malformed one breaks the group's
  protocol (the candidate's ``runtime_error``) and never raises in ``H``, whose crash would be a
  ``sandbox_error`` chosen by the candidate.

Speed: ``C`` is a fork of the already-running harness interpreter, so a Python program starts without
interpreter start-up or imports (``compile`` + ``exec`` of its source); other languages ``posix_spawn``
the compiler and the binary (or interpreter) inside the same jail, which copies nothing of ``H``
(``spawn.py``: about 1.5 ms less per program than fork + exec, measured outside the jail).

Records to the parent are JSON lines: ``ready``, optional ``compile``, ``test`` (per test) or ``run``
(plain run), and ``done``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
import traceback

from execrl.sandbox.zygote import child, jail, records, seccomp, spawn, stall, testgroups, warm, workfiles
from execrl.sandbox.zygote.records import clean_error

# Annotations only: importing ``typing`` would add ~2 MB to the zygote, and to every fork of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn


COMPILE_OUTPUT_BYTES = 1 << 16


class Outcome:
    """How one child ``C`` ended, with what it wrote to the pipes ``H`` watched."""

    def __init__(self) -> None:
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.wall_limit = False
        self.stalled = False  # the wall limit was a compile that stopped using CPU (``stall.py``)
        self.output_limit = False
        self.captured = bytearray()

    def fields(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "signal": self.signal,
            "cpu_s": self.cpu_s,
            "wall_s": self.wall_s,
            "wall_limit": self.wall_limit,
            "output_limit": self.output_limit,
        }


class Harness:
    def __init__(self, res_fd: int, job: dict[str, Any], isolated: bool) -> None:
        self.res_fd = res_fd
        self.job = job
        self.isolated = isolated
        limits = job["limits"]
        self.cpu_budget_s = float(limits["cpu_time_s"])
        self.cpu_used_s = 0.0
        self.max_output = int(limits["max_output_bytes"])
        self.deadline = (
            time.monotonic() + float(limits["timeout_s"]) + float(job["language"]["compile_timeout_s"])
        )
        self.call_lines = _call_lines(job)  # a binary language's call harness reads these on stdin
        # ``posix_spawn`` needs the harness's own file-size limit lowered for good, after which no stdin
        # memfd larger than it can be written: such a job forks every program (``spawn.stdin_fits``).
        fits = spawn.stdin_fits(_stdin_texts(job, self.call_lines), int(limits["max_file_mb"]) << 20)
        self.self_limits = spawn.SelfLimits(limits) if isolated and fits else None
        self.warm: warm.WarmProgram | None = None  # the job's first run, pre-started (``warm.py``)
        self.allow: seccomp.PreparedFilter | None = None  # the job's allow list, until ``bind_filter``

    def bind_filter(self) -> None:
        """Stack the job's seccomp allow list on ``H`` (once): before any process ``H`` starts, and
        before anything of the candidate's runs (a warm program installed its own before its exec)."""
        allow, self.allow = self.allow, None
        if allow is not None:
            allow.install()

    # -- reporting -------------------------------------------------------------------------------------
    def send(self, record: dict[str, Any]) -> None:
        child.write_all(self.res_fd, (json.dumps(record) + "\n").encode("utf-8", "replace"))

    # -- running one child -----------------------------------------------------------------------------
    def fork(self, target: Callable[[], NoReturn]) -> int:
        self.bind_filter()
        pid = os.fork()
        if pid == 0:
            try:
                target()
            finally:
                os._exit(70)
        return pid

    def supervise(
        self,
        pid: int,
        readers: dict[int, Callable[[bytes], bool]],
        deadline: float,
        watch_stall: stall.StallWatch | None = None,
    ) -> Outcome:
        """Drain ``readers`` (fd -> callback returning False to kill on overflow) until ``pid`` is gone;
        with ``watch_stall`` (a compile step) a process tree that stopped using CPU is killed too."""
        outcome = Outcome()
        start = time.monotonic()
        pidfd = os.pidfd_open(pid)
        open_fds = set(readers)
        exited = False
        poll_s = stall.POLL_S if watch_stall is not None else 1.0
        while open_fds or not exited:
            now = time.monotonic()
            wait_s = deadline - now
            stalled = watch_stall is not None and not exited and watch_stall.stalled(now)
            if (wait_s <= 0 or stalled) and not exited:
                outcome.stalled = outcome.stalled or (stalled and not outcome.wall_limit)
                outcome.wall_limit = True
                self._kill_all(pid)
                wait_s = 1.0
            watch = list(open_fds) + ([] if exited else [pidfd])
            ready, _, _ = select.select(watch, [], [], max(0.0, min(wait_s, poll_s)))
            for fd in ready:
                if fd == pidfd:
                    exited = True
                    self._kill_all(pid)  # stragglers (daemons) die with the run, and release the pipes
                    continue
                data = os.read(fd, 1 << 16)
                if not data:
                    open_fds.discard(fd)
                elif not readers[fd](data):
                    outcome.output_limit = True
                    self._kill_all(pid)
                    open_fds.discard(fd)
        os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
        self._reap_all()
        outcome.wall_s = time.monotonic() - start
        outcome.cpu_s = usage.ru_utime + usage.ru_stime
        self.cpu_used_s += outcome.cpu_s
        if os.WIFSIGNALED(status):
            outcome.signal = os.WTERMSIG(status)
        else:
            outcome.exit_code = os.WEXITSTATUS(status)
        return outcome

    def _kill_all(self, pid: int) -> None:
        """Kill ``C`` and everything it started (pid 1 cannot be hit by its own kill(-1))."""
        try:
            if self.isolated:
                os.kill(-1, signal.SIGKILL)
            else:
                os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _reap_all(self) -> None:
        """Wait until every straggler is dead and reaped, so the next test starts with free pids."""
        while True:
            if self.isolated:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)
            try:
                pid, _ = os.waitpid(-1, 0 if self.isolated else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def cpu_left_s(self) -> float:
        return self.cpu_budget_s - self.cpu_used_s

    def capture_reader(self, outcome_buffer: bytearray, limit: int) -> Callable[[bytes], bool]:
        def on_data(data: bytes) -> bool:
            outcome_buffer.extend(data)
            return len(outcome_buffer) <= limit

        return on_data

    # -- phases ----------------------------------------------------------------------------------------
    def write_files(self) -> None:
        workfiles.write_all(self.job)

    def start_program(
        self,
        argv: list[str],
        stdin: bytes,
        stdout_fd: int | None,
        rec_fd: int | None = None,
        merge: bool = False,
        may_spawn: bool = True,
    ) -> int:
        """Start ``C`` running ``argv`` (a compiler, a compiled program or an interpreter): by
        ``posix_spawn`` when the harness could lower its rlimits to the program's (``spawn.py``, ~1.5 ms
        cheaper), else by fork + ``child.exec_program``. Same descriptors, session, signals and limits."""
        self.bind_filter()
        env = self.job["language"]["env"]
        cpu_left = self.cpu_left_s()
        if may_spawn and self.self_limits is not None:
            memfd = spawn.stdin_memfd(stdin) if stdin else None  # before the file-size limit goes down
            try:
                if self.self_limits.lower(cpu_left):
                    extra = {child.RECORD_FD: rec_fd} if rec_fd is not None else None
                    return spawn.spawn_program(argv, memfd, stdout_fd, env, extra, merge)
            except OSError as exc:
                # The exec failed: fork + exec fails the same way and ends as before (exit status 127).
                if exc.errno not in spawn.EXEC_ERRNOS:
                    raise
            finally:
                if memfd is not None:
                    os.close(memfd)
        limits = self.job["limits"]
        return self.fork(
            lambda: child.exec_program(argv, stdin, stdout_fd, cpu_left, limits, env, rec_fd, merge)
        )

    def run_exec(
        self,
        argv: list[str],
        stdin: bytes,
        capture: bool,
        limit: int,
        deadline: float,
        merge: bool = False,
        may_spawn: bool = True,
        stall_s: float | None = None,
    ) -> Outcome:
        """Run ``argv`` (compiler or compiled program) in ``C``, stdout captured when asked (and stderr
        with it when ``merge``: the compiler's diagnostics); the first run may be the warm program.
        ``stall_s``: kill it once its session used no CPU for that long (``stall.StallWatch``)."""
        pre, self.warm = self.warm, None
        if pre is not None and (pre.argv, pre.shape["capture"], merge) != (argv, capture, False):
            raise RuntimeError("the warm program does not match the job's first run")  # ``fits`` did
        buffer = bytearray()
        if pre is not None:
            pid, out_r = pre.release(stdin)
        else:
            out_r, out_w = os.pipe() if capture else (-1, -1)
            pid = self.start_program(
                argv, stdin, out_w if capture else None, merge=merge, may_spawn=may_spawn
            )
            if capture:
                os.close(out_w)
        readers: dict[int, Callable[[bytes], bool]] = {}
        if capture:
            readers[out_r] = self.capture_reader(buffer, limit)
        watch_stall = stall.StallWatch(pid, stall_s) if stall_s is not None else None
        outcome = self.supervise(pid, readers, deadline, watch_stall)
        if capture:
            os.close(out_r)
        outcome.captured = buffer
        return outcome

    def run_python_main(self, stdin: bytes, capture: bool) -> tuple[Outcome, dict[str, Any] | None]:
        out_r, out_w = os.pipe() if capture else (-1, -1)
        rec_r, rec_w = os.pipe()
        buffer, record_lines = bytearray(), bytearray()

        def target() -> NoReturn:
            child.run_main(self.job, stdin, out_w if capture else None, rec_w, self.cpu_left_s())

        pid = self.fork(target)
        os.close(rec_w)
        readers = {rec_r: self.capture_reader(record_lines, 1 << 16)}
        if capture:
            os.close(out_w)
            readers[out_r] = self.capture_reader(buffer, self.max_output)
        outcome = self.supervise(pid, readers, self.deadline)
        for fd in readers:
            os.close(fd)
        outcome.captured = buffer
        return outcome, _program_error(record_lines)

    def compile(self) -> bool:
        language = self.job["language"]
        deadline = min(self.deadline, time.monotonic() + float(language["compile_timeout_s"]))
        budget = self.cpu_budget_s
        self.cpu_budget_s = float(language["compile_timeout_s"])
        may_spawn = self.self_limits is not None and self.self_limits.allows_compile(
            self.cpu_budget_s, budget
        )
        # A compile that stops using CPU waits for at most the run's own wall limit (``stall.py``); the
        # unisolated backend's /proc is the host's, and it is no security boundary anyway.
        stall_s = float(self.job["limits"]["timeout_s"]) if self.isolated else None
        outcome = self.run_exec(
            language["compile"], b"", True, COMPILE_OUTPUT_BYTES, deadline, True, may_spawn, stall_s
        )
        self.cpu_budget_s, self.cpu_used_s = budget, 0.0
        self.deadline = time.monotonic() + float(self.job["limits"]["timeout_s"])
        ok = outcome.exit_code == 0 and not outcome.wall_limit
        text = outcome.captured.decode("utf-8", "replace")
        if outcome.stalled:
            idle_s = max(stall.FLOOR_S, stall_s or 0.0)
            text += f"\n[execrl: compile stopped: the compiler used no CPU for {idle_s:g} s (blocked)]"
        elif outcome.wall_limit:
            text += "\n[execrl: compile time limit exceeded]"
        elif outcome.signal is not None:
            text += f"\n[execrl: the compiler was killed by signal {outcome.signal} (memory or CPU limit?)]"
        self.send({"kind": "compile", "ok": ok, "output": text, **outcome.fields()})
        return ok


def _call_lines(job: dict[str, Any]) -> dict[int, str]:
    """Each call test's line for a binary language's call harness (Python runs call tests itself)."""
    if job["language"]["mode"] == "python":
        return {}
    tests = enumerate(job["tests"])
    return {
        i: json.dumps({"i": i, "entry_point": t["entry_point"], "args": t["args"]})
        for i, t in tests
        if t["kind"] == "call"
    }


def _stdin_texts(job: dict[str, Any], call_lines: dict[int, str]) -> list[str]:
    """Every stdin the job may feed one program: the plain run's, each io test's, the call harness's."""
    texts = [job["stdin"], *(t["stdin"] for t in job["tests"] if t["kind"] == "io")]
    if call_lines:
        texts.append("\n".join(call_lines.values()))
    return texts


def read_job(job_fd: int, head: bytes = b"") -> dict[str, Any]:
    """The job, read to the end of the pipe (``head``: what ``warm.read_hint`` already read of it)."""
    chunks = [head]
    while True:
        data = os.read(job_fd, 1 << 20)
        if not data:
            break
        chunks.append(data)
    os.close(job_fd)
    job: dict[str, Any] = json.loads(b"".join(chunks))
    return job


def main(
    res_fd: int,
    job_fd: int,
    isolated: bool,
    allow_filters: dict[str, seccomp.PreparedFilter],
    ready: bytes,
) -> NoReturn:
    """Entry of ``H`` once the worker is isolated: read the parent's warm-start hint (``warm.py``; commit
    to it and park the runtime), report ``ready``, wait for the job, run it, report done.

    ``allow_filters``: the seccomp allow list of each language that has one (empty under the deny
    policy); the job's is stacked on the deny list before anything else happens, so it binds ``H``
    itself, the inline candidate and every process started after (a worker is built before its
    language is known). A worker committed to a warm start stacked it before starting the runtime."""
    try:
        for fd in (res_fd, job_fd):  # no program started by posix_spawn may inherit them (spawn.py): a
            os.set_inheritable(fd, False)  # warm start's runtime starts while the job pipe is open
        shape, head = warm.read_hint(job_fd)
        committed = None
        if shape is not None and isolated:
            committed = warm.WarmProgram.start(shape, allow_filters.get(shape["language"]["name"]))
        os.write(res_fd, ready)
        job = read_job(job_fd, head)
        h = Harness(res_fd, job, isolated)
        if committed is None:
            h.allow = allow_filters.get(job["language"]["name"]) if isolated else None
            h.bind_filter()
        elif not committed.fits(job):  # the parent matches shapes (``pool.WorkerPool.acquire``)
            raise RuntimeError("a job of another shape reached a worker committed to a warm start")
        elif committed.pid is not None:
            h.warm = committed
        if not isolated:
            h.send({"kind": "workdir", "path": jail.unisolated_workdir()})
        h.write_files()
        if not job["language"]["compile"] or h.compile():
            testgroups.run_tests(h, res_fd)
        if job.get("fetch_files"):
            workfiles.fetch_all(job, h.send)
        h.send({"kind": "done"})
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as a sandbox error
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2000:]
        os.write(res_fd, (json.dumps({"kind": "harness_error", "message": text}) + "\n").encode())
    finally:
        os._exit(1)


def _program_error(lines: bytearray) -> dict[str, Any] | None:
    """The ``program_error`` record of a main-script run, if any (other lines are ignored: the record
    only adds the traceback to a run whose verdict the exit status decides)."""
    for line in bytes(lines).splitlines():
        record = records.parse_record(line)
        if record is not None and record.get("kind") == "program_error":
            return clean_error(record)
    return None
