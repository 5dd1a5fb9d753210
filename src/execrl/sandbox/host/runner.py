"""Driving one execution from the parent: hand the job to a parked worker, watch it, collect the records.

The parent side of the wall-clock watchdog lives here, outside the sandbox: it kills the worker's pid 1
(through its pidfd, so a recycled pid can never be hit), which makes the kernel kill every process of
the pid namespace. The same loop polls the cgroup's CPU time (the whole process tree, daemons included)
and drains stdout, stderr and the result pipe continuously, so the sandbox never blocks on a full pipe;
output beyond ``limits.max_output_bytes`` kills the run (``output_limit``) and memory stays bounded.
For an inline run (``testgroups.runs_inline``: the candidate is pid 1) the parent also plays the harness's
part: it validates the candidate's records (``testgroups.GroupState``) and turns a death into the test's
record from the exit status the zygote reports.
"""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from execrl.sandbox.errors import InvalidRequestError, SandboxFailure
from execrl.sandbox.host.cgroups import CgroupSlot
from execrl.sandbox.host.workers import Worker, WorkerExit
from execrl.sandbox.judge import asserts
from execrl.sandbox.langs.registry import Language
from execrl.sandbox.types import CallTest, CodeTest, ExecutionRequest, IOTest, Verdict
from execrl.sandbox.zygote import records, testgroups
from execrl.sandbox.zygote.child import cpu_rlimit, write_all

WALL_GRACE_S = 0.25
CPU_GRACE_S = 0.1
CPU_POLL_S = 0.02
READY_TIMEOUT_S = 20.0
RECORD_BYTES_FACTOR = 4  # result-pipe budget: values and captured outputs of every test


@dataclass
class RunState:
    """What the parent saw of one execution."""

    records: list[dict[str, Any]] = field(default_factory=list)
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    stdout_over: bool = False
    stderr_over: bool = False
    stdout_dropped: int = 0  # bytes beyond the limit (not kept)
    stderr_dropped: int = 0
    kill_reason: str | None = None  # "wall", "cpu", "output", "stop"
    done: bool = False
    wall_s: float = 0.0
    compile_cpu_s: float = 0.0
    workdir: str = ""  # a host path the parent removes afterwards (unisolated backend only)


def _test_dict(test: CodeTest | CallTest | IOTest) -> dict[str, Any]:
    """One test as the sandbox sees it: its inputs, never its name (names stay in the parent, which maps
    records back by position; a name such as ``audit_2`` would tell the program which run it is in)."""
    if isinstance(test, CodeTest):  # recognised asserts become probes; their expected values stay here
        plan = asserts.plan(test.code)
        return {"kind": "code", "code": plan.code, "probes": len(plan.expectations)}
    if isinstance(test, CallTest):
        return {
            "kind": "call",
            "entry_point": test.entry_point,
            "args": list(test.args),
            "kwargs": dict(test.kwargs),
        }
    return {"kind": "io", "stdin": test.stdin}


def build_job(request: ExecutionRequest, language: Language) -> bytes:
    """The job as the sandbox sees it, encoded (``InvalidRequestError`` when it does not encode)."""
    return encode_job(job_fields(request, language))


def job_fields(request: ExecutionRequest, language: Language) -> dict[str, Any]:
    """The job as the sandbox sees it: inputs only; expected values stay in the parent."""
    program_path = request.program_path or language.default_path
    limits = request.limits
    with_call = any(isinstance(test, CallTest) for test in request.tests)
    support = language.support_files(with_call)
    if program_path in support:
        raise InvalidRequestError(
            f"program_path: {program_path!r} is a file the {language.name} harness writes"
        )
    reserved = language.reserved_problem(program_path, sorted(request.files), with_call)
    if reserved is not None:
        raise InvalidRequestError(reserved)
    job = {
        "language": language.job_spec(program_path, limits, with_call),
        "program": request.program,
        "program_path": program_path,
        "files": {path: text for path, text in {**request.files, **support}.items() if isinstance(text, str)},
        "files_b64": {
            path: base64.b64encode(data).decode()
            for path, data in {**request.files, **support}.items()
            if isinstance(data, bytes)
        },
        "fetch_files": list(request.fetch_files),
        "stdin": request.stdin,
        "tests": [_test_dict(t) for t in request.tests],
        "limits": {
            "timeout_s": limits.timeout_s,
            "cpu_time_s": limits.cpu_time_s,
            "max_output_bytes": limits.max_output_bytes,
            "max_file_mb": limits.max_file_mb,
            "max_open_files": limits.max_open_files,
            "max_processes": limits.max_processes,
            "max_fetch_file_bytes": limits.max_fetch_file_bytes,
            "max_fetch_bytes": limits.max_fetch_bytes,
        },
    }
    return job


