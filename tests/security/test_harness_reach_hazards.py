"""Issue 9, class 2 (the jail's part): a candidate must not turn its own failure into ``sandbox_error``.

Rewards mask ``sandbox_error`` out of the advantage, so a program about to fail could escape its negative
reward by breaking the harness instead. Guarded here: lowering the harness's rlimits with ``prlimit``
(harness and candidate shared a uid), and lowering the program's own CPU rlimit so that the kernel
SIGKILLs pid 1 early, which the parent took for a kill from outside.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from security_helpers import assert_no_survivors, py

from execrl.sandbox import CallTest, CodeTest, Sandbox, Verdict
from execrl.sandbox.host.pool import WorkerPool

# Each lowers a limit of the harness (pid 1) the harness needs for the next test, then the first test
# dies, so the harness must open pipes and fork again.
HARNESS_LIMITS = {
    "nofile": "resource.RLIMIT_NOFILE, (3, 3)",
    "nproc": "resource.RLIMIT_NPROC, (1, 1)",
    "cpu": "resource.RLIMIT_CPU, (0, 0)",
    "as": "resource.RLIMIT_AS, (1 << 20, 1 << 20)",
}


@pytest.mark.parametrize("limit", sorted(HARNESS_LIMITS))
def test_prlimit_cannot_reach_the_harness(sandbox: Sandbox, limit: str) -> None:
    """Bug: ``prlimit(1, RLIMIT_NOFILE, 3)`` from the candidate made the harness fail (EMFILE) on the next
    test: ``sandbox_error`` at will. Now prlimit on another process is EPERM (seccomp) and both tests are
    the program's own failures."""
    program = (
        "import os, resource\n"
        "try:\n"
        f"    resource.prlimit(1, {HARNESS_LIMITS[limit]})\n"
        "    print('prlimit OK', flush=True)\n"
        "except OSError as exc:\n"
        "    print('prlimit', exc.errno, flush=True)\n"
        "def f():\n    os._exit(3)\n"
    )
    result = sandbox.run(py(program, CallTest("a", "f", expected=1), CallTest("b", "f", expected=1)))
    assert result.verdict is Verdict.RUNTIME_ERROR, result
    assert [t.error_message for t in result.tests] == ["exit code 3", "exit code 3"]
    assert result.stdout == "prlimit 1\n" * 2  # EPERM, once per candidate process
    assert_no_survivors(sandbox)


