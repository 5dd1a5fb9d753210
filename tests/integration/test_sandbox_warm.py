"""Warm starts (``sandbox/zygote/warm.py``): a program run by a pre-started Bash sees what a cold start sees, and
the pool hands each job only to a worker committed to its shape.

A warm run is recognisable from inside by one documented difference: ``/proc/self/environ`` (the
environment the process was started with) still holds ``BASH_ENV``. The probes print that witness on
their last line, so each test knows which kind of start it got."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execrl.sandbox import ExecutionRequest, IOTest, Limits, Sandbox, SandboxConfig, Verdict
from execrl.sandbox.zygote.seccomp import POLICIES
from execrl.sandbox.zygote.warm import NO_HINT

WITNESS = "tr '\\0' '\\n' < /proc/$$/environ | grep -c '^BASH_ENV=' || true\n"

PROBE = (
    r"""
echo "underscore=$_ zero=$0 source=${BASH_SOURCE[*]} flags=$- lineno=$LINENO"
read -r line; echo "stdin=$line"
ls /proc/$$/fd > fds.txt; sort -n fds.txt | tr '\n' ' '; echo; rm fds.txt
read -r stat < /proc/$$/stat; set -- ${stat##*) }; echo "session_is_self=$([ "$4" = "$$" ] && echo yes)"
grep -E '^(Sig(Ign|Blk|Cgt)|Seccomp|Seccomp_filters|NoNewPrivs|Cap(Inh|Prm|Eff|Bnd|Amb)):' /proc/$$/status
ulimit -a
env | sort
compgen -v | sort | tr '\n' ' '; echo
set -o; shopt -p; trap -p
echo "pid=$$ cwd=$PWD umask=$(umask) files=$(ls -A | tr '\n' ' ')"
"""
    + WITNESS
)


def _run(sandbox: Sandbox, program: str, stdin: str = "", **kwargs: object) -> tuple[str, bool]:
    """(stdout without the witness line, whether the run was warm) of one stdin/stdout test."""
    request = ExecutionRequest(language="bash", program=program, tests=(IOTest("t", stdin, "x"),), **kwargs)
    result = sandbox.run(request)
    got = result.tests[0].got
    assert got is not None, result
    assert sandbox.wait_settled(30)
    body, _, witness = got.rstrip("\n").rpartition("\n")
    return body, witness == "1"


@pytest.fixture(scope="module", params=POLICIES)
def policy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def warm_sandbox(policy: str) -> Iterator[Sandbox]:
    """A fresh one per test: the shapes a worker commits to follow the sandbox's recent requests."""
    with Sandbox(SandboxConfig(workers=1, seccomp_policy=policy)) as sb:
        yield sb


def test_a_warm_run_sees_what_a_cold_run_sees(warm_sandbox: Sandbox, policy: str) -> None:
    runs = [_run(warm_sandbox, PROBE, "hello stdin\n") for _ in range(3)]
    with Sandbox(SandboxConfig(workers=1, seccomp_policy=policy, warm_start=False)) as cold_sandbox:
        cold = [_run(cold_sandbox, PROBE, "hello stdin\n") for _ in range(2)]
    assert [warm for _, warm in runs] == [False, True, True]  # the first request had no history
    assert [warm for _, warm in cold] == [False, False]
    reference = cold[0][0]
    assert "stdin=hello stdin" in reference and "underscore=/usr/bin/bash zero=main.sh" in reference
    assert "BASH_ENV" not in reference
    for body, _ in runs + cold:
        assert body == reference


def test_a_plain_run_starts_warm_and_its_stdout_reaches_the_parent(warm_sandbox: Sandbox) -> None:
    program = "cat; echo done\n" + WITNESS
    results = []
    for _ in range(3):
        results.append(warm_sandbox.run(ExecutionRequest(language="bash", program=program, stdin="in\n")))
        assert warm_sandbox.wait_settled(30)
    assert all(r.verdict is Verdict.PASSED for r in results), results
    assert [r.stdout for r in results] == ["in\ndone\n0\n", "in\ndone\n1\n", "in\ndone\n1\n"]


def test_only_the_first_of_several_tests_runs_warm(warm_sandbox: Sandbox) -> None:
    tests = tuple(IOTest(f"t{i}", f"{i}\n", f"{2 * i}\n") for i in range(4))
    program = "read -r n; echo $((2 * n))\n"
    for _ in range(3):
        result = warm_sandbox.run(ExecutionRequest(language="bash", program=program, tests=tests))
        assert result.verdict is Verdict.PASSED, result
        assert warm_sandbox.wait_settled(30)
    witnessed = tuple(IOTest(f"w{i}", "", "x") for i in range(3))
    result = warm_sandbox.run(ExecutionRequest(language="bash", program=WITNESS, tests=witnessed))
    assert [t.got for t in result.tests] == ["1\n", "0\n", "0\n"]  # same shape: the program is not in it


def test_a_job_of_another_shape_never_reaches_a_committed_worker(warm_sandbox: Sandbox) -> None:
    for _ in range(3):
        assert _run(warm_sandbox, "echo warm-up\n" + WITNESS)[0] == "warm-up"
    _, warm = _run(warm_sandbox, WITNESS, limits=Limits(cpu_time_s=3.0))
    assert not warm
    python = ExecutionRequest(language="python", program="print(input())", tests=(IOTest("t", "7\n", "7\n"),))
    for _ in range(8):  # the window the chooser looks back over: afterwards no bash shape is left
        assert warm_sandbox.run(python).verdict is Verdict.PASSED
        assert warm_sandbox.wait_settled(30)
    pool = warm_sandbox._pool
    assert [w.hint for queue in pool.ready.values() for w in queue] == [NO_HINT]  # the stale one retired
    assert not _run(warm_sandbox, WITNESS)[1]


@pytest.mark.parametrize(
    ("program", "limits", "verdict"),
    [
        ("echo started\nwhile :; do :; done\n", Limits(cpu_time_s=1.0, timeout_s=10.0), Verdict.TIME_LIMIT),
        ("echo started\nsleep 30\n", Limits(timeout_s=1.0), Verdict.TIME_LIMIT),
        ('echo started\nx=y; while :; do x="$x$x"; done\n', Limits(memory_mb=64), Verdict.MEMORY_LIMIT),
        (
            "echo started\nhead -c 9000000 /dev/zero > big\necho $?\n",
            Limits(max_file_mb=1),
            Verdict.WRONG_ANSWER,
        ),
    ],
    ids=["cpu", "wall", "memory", "file-size"],
)
def test_a_warm_run_keeps_the_jobs_limits(
    warm_sandbox: Sandbox, program: str, limits: Limits, verdict: Verdict
) -> None:
    request = ExecutionRequest(language="bash", program=program, tests=(IOTest("t", "", "x"),), limits=limits)
    results = []
    before = warm_sandbox._pool.warm_starts
    for _ in range(3):
        results.append(warm_sandbox.run(request))
        assert warm_sandbox.wait_settled(30)
    assert [r.verdict for r in results] == [verdict] * 3, results
    assert all((r.tests[0].got or "").startswith("started\n") for r in results), results
    assert warm_sandbox._pool.warm_starts == before + 2  # runs 2 and 3 started warm


@pytest.mark.parametrize("warm_start", [True, False])
def test_a_stdin_larger_than_the_file_size_limit_is_read_in_full(policy: str, warm_start: bool) -> None:
    """RLIMIT_FSIZE applies to the memfd that holds a program's stdin: the harness writes it before it
    lowers that limit (``spawn.stdin_memfd``), and such a job never starts warm (``warm.hint``)."""
    test = IOTest("t", "x" * 2_000_000, "2000000\n")
    request = ExecutionRequest(
        language="bash", program="wc -c\n", tests=(test,), limits=Limits(max_file_mb=1)
    )
    with Sandbox(SandboxConfig(workers=1, seccomp_policy=policy, warm_start=warm_start)) as sandbox:
        for _ in range(2):
            assert sandbox.run(request).verdict is Verdict.PASSED
            assert sandbox.wait_settled(30)
        assert sandbox._pool.warm_starts == 0
