"""The hostile Bash program of ``test_language_hazards.py``, each mode as the first (warm) run of its own
request (``sandbox/zygote/warm.py``): a runtime pre-started before the job is inside the same jail, filter and
limits. Escapes are denied, the memory bomb is the cgroup's OOM kill, the fork bomb is stopped, and
nothing survives; ``warm_starts`` proves the second request of each mode started warm."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_programs import PROGRAMS
from security_helpers import assert_no_survivors, host_file_absent

from execrl.sandbox import ExecutionRequest, IOTest, Limits, Sandbox, SandboxConfig, Verdict
from execrl.sandbox.host.runner import Driver, build_job
from execrl.sandbox.judge.verdicts import assemble
from execrl.sandbox.langs.registry import get_language
from execrl.sandbox.zygote.seccomp import POLICIES
from execrl.sandbox.zygote.warm import NO_HINT

DENIED = "write denied\nshadow denied\nsecret denied\nnet denied\n"
LIMITS = Limits(memory_mb=128, max_processes=32, timeout_s=10.0, cpu_time_s=5.0)


@pytest.fixture(params=POLICIES)
def warm_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=1, seccomp_policy=request.param)) as sb:
        yield sb
        assert_no_survivors(sb)


def _twice(sandbox: Sandbox, test: IOTest) -> list[Verdict]:
    """The request run twice, the second time warm; both verdicts."""
    request = ExecutionRequest(language="bash", program=PROGRAMS["bash"], tests=(test,), limits=LIMITS)
    before = sandbox._pool.warm_starts
    verdicts = []
    for _ in range(2):
        result = sandbox.run(request)
        assert sandbox.wait_settled(30)
        assert "host-secret" not in result.stdout + result.stderr
        verdicts.append(result.tests[0].verdict)
    assert sandbox._pool.warm_starts == before + 1
    return verdicts


def test_warm_escapes_are_denied(warm_sandbox: Sandbox, tmp_path: Path, listener: socket.socket) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret\n")
    target = f"/usr/lib/execrl-escape-warm-{tmp_path.name}"
    port = listener.getsockname()[1]
    test = IOTest("escape", f"escape {secret} {port} {target}\n", DENIED, compare="exact")
    assert _twice(warm_sandbox, test) == [Verdict.PASSED, Verdict.PASSED]
    assert host_file_absent(target)
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_a_warm_memory_bomb_is_killed(warm_sandbox: Sandbox) -> None:
    assert _twice(warm_sandbox, IOTest("memory", "memory\n", "")) == [Verdict.MEMORY_LIMIT] * 2


def test_a_warm_fork_bomb_is_stopped(warm_sandbox: Sandbox) -> None:
    stopped = (Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR, Verdict.TIME_LIMIT)
    assert all(v in stopped for v in _twice(warm_sandbox, IOTest("fork", "fork\n", "refused\n")))


def test_a_job_of_another_shape_on_a_committed_worker_fails_closed(warm_sandbox: Sandbox) -> None:
    """The pool never does this (``acquire`` matches shapes); if it did, the harness, already under
    Bash's filter and the shape's rlimits, refuses the job instead of running it under them."""
    _twice(warm_sandbox, IOTest("escape", "escape /nonexistent 1 /usr/lib/x\n", DENIED))
    pool = warm_sandbox._pool
    with pool.cond:
        worker = next(w for queue in pool.ready.values() for w in queue if w.hint != NO_HINT)
        pool.ready[worker.key].remove(worker)
    request = ExecutionRequest(language="python", program="print(1)", tests=(IOTest("t", "", "1\n"),))
    language = get_language("python")
    try:
        state = Driver(worker, pool.slot(worker), request, language, pool.wait_exit).run(
            build_job(request, language), lambda record: None
        )
    finally:
        pool.release(worker)
    result = assemble(request, state, None)
    assert result.verdict is Verdict.SANDBOX_ERROR, result
    assert "another shape" in (result.sandbox_error or ""), result