def encode_job(job: dict[str, Any]) -> bytes:
    try:
        return json.dumps(job).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: arguments nested too deep
        raise InvalidRequestError(f"test arguments must be JSON values (call tests): {exc}") from exc


class _Lines:
    """Splits the result pipe into records. Only ``H`` writes there, but nothing read from a sandbox is
    parsed unbounded: a line that is not a JSON object sets ``garbage`` (the run is then judged as a
    protocol violation, see ``verdicts.Judge.unreported``) instead of raising in the parent."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.garbage = False

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self.buffer.extend(data)
        out = []
        while b"\n" in self.buffer and not self.garbage:
            line, _, rest = bytes(self.buffer).partition(b"\n")
            self.buffer = bytearray(rest)
            ok, record = records.loads(line)
            if ok and isinstance(record, dict):
                out.append(record)
            else:
                self.garbage = True
        return out


def _wait_ready(worker: Worker, lines: _Lines) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    deadline = time.monotonic() + READY_TIMEOUT_S
    poller = select.poll()
    poller.register(worker.res_r, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if not poller.poll(max(0, int(left * 1000))):
            raise SandboxFailure(f"worker {worker.pid} did not report ready within {READY_TIMEOUT_S:.0f} s")
        data = os.read(worker.res_r, 1 << 16)
        if not data:
            raise SandboxFailure(f"worker {worker.pid} died before it was ready")
        got = lines.feed(data)
        if lines.garbage:
            raise SandboxFailure(f"worker {worker.pid} wrote a malformed record before it was ready")
        if not got:
            continue
        first = got[0]
        if first.get("kind") == "setup_error":
            raise SandboxFailure(f"sandbox set-up failed: {first.get('message')}")
        if first.get("kind") != "ready":
            raise SandboxFailure(f"unexpected first record from the worker: {first!r}")
        return first, got[1:]


WaitExit = Callable[[Worker, float], "WorkerExit | None"]
EXIT_REPORT_S = 5.0  # how long the zygote may take to report a dead worker's status


def _own_cpu_rlimit(ended: WorkerExit, cpu_time_s: float) -> bool:
    """Whether pid 1 died with a hard CPU rlimit below the one the harness gave it: the program lowered
    it (which needs no privilege), so a SIGKILL can be the kernel's at that limit, even at once for 0.
    Then the death is the program's own doing (``runtime_error``), never a kill from outside."""
    return ended.cpu_hard_s is not None and ended.cpu_hard_s < cpu_rlimit(cpu_time_s)[1]


class _Relay:
    """Stands in for the harness when the candidate runs in pid 1 (``testgroups.runs_inline``): the parent
    checks the candidate's records with the harness's own ``GroupState`` and records what passes.

    It holds a weak proxy: the driver owns the group that owns this relay, and a strong reference back
    would be a cycle keeping every execution's output alive until the cycle collector runs. Only the
    driver feeds the group, so the driver is alive whenever the relay is used."""

    def __init__(self, driver: Driver) -> None:
        self.driver = weakref.proxy(driver)
        self.max_output = driver.max_bytes

    def send(self, record: dict[str, Any]) -> None:
        self.driver._record(record, self.driver.judge)


def runs_inline(request: ExecutionRequest, language: Language, isolated: bool) -> bool:
    kinds = {CodeTest: "code", CallTest: "call", IOTest: "io"}
    test_kinds = [kinds[type(t)] for t in request.tests]
    return testgroups.runs_inline(isolated, language.mode, test_kinds, bool(request.fetch_files))