def test_prlimit_on_the_harness_is_refused_even_by_pid(sandbox: Sandbox) -> None:
    """The filter allows prlimit (and setpriority, CPU affinity) only on the caller (pid 0): the harness
    shares the candidate's uid (``jail._drop_privileges``), so seccomp is what keeps its limits out of
    reach. One's own limits and priority keep working."""
    program = (
        "import os, resource\n"
        "for pid in (1, os.getpid()):\n"
        "    try:\n"
        "        resource.prlimit(pid, resource.RLIMIT_NOFILE)\n"
        "        print(pid == 1, 'OK')\n"
        "    except OSError as exc:\n"
        "        print(pid == 1, exc.errno)\n"
        "for name, call in (('priority', lambda: os.setpriority(os.PRIO_PROCESS, 1, 19)),\n"
        "                   ('affinity', lambda: os.sched_setaffinity(1, {0}))):\n"
        "    try:\n"
        "        call()\n"
        "        print(name, 'OK')\n"
        "    except OSError as exc:\n"
        "        print(name, exc.errno)\n"
        # one step lower than now (an absolute value fails with EACCES when the suite runs under nice)
        "os.setpriority(os.PRIO_PROCESS, 0, min(19, os.getpriority(os.PRIO_PROCESS, 0) + 1))\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    result = sandbox.run(py(program))
    assert result.verdict is Verdict.PASSED, result
    assert result.stdout == "True 1\nFalse 1\npriority 1\naffinity 1\n(32, 32)\n"


OWN_CPU_LIMIT = "import resource\nresource.setrlimit(resource.RLIMIT_CPU, ({soft}, {hard}))\n"


@pytest.mark.parametrize("soft,hard", [(0, 0), (1, 1)])
def test_own_cpu_rlimit_inline_is_the_programs_failure(sandbox: Sandbox, soft: int, hard: int) -> None:
    """Bug: a single call test runs in pid 1; a program that lowered its own hard CPU limit was SIGKILLed
    by the kernel (at once for 0) before the budget, which the parent read as a kill from outside:
    ``sandbox_error``. Now the parent reads the hard limit pid 1 died with."""
    program = OWN_CPU_LIMIT.format(soft=soft, hard=hard) + "def f():\n    while True:\n        pass\n"
    result = sandbox.run(py(program, CallTest("a", "f", expected=1), cpu_time_s=3.0))
    assert result.verdict is Verdict.RUNTIME_ERROR, result
    assert result.tests[0].error_message == "killed by SIGKILL"
    assert result.sandbox_error is None
    assert_no_survivors(sandbox)


def test_own_cpu_rlimit_in_a_forked_candidate_is_the_programs_failure(sandbox: Sandbox) -> None:
    """The same with several tests (a forked candidate under the harness): never ``sandbox_error``."""
    program = OWN_CPU_LIMIT.format(soft=0, hard=0) + "def f():\n    while True:\n        pass\n"
    tests = (CodeTest("a", "assert f() == 1"), CodeTest("b", "assert f() == 1"))
    result = sandbox.run(py(program, *tests, cpu_time_s=3.0))
    assert result.verdict is Verdict.RUNTIME_ERROR, result
    assert {t.verdict for t in result.tests} == {Verdict.RUNTIME_ERROR}
    assert_no_survivors(sandbox)


def test_a_kill_from_outside_is_still_a_sandbox_error(sandbox: Sandbox) -> None:
    """The other side of the rule: pid 1 SIGKILLed by the host, with the CPU limit the harness gave it,
    stays ``sandbox_error`` (the candidate cannot do that: the kernel drops its SIGKILL to pid 1)."""
    pool = sandbox._pool
    acquire = WorkerPool.acquire
    killed: list[int] = []

    def acquire_and_kill_later(self: WorkerPool, *args: object, **kwargs: object) -> object:
        worker = acquire(self, *args, **kwargs)  # type: ignore[arg-type]

        def kill_from_the_host() -> None:
            os.kill(worker.pid, signal.SIGKILL)
            killed.append(1)

        threading.Timer(0.3, kill_from_the_host).start()
        return worker

    program = "def f():\n    while True:\n        pass\n"
    pool.acquire = acquire_and_kill_later.__get__(pool)  # type: ignore[method-assign]
    try:
        result = sandbox.run(py(program, CallTest("a", "f", expected=1), cpu_time_s=5.0))
    finally:
        del pool.acquire
    assert killed == [1]
    assert result.verdict is Verdict.SANDBOX_ERROR, result
    assert_no_survivors(sandbox)


def test_pidfd_open_of_the_harness_is_refused(sandbox: Sandbox) -> None:
    """Issue 23: ``pidfd_open(1)`` gave the candidate a descriptor for the harness (only ``pidfd_getfd``
    was denied), the handle every other pidfd call takes. Now EPERM under both policies, inline (the
    candidate is pid 1 itself) and in a group; a pidfd for its own child still works, and so does the
    harness, which supervises every child through one."""
    program = (
        "import errno, os\n"
        "def probe():\n"
        "    try:\n"
        "        os.close(os.pidfd_open(1))\n"
        "        harness = 'OK'\n"
        "    except OSError as exc:\n"
        "        harness = errno.errorcode[exc.errno]\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os._exit(0)\n"
        "    fd = os.pidfd_open(pid)\n"
        "    os.waitpid(pid, 0)\n"
        "    os.close(fd)\n"
        "    return [harness, 'child OK']\n"
    )
    expected = ["EPERM", "child OK"]
    inline = sandbox.run(py(program, CallTest("one", "probe", expected=expected)))
    group = sandbox.run(py(program, *(CallTest(name, "probe", expected=expected) for name in "ab")))
    for result in (inline, group):
        assert result.verdict is Verdict.PASSED, result.tests
