"""Warm starts: a parked worker starts the interpreter of the job it expects before the job arrives.

Why: Bash's hello world runs for ~1.5-2 ms without isolation, most of it starting ``bash`` (``execve``,
the dynamic loader, the shell's initialisation), and the sandbox paid that on the request's critical
path on top of its own work: 2.0-2.5x the plain run (``execrl bench sandbox --languages``). Python
avoids the cost by forking an interpreter that is already running (``child.py``); this module does the
same for an interpreter that is not Python: the issue's "pre-started runtime per worker".

How, for a language with a ``languages.WarmStart``:

1. The parent sends every new worker one *hint* line first on its job pipe, once the worker is in its
   cgroups (``pool.WorkerPool._hint``): ``null``, or the *shape* of a job (``hint``: the language spec,
   stdout captured or not, the rlimits). ``WarmChooser`` picks it from the recent requests.
2. The harness *commits* to that shape, as it would on receiving such a job: it lowers its own rlimits
   to the shape's (``spawn.SelfLimits``) and stacks the language's seccomp allow list on itself. Then it
   ``posix_spawn``s the run command (a fork of the harness costs ~1.3 ms more CPU, measured) with one
   extra environment variable that makes the runtime read a *gate* pipe on fd 9 at start-up (Bash
   sources ``$BASH_ENV``, here ``/dev/fd/9``, before it opens its script). The runtime blocks there,
   fully started, before any byte of the candidate's exists. ``park`` waits for that, and only then does
   the worker report ready (``Sandbox.wait_settled`` waits for it too).
3. The parent hands the worker only a job of the same shape (``pool.WorkerPool.acquire``): the harness
   writes the files, then the first run's stdin into the runtime's stdin memfd, then the gate's text,
   which closes fd 9 and undoes the variable, and closes the gate; the runtime runs the candidate's
   program as a cold start would, with the same argv, environment, descriptors, limits and filter. A job
   of another shape would find the harness committed to the wrong filter and limits, so it fails
   closed (a ``sandbox_error``) rather than run; the parent never sends one. Runs after the first start
   cold as before.

What differs from a cold start, by design: the run's ``cpu_s`` includes the runtime's start-up (about a
millisecond, also counted against its CPU limit); its stdin is the memfd even when empty (a cold run
reads an empty stdin from ``/dev/null``; both read as end of file); and ``/proc/self/environ``, the
environment the process was started with, still lists the gate variable (the shell's own environment,
``env``, and every child's no longer do). ``tests/integration/test_sandbox_warm.py`` compares the rest.

Sharing and cost (parent side): each shape gets its share of the parked workers from the last
``CHOOSER_WINDOW`` requests (``WarmChooser``); a request that finds only workers committed elsewhere gets
an unhinted one built for it, and committed workers beyond their share are retired
(``pool.WorkerPool._retire_stale``; without that, one committed to Bash stayed parked for good once the
requests turned to Python, and each Python request paid a worker build). A worker built while a request
already waits is not hinted: that request would pay the runtime's start-up before the worker is ready
(an ad hoc A/B without this rule: 0.78-0.88x the cold executions/s for Bash, 2 in flight). With it,
``execrl bench sandbox --warm-start --rounds 5`` (``docs/evals/bench_sandbox_warm.json``), warm over
cold with every worker busy: Bash 1.03x (2 in flight) and 1.00x (1), Python 0.94x and 1.07x, Bash and
Python 2:1 0.97x and 0.98x, i.e. no change beyond the noise; the latency of one request is what it buys
(``execrl bench sandbox --languages``: Bash hello 0.92x its plain run, from 2.1-2.2x).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import select
import signal

from execrl.sandbox.zygote import child, spawn

# Annotations only (the zygote stays lean, see ``child.py``).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from execrl.sandbox.zygote.seccomp import PreparedFilter

HINT_PREFIX = b"warm "  # every job pipe starts with one hint line: this prefix, JSON (``null``: none), "\n"
GATE_FD = 9  # the gate descriptor in the warm program (``languages.WarmStart`` names it)
RLIMIT_FIELDS = ("cpu_time_s", "max_file_mb", "max_open_files", "max_processes")  # set before the job
CHOOSER_WINDOW = 8  # requests the parent looks back over: a switch of language costs up to 4 misses
PARK_TIMEOUT_S = 2.0  # a runtime not parked by then is killed, and the job starts cold
PAGE = 4096  # the gate pipe's size: one buffer, so a single byte in it makes it full (``park``)


def hint(job: dict[str, Any]) -> dict[str, Any] | None:
    """The warm-start shape of ``job`` (``None``: it cannot start warm). A worker committed to a shape
    runs only jobs whose shape is equal: everything it set up before the job (filter, rlimits, the
    runtime's argv, environment and stdout) comes from the shape."""
    language, tests, limits = job["language"], job["tests"], job["limits"]
    if language.get("warm") is None or language["compile"] or not language["run"]:
        return None
    if any(test["kind"] != "io" for test in tests) or int(limits["max_open_files"]) < spawn.MIN_OPEN_FILES:
        return None
    # The committed harness writes the job's files and the first run's stdin under the job's
    # RLIMIT_FSIZE (a cold one writes them before lowering it): one that might exceed it (4 bytes per
    # character at most) starts cold.
    texts = [job["program"], job["stdin"], *job["files"].values(), *job["files_b64"].values()]
    texts += [test["stdin"] for test in tests]
    if 4 * max(len(text) for text in texts) > int(limits["max_file_mb"]) << 20:
        return None
    return {
        "language": language,
        "capture": bool(tests),  # stdin/stdout tests capture stdout; a plain run's goes to the parent
        "limits": {name: limits[name] for name in RLIMIT_FIELDS},
    }


def encode_hint(shape: dict[str, Any] | None) -> bytes:
    return HINT_PREFIX + json.dumps(shape, sort_keys=True).encode("utf-8", "surrogatepass") + b"\n"


NO_HINT = encode_hint(None)


def read_hint(job_fd: int) -> tuple[dict[str, Any] | None, bytes]:
    """Block until the parent's hint line arrives: (the hint or ``None``, bytes read after it)."""
    data = b""
    while b"\n" not in data:
        more = os.read(job_fd, 1 << 16)
        if not more:
            raise ValueError("the job pipe closed before its warm-start hint")
        data += more
    line, _, rest = data.partition(b"\n")
    if not line.startswith(HINT_PREFIX):
        raise ValueError(f"the job pipe does not start with a warm-start hint: {line[:40]!r}")
    shape: dict[str, Any] | None = json.loads(line[len(HINT_PREFIX) :])
    return shape, rest


class WarmProgram:
    """The harness committed to a job shape, and the shape's run command parked on its gate
    (``pid`` is ``None`` once it is gone: died or timed out while starting, or released)."""

    def __init__(self, shape: dict[str, Any]) -> None:
        self.shape = shape
        language = shape["language"]
        self.argv: list[str] = language["run"]
        self.memfd = os.memfd_create("stdin")  # close-on-exec: only its dup onto 0 is inherited
        gate_r, self.gate_w = os.pipe()
        fcntl.fcntl(self.gate_w, fcntl.F_SETPIPE_SZ, PAGE)
        child.write_all(self.gate_w, b"\n")  # an empty first line of the gate's text: ``park`` watches it
        self.out_r, out_w = os.pipe() if shape["capture"] else (-1, -1)
        env = {**language["env"], **language["warm"]["env"]}
        try:
            stdout = out_w if out_w >= 0 else None
            self.pid: int | None = spawn.spawn_program(self.argv, self.memfd, stdout, env, {GATE_FD: gate_r})
        finally:
            os.close(gate_r)
            if out_w >= 0:
                os.close(out_w)

    @classmethod
    def start(cls, shape: dict[str, Any], allow: PreparedFilter | None) -> WarmProgram | None:
        """Commit the harness to ``shape`` and start its runtime; ``None`` (nothing changed) when the
        harness cannot take the shape's rlimits. A runtime that does not park is killed; the harness
        stays committed, and the job runs cold under the same filter and limits."""
        if not spawn.SelfLimits(shape["limits"]).lower(float(shape["limits"]["cpu_time_s"])):
            return None
        if allow is not None:
            allow.install()
        program = cls(shape)
        if not program.park():
            program.discard()
        return program

    def park(self, timeout_s: float = PARK_TIMEOUT_S) -> bool:
        """Wait until the runtime blocks on its gate: it has read the gate's first byte, which frees
        the one-page pipe (the write end turns writable). False if it died or took too long."""
        assert self.pid is not None
        pidfd = os.pidfd_open(self.pid)
        try:
            poller = select.poll()
            poller.register(self.gate_w, select.POLLOUT)
            poller.register(pidfd, select.POLLIN)
            ready = dict(poller.poll(int(timeout_s * 1000)))
        finally:
            os.close(pidfd)
        return bool(ready.get(self.gate_w, 0) & select.POLLOUT) and pidfd not in ready

    def fits(self, job: dict[str, Any]) -> bool:
        return hint(job) == self.shape

    def release(self, stdin: bytes) -> tuple[int, int]:
        """Give the runtime its stdin and open the gate: it runs the candidate's program (whose files
        must be written by now). Returns (pid, the read end of its stdout pipe or -1)."""
        assert self.pid is not None
        pid, self.pid = self.pid, None
        try:
            if stdin:
                child.write_all(self.memfd, stdin)
                os.lseek(self.memfd, 0, os.SEEK_SET)  # the runtime's fd 0 shares this offset
            gate = self.shape["language"]["warm"]["gate"].encode()
            with contextlib.suppress(BrokenPipeError):  # it died parked: supervise sees it, as if cold
                child.write_all(self.gate_w, gate)
        finally:
            os.close(self.gate_w)
            os.close(self.memfd)
        return pid, self.out_r

    def discard(self) -> None:
        """Kill and reap the runtime (it did not park) and close its descriptors."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = None
            for fd in (self.gate_w, self.memfd, self.out_r):
                if fd >= 0:
                    os.close(fd)


class WarmChooser:
    """Parent side: which shape a new worker commits to. Each shape of the last ``CHOOSER_WINDOW``
    requests gets its share of the ``workers`` parked workers (rounded to the nearest); the new worker
    takes the first shape (commonest first) that has fewer parked than its share, else no hint. An
    unhinted worker takes any job, so a mix of languages keeps some of those parked; a request whose
    shape no parked worker has gets one built for it, and parked workers beyond their shape's share
    are retired (``pool.WorkerPool.acquire``). Not thread-safe: the pool calls it under its lock."""

    def __init__(self, workers: int, window: int = CHOOSER_WINDOW) -> None:
        self.workers = workers
        self.recent: collections.deque[bytes] = collections.deque(maxlen=window)

    def observe(self, job: dict[str, Any]) -> bytes:
        """Count ``job``; returns its hint line (``NO_HINT``: it cannot start warm)."""
        shape = hint(job)
        line = encode_hint(shape) if shape is not None else NO_HINT
        if len(line) > select.PIPE_BUF:  # the pool writes a hint in one write, into an empty pipe
            line = NO_HINT
        self.recent.append(line)
        return line

    def quota(self, line: bytes) -> int:
        """How many parked workers the shape ``line`` should have: its share of the recent requests."""
        if line == NO_HINT or not self.recent:
            return 0
        return int(self.recent.count(line) / len(self.recent) * self.workers + 0.5)

    def choice(self, parked: collections.Counter[bytes]) -> bytes:
        """The hint line for a new worker, given the hints of the workers parked now."""
        counts = collections.Counter(line for line in self.recent if line != NO_HINT)
        for line, _ in counts.most_common():
            if parked[line] < self.quota(line):
                return line
        return NO_HINT
