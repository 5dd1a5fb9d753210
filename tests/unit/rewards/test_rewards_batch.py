"""score_batch / ascore_batch: one sandbox call per batch, input order, invalid scores instead of crashes."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

import pytest

from execrl.rewards import (
    RewardConfig,
    Score,
    UnknownVerifierError,
    ascore_batch,
    register_verifier,
    reward_metrics,
    score_batch,
    unregister_verifier,
)
from execrl.sandbox.errors import InvalidRequestError, SandboxFailure
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, Verdict
from execrl.tasks.schema import MathSpec, Task, TaskMetadata

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
BROKEN_WORKER = "```python\ndef add(a, b):\n    return 'sandbox breaks on this one'\n```"


class FakeSandbox:
    """Decides by program text: '+' passes, 'sandbox breaks' is a SANDBOX_ERROR, anything else is wrong.
    Records every call so the tests can assert that a batch is ONE call."""

    def __init__(self, *, fail_with: Exception | None = None) -> None:
        self.batches: list[list[ExecutionRequest]] = []
        self.fail_with = fail_with

    def _one(self, request: ExecutionRequest) -> ExecutionResult:
        if "sandbox breaks" in request.program:
            return ExecutionResult(verdict=Verdict.SANDBOX_ERROR, sandbox_error="worker 3 died")
        verdict = Verdict.PASSED if "a + b" in request.program else Verdict.WRONG_ANSWER
        return ExecutionResult(verdict=verdict)

    def run_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        self.batches.append(list(requests))
        if self.fail_with is not None:
            raise self.fail_with
        for request in requests:  # like the real sandbox: validate the whole batch before running any
            if request.language != "python":
                raise InvalidRequestError(f"unknown language {request.language!r}")
        return [self._one(r) for r in requests]

    async def arun_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        await asyncio.sleep(0)
        return self.run_batch(requests)


def _math(answer: str) -> Task:
    return Task(id=f"m{answer}", domain="math", prompt="?", spec=MathSpec(answer), metadata=TaskMetadata("t"))


def test_mixed_batch_keeps_input_order_and_makes_one_sandbox_call(
    make_code_task: Callable[..., Task],
) -> None:
    code = make_code_task()
    tasks = [code, _math("3/4"), code, code, _math("2"), code]
    completions = [RIGHT, "answer: 0.75", WRONG, "no code here", "answer: 3", RIGHT]
    sandbox = FakeSandbox()
    scores = score_batch(tasks, completions, sandbox=sandbox)
    assert [s.reason_code for s in scores] == [
        "passed",
        "passed",
        "wrong_answer",
        "no_code_found",
        "wrong_answer",
        "passed",
    ]
    assert [s.reward for s in scores] == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    assert len(sandbox.batches) == 1 and len(sandbox.batches[0]) == 3  # the three compilable programs


def test_no_code_tasks_never_touch_the_sandbox() -> None:
    class NoSandbox:
        def run_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
            raise AssertionError("must not be called")

    scores = score_batch([_math("1")], ["answer: 1"], sandbox=NoSandbox())
    assert scores[0].passed


def test_sandbox_error_result_is_invalid_and_counted(make_code_task: Callable[..., Task]) -> None:
    code = make_code_task()
    scores = score_batch([code, code], [BROKEN_WORKER, RIGHT], sandbox=FakeSandbox())
    assert scores[0] == Score.invalid("sandbox_error: worker 3 died", execution=scores[0].execution)
    assert scores[1].passed
    metrics = reward_metrics(scores)
    assert metrics["reward/invalid_rate"] == 0.5
    assert metrics["reward/mean"] == 1.0  # over valid scores only
    assert metrics["reward/reason/sandbox_error"] == 1.0


def test_a_whole_batch_sandbox_failure_makes_every_code_score_invalid(
    make_code_task: Callable[..., Task],
) -> None:
    code = make_code_task()
    sandbox = FakeSandbox(fail_with=SandboxFailure("zygote lost"))
    scores = score_batch([code, _math("1"), code], [RIGHT, "answer: 1", WRONG], sandbox=sandbox)
    assert [s.valid for s in scores] == [False, True, False]
    assert scores[0].reason == "sandbox_error: batch failed: SandboxFailure: zygote lost"


def test_a_rejected_request_is_isolated_and_the_rest_still_run(make_code_task: Callable[..., Task]) -> None:
    """Regression: one task with an unsupported language must not take the whole batch down."""
    code = make_code_task()
    cobol = dataclasses.replace(code, id="cobol", spec=dataclasses.replace(code.spec, language="cobol"))
    tasks = [code, code, cobol, code, code]
    completions = [RIGHT, WRONG, "```cobol\nDISPLAY 'HI'.\n```", RIGHT, WRONG]
    sandbox = FakeSandbox()
    scores = score_batch(tasks, completions, sandbox=sandbox)
    assert [s.reason_code for s in scores] == [
        "passed",
        "wrong_answer",
        "verifier_error",
        "passed",
        "wrong_answer",
    ]
    assert scores[2].reason == "verifier_error: the sandbox rejected the request: unknown language 'cobol'"
    assert not scores[2].valid
    # 1 full try, then halves [2] and [3]; the half with cobol splits again down to it alone
    assert sum(len(b) for b in sandbox.batches) < 3 * len(tasks)
    async_scores = asyncio.run(ascore_batch(tasks, completions, sandbox=FakeSandbox()))
    assert async_scores == scores


def test_a_raising_verifier_gives_an_invalid_score_with_type_and_message() -> None:
    @register_verifier("test_batch_raises")
    def explode(task: Task, completion: str, config: RewardConfig) -> Score:
        """Raises on 'boom'."""
        if completion == "boom":
            raise KeyError("missing field")
        return Score(1.0, True, True, 1.0, "passed")

    try:
        task = Task("t", "test_batch_raises", "?", MathSpec("1"), TaskMetadata("f"))
        scores = score_batch([task, task, task], ["ok", "boom", "ok"])
    finally:
        unregister_verifier("test_batch_raises")
    assert [s.valid for s in scores] == [True, False, True]
    assert scores[1].reason == "verifier_error: prepare: KeyError: 'missing field'"
    assert reward_metrics(scores)["reward/reason/verifier_error"] == 1.0


def test_a_raising_finish_is_invalid_too(make_code_task: Callable[..., Task]) -> None:
    class HalfBroken:
        """prepare works, finish raises."""

        def prepare(self, task: Task, completion: str, config: RewardConfig) -> ExecutionRequest:
            return ExecutionRequest(language="python", program="print(1)")

        def finish(self, task: Task, completion: str, result: ExecutionResult, config: RewardConfig) -> Score:
            raise ZeroDivisionError("bad mapping")

    register_verifier("test_batch_finish", HalfBroken())
    try:
        task = Task("t", "test_batch_finish", "?", MathSpec("1"), TaskMetadata("f"))
        scores = score_batch([task], ["x"], sandbox=FakeSandbox())
    finally:
        unregister_verifier("test_batch_finish")
    assert (
        scores[0].reason == "verifier_error: finish: ZeroDivisionError: bad mapping" and not scores[0].valid
    )


def test_a_broken_task_is_one_invalid_score_not_a_crash(make_code_task: Callable[..., Task]) -> None:
    no_tests = make_code_task(hidden=())
    scores = score_batch([no_tests, make_code_task()], [RIGHT, RIGHT], sandbox=FakeSandbox())
    assert scores[0].reason.startswith("verifier_error: prepare: ValueError: task 'add' has no hidden_tests")
    assert scores[1].passed


def test_unknown_domain_and_length_mismatch_raise_before_any_work(
    make_code_task: Callable[..., Task],
) -> None:
    sandbox = FakeSandbox()
    unknown = Task("t", "chess", "?", MathSpec("1"), TaskMetadata("f"))
    with pytest.raises(UnknownVerifierError, match="known domains: code"):
        score_batch([make_code_task(), unknown], [RIGHT, "e4"], sandbox=sandbox)
    with pytest.raises(ValueError, match="got 1 tasks but 2 completions"):
        score_batch([make_code_task()], [RIGHT, RIGHT], sandbox=sandbox)
    assert sandbox.batches == []


def test_a_sandbox_returning_the_wrong_count_raises(make_code_task: Callable[..., Task]) -> None:
    class Short(FakeSandbox):
        def run_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
            return super().run_batch(requests)[:-1]

    with pytest.raises(RuntimeError, match="returned 1 results for 2 requests"):
        score_batch([make_code_task()] * 2, [RIGHT, WRONG], sandbox=Short())


def test_async_twin_matches_the_sync_one(make_code_task: Callable[..., Task]) -> None:
    code = make_code_task()
    tasks, completions = [code, _math("1"), code, code], [WRONG, "answer: 1", RIGHT, BROKEN_WORKER]
    sync_scores = score_batch(tasks, completions, sandbox=FakeSandbox())
    sandbox = FakeSandbox()
    async_scores = asyncio.run(ascore_batch(tasks, completions, sandbox=sandbox))
    assert async_scores == sync_scores and len(sandbox.batches) == 1


def test_reward_metrics_hand_computed() -> None:
    scores = [
        Score(1.0, True, True, 1.0, "passed"),
        Score(0.0, True, False, 0.5, "wrong_answer: t1"),
        Score(0.5, True, False, 0.5, "wrong_answer: t2"),
        Score.invalid("sandbox_error: x"),
    ]
    metrics = reward_metrics(scores, domains=["code", "code", "math", "math"])
    # valid rewards 1, 0, 0.5: mean 0.5, population std sqrt(((0.5)^2 + (0.5)^2 + 0) / 3) = sqrt(1/6)
    assert metrics["reward/mean"] == 0.5
    assert metrics["reward/std"] == pytest.approx((1 / 6) ** 0.5)
    assert metrics["reward/pass_rate"] == pytest.approx(1 / 3)
    assert metrics["reward/pass_fraction_mean"] == pytest.approx(2 / 3)
    assert metrics["reward/invalid_rate"] == 0.25 and metrics["reward/count"] == 4.0
    assert metrics["reward/reason/wrong_answer"] == 2.0 and metrics["reward/reason/passed"] == 1.0
    assert metrics["reward/code/mean"] == 0.5 and metrics["reward/math/invalid_rate"] == 0.5
    assert reward_metrics([]) == {"reward/count": 0.0}
    assert "reward/mean" not in reward_metrics([Score.invalid("sandbox_error")])


def test_a_long_exception_message_is_cut_in_the_reason() -> None:
    @register_verifier("test_batch_long_error")
    def explode(task: Task, completion: str, config: RewardConfig) -> Score:
        """Raises with a 10,000-character message."""
        raise RuntimeError("x" * 10_000)

    try:
        task = Task("t", "test_batch_long_error", "?", MathSpec("1"), TaskMetadata("f"))
        (score,) = score_batch([task], ["a"])
    finally:
        unregister_verifier("test_batch_long_error")
    assert score.reason == "verifier_error: prepare: RuntimeError: " + "x" * 297 + "..."
