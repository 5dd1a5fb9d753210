"""Every reference answer passes its hidden tests in the real sandbox and every wrong answer fails them.

This is what ``execrl tasks check`` proves through the reward path; here the requests are built directly
from the specs (answer code extracted from its fence) so that a failure points at the suite, not at the
reward verifier. Math and structured answers are not executed; ``test_suite_solutions`` checks them.
"""

from __future__ import annotations

import time

import pytest
from suite_checks import fenced_code, suite_tasks

from execrl.sandbox import ExecutionRequest, Sandbox, SandboxConfig
from execrl.sandbox.types import Verdict
from execrl.tasks.schema import CodeSpec, Task

CODE_SUITES = ("functions", "stdio", "repository")


def _request(task: Task, answer: str) -> ExecutionRequest:
    spec = task.spec
    assert isinstance(spec, CodeSpec)
    repo = spec.kind == "repository"
    return ExecutionRequest(
        language=spec.language,
        program=fenced_code(answer),
        tests=task.hidden_tests,
        files=spec.files if repo else {},
        program_path=spec.program_path if repo else None,
    )


@pytest.mark.slow
def test_references_pass_and_wrong_answers_fail_in_the_sandbox():
    tasks = [t for name in CODE_SUITES for split in ("train", "test") for t in suite_tasks(name, split)]
    requests = [_request(t, answer) for t in tasks for answer in (t.reference_solution, t.wrong_solution)]
    start = time.perf_counter()
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        results = sandbox.run_batch(requests)
    elapsed_s = time.perf_counter() - start
    print(f"\n{len(tasks)} tasks, {len(requests)} executions in {elapsed_s:.1f} s")
    sandbox_errors = [
        (t.id, r.sandbox_error) for t, r in zip(tasks, results[::2], strict=True) if r.is_sandbox_error
    ]
    sandbox_errors += [
        (t.id, r.sandbox_error) for t, r in zip(tasks, results[1::2], strict=True) if r.is_sandbox_error
    ]
    assert sandbox_errors == []
    failed_references = [
        (
            t.id,
            r.verdict,
            [(x.name, x.error_message or x.got) for x in r.tests if x.verdict is not Verdict.PASSED][:2],
        )
        for t, r in zip(tasks, results[::2], strict=True)
        if not r.passed
    ]
    assert failed_references == []
    passing_wrong = [t.id for t, r in zip(tasks, results[1::2], strict=True) if r.passed]
    assert passing_wrong == []