class Driver:
    """One execution on one worker; ``judge(record) -> Verdict | None`` serves stop_on_first_failure.

    With ``wait_exit`` (strict backend) a request that ``runs_inline`` has its records checked here."""

    def __init__(
        self,
        worker: Worker,
        slot: CgroupSlot | None,
        request: ExecutionRequest,
        language: Language,
        wait_exit: WaitExit | None = None,
    ):
        self.worker = worker
        self.slot = slot
        self.request = request
        self.language = language
        self.state = RunState()
        self.lines = _Lines()
        self.max_bytes = request.limits.max_output_bytes
        # An unfinished record may be a test's output or one fetched file (base64: 4 bytes per 3).
        fetched_b64 = 4 * -(-request.limits.max_fetch_file_bytes // 3) if request.fetch_files else 0
        self.line_limit = max(RECORD_BYTES_FACTOR * self.max_bytes, fetched_b64) + (1 << 20)
        self.judge: Any = None
        self.wait_exit = wait_exit
        inline = wait_exit is not None and runs_inline(request, language, True)
        self.group = testgroups.GroupState(_Relay(self), [0]) if inline else None  # type: ignore[arg-type]

    def kill(self, reason: str) -> None:
        if self.state.kill_reason is None:
            self.state.kill_reason = reason
        self.worker.kill()

    def run(self, job: bytes, judge: Any) -> RunState:
        self.judge = judge
        _, early = _wait_ready(self.worker, self.lines)
        for record in early:
            self._record(record, None)
        limits = self.request.limits
        if self.slot is not None:
            self.slot.set_limits(memory_mb=limits.memory_mb, max_processes=limits.max_processes + 2)
            self.slot.reset()
        start = time.monotonic()
        try:
            write_all(self.worker.job_w, job)
        except BrokenPipeError as exc:
            raise SandboxFailure(f"worker {self.worker.pid} died before reading its job") from exc
        os.close(self.worker.job_w)
        self.worker.job_w = -1
        self._loop(start, judge)
        if self.group is not None and not self.state.done:
            self._inline_death(start)
        self.state.wall_s = time.monotonic() - start
        return self.state

    def _inline_death(self, start: float) -> None:
        """pid 1 ran the candidate and ended (or closed its pipes) before every test had its record: the
        test in progress gets the death, as the zygote saw it (exit status), like ``testgroups.run_group``."""
        assert self.group is not None and self.wait_exit is not None
        limits = self.request.limits
        wall_left_s = start + limits.timeout_s + WALL_GRACE_S - time.monotonic()
        ended = self.wait_exit(self.worker, max(0.0, wall_left_s))
        if ended is None:
            self.kill("wall")
            ended = self.wait_exit(self.worker, EXIT_REPORT_S)
        if ended is None:
            raise SandboxFailure(f"no exit status for worker {self.worker.pid} from the zygote")
        status = ended.status
        cpu_s = self.slot.cpu_time_s() if self.slot is not None else 0.0
        if (
            os.WIFSIGNALED(status)
            and os.WTERMSIG(status) == signal.SIGKILL
            and self.state.kill_reason is None
            and cpu_s < limits.cpu_time_s - 0.01
            and not _own_cpu_rlimit(ended, limits.cpu_time_s)
        ):
            # Killed from outside, not by the candidate: the kernel drops SIGKILL sent to pid 1 from inside
            # its namespace, and the kernel's own kills (OOM, the CPU rlimit the program may have lowered
            # itself) are told apart by the cgroup's counters and the rlimit it died with. Left
            # unreported: ``Judge.unreported`` makes it memory_limit or sandbox_error.
            return
        group = self.group
        fields: dict[str, Any] = {
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "cpu_s": cpu_s,
            "wall_s": time.monotonic() - start,
            "wall_limit": self.state.kill_reason == "wall",
            "output_limit": self.state.kill_reason == "output" and not group.violation,
            "protocol_violation": group.violation,
        }
        for index in group.pending:
            if group.program_error is not None:
                record = {"kind": "test", "i": index, "status": "error", **group.program_error}
            else:
                record = {"kind": "test", "i": index, "status": "died", **fields}
            self._record(record, self.judge)
        self.state.done = True

    def _loop(self, start: float, judge: Any) -> None:
        limits = self.request.limits
        compile_s = self.language.compile_limit_s(limits.compile_timeout_s)
        wall_deadline = start + limits.timeout_s + compile_s + WALL_GRACE_S
        streams = {self.worker.res_r: "res", self.worker.out_r: "out", self.worker.err_r: "err"}
        poller = select.poll()  # not select(): descriptors above 1024 are common in big parents
        for fd in streams:
            poller.register(fd, select.POLLIN)
        last_cpu_poll = start
        eof_deadline = float("inf")
        while streams:
            now = time.monotonic()
            if now >= wall_deadline and self.state.kill_reason is None:
                self.kill("wall")
            if self.state.kill_reason is not None:
                eof_deadline = min(eof_deadline, now + 5.0)
                if now > eof_deadline:
                    raise SandboxFailure("the sandbox's pipes stayed open after it was killed")
            wait_s = max(0.0, min(wall_deadline - now, CPU_POLL_S)) if self.state.kill_reason is None else 0.5
            for fd, _ in poller.poll(int(wait_s * 1000) + 1):
                data = os.read(fd, 1 << 16)
                if not data:
                    poller.unregister(fd)
                    del streams[fd]
                    continue
                self._handle(streams[fd], data, judge)
            if self.state.done:
                self._drain(streams, judge)
                return
            if self.slot is not None and self.state.kill_reason is None and now - last_cpu_poll >= CPU_POLL_S:
                last_cpu_poll = now
                budget = limits.cpu_time_s + self.state.compile_cpu_s + CPU_GRACE_S
                if not self._compiled():
                    budget += compile_s
                if self.slot.cpu_time_s() > budget:
                    self.kill("cpu")

    def _drain(self, streams: dict[int, str], judge: Any) -> None:
        """After ``done`` every process but the harness is dead and reaped, so whatever they wrote is
        already in the pipes: read it without waiting for the harness's own exit (about 1 ms)."""
        for fd, stream in streams.items():
            os.set_blocking(fd, False)
            while True:
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    break
                if not data:
                    break
                self._handle(stream, data, judge)

    def _compiled(self) -> bool:
        return any(r.get("kind") == "compile" for r in self.state.records)

    def _handle(self, stream: str, data: bytes, judge: Any) -> None:
        if stream == "res" and self.group is not None:
            if not self.group.feed(data):
                self.kill("protocol" if self.group.violation else "output")
            elif not self.group.pending:
                self.state.done = True
            return
        if stream == "res":
            if len(self.lines.buffer) + len(data) > self.line_limit:
                self.kill("output")
                return
            for record in self.lines.feed(data):
                self._record(record, judge)
            if self.lines.garbage:
                self.kill("protocol")
            return
        buffer = self.state.stdout if stream == "out" else self.state.stderr
        room = self.max_bytes - len(buffer)
        buffer.extend(data[: max(0, room)])
        if len(data) > room:
            dropped = len(data) - max(0, room)
            if stream == "out":
                self.state.stdout_over = True
                self.state.stdout_dropped += dropped
            else:
                self.state.stderr_over = True
                self.state.stderr_dropped += dropped
            self.kill("output")

    def _record(self, record: dict[str, Any], judge: Any) -> None:
        kind = record.get("kind")
        if kind == "test" and self.state.kill_reason == "stop":
            return  # tests that finished after the first failure are not reported
        self.state.records.append(record)
        if kind == "done":
            self.state.done = True
        elif kind == "workdir":
            self.state.workdir = str(record.get("path") or "")
        elif kind == "compile":
            self.state.compile_cpu_s = records.finite(record.get("cpu_s")) or 0.0
        elif kind == "test" and self.request.stop_on_first_failure and self.state.kill_reason is None:
            verdict = judge(record)
            if verdict is not Verdict.PASSED:
                self.kill("stop")
