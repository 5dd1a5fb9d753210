"""The blind audit's bookkeeping (``rewards/blind.py``): one execution carries both splits, each split
is read back by name with its own verdict, and a verifier that builds its own tests falls back."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from execrl.rewards import RewardConfig, Score, score_batch
from execrl.rewards.blind import blind_plan, restrict
from execrl.rewards.registry import register_verifier
from execrl.sandbox import types
from execrl.sandbox.types import CallTest, ExecutionRequest, ExecutionResult, Verdict
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata

TASK = Task(
    "fn/1",
    "code",
    "p",
    CodeSpec(kind="function", entry_point="f"),
    TaskMetadata("fam"),
    hidden_tests=tuple(CallTest(f"h{k}", "f", (k,), expected=k * k) for k in range(3)),
    audit_tests=tuple(CallTest(f"a{k}", "f", (10 + k,), expected=(10 + k) ** 2) for k in range(2)),
)
SQUARE = "```python\ndef f(x):\n    return x * x\n```"
MEMO = "```python\ndef f(x):\n    return {0: 0, 1: 1, 2: 4}.get(x, -1)\n```"


def _result(verdicts: dict[str, Verdict], overall: Verdict | None = None) -> ExecutionResult:
    tests = tuple(types.TestResult(name, verdict) for name, verdict in verdicts.items())
    worst = overall or min((t.verdict for t in tests), key=list(Verdict).index, default=Verdict.PASSED)
    return ExecutionResult(worst, tests=tests)


def test_the_plan_shuffles_both_splits_under_opaque_names() -> None:
    plan = blind_plan(TASK, random.Random(3))
    assert plan is not None
    combined = plan.task.hidden_tests
    assert [t.name for t in combined] == ["t0", "t1", "t2", "t3", "t4"]
    assert sorted(plan.reward.values()) == ["h0", "h1", "h2"] and sorted(plan.audit.values()) == ["a0", "a1"]
    originals = {t.name: t for t in (*TASK.hidden_tests, *TASK.audit_tests)}
    for test in combined:  # the same test under its opaque name
        name = {**plan.reward, **plan.audit}[test.name]
        assert dataclasses.replace(originals[name], name=test.name) == test
    orders = {tuple(t.args for t in blind_plan(TASK).task.hidden_tests) for _ in range(40)}  # type: ignore[union-attr]
    assert len(orders) > 1  # drawn afresh per execution
    assert blind_plan(dataclasses.replace(TASK, audit_tests=())) is None


def test_each_split_gets_its_own_verdict_in_its_own_order() -> None:
    plan = blind_plan(TASK, random.Random(0))
    assert plan is not None
    verdicts = {name: Verdict.PASSED for name in plan.reward} | {
        name: Verdict.WRONG_ANSWER for name in plan.audit
    }
    result = _result(verdicts)
    reward, audit = restrict(result, plan.reward), restrict(result, plan.audit)
    assert reward.verdict is Verdict.PASSED and [t.name for t in reward.tests] == list(plan.reward.values())
    assert audit.verdict is Verdict.WRONG_ANSWER and {t.name for t in audit.tests} == {"a0", "a1"}


def test_a_run_wide_outcome_or_a_missing_test_reaches_both_splits() -> None:
    plan = blind_plan(TASK, random.Random(0))
    assert plan is not None
    passed = {name: Verdict.PASSED for name in (*plan.reward, *plan.audit)}
    broken = dataclasses.replace(_result(passed, Verdict.SANDBOX_ERROR), sandbox_error="harness ended early")
    for split in (plan.reward, plan.audit):
        view = restrict(broken, split)
        assert view.verdict is Verdict.SANDBOX_ERROR and view.sandbox_error == "harness ended early"
    first_audit = next(iter(plan.audit))
    missing = {name: v for name, v in passed.items() if name != first_audit}
    stopped = _result(missing, Verdict.WRONG_ANSWER)  # a run stopped early never passes a split
    assert restrict(stopped, plan.audit).verdict is Verdict.WRONG_ANSWER
    timed = dataclasses.replace(_result(passed | {first_audit: Verdict.TIME_LIMIT}), limit_kind="cpu")
    assert restrict(timed, plan.audit).limit_kind == "cpu" and restrict(timed, plan.reward).limit_kind is None


class SquareSandbox:
    """Judges call tests of ``f`` by whether the program squares or memorised the reward's inputs."""

    def __init__(self) -> None:
        self.requests: list[ExecutionRequest] = []

    def run_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        self.requests.extend(requests)
        out = []
        for request in requests:
            memo = "get(x, -1)" in request.program
            tests = []
            for test in request.tests:
                assert isinstance(test, CallTest)
                got = {0: 0, 1: 1, 2: 4}.get(test.args[0], -1) if memo else test.args[0] ** 2
                tests.append(
                    types.TestResult(
                        test.name, Verdict.PASSED if got == test.expected else Verdict.WRONG_ANSWER
                    )
                )
            out.append(_result({t.name: t.verdict for t in tests}))
        return out


def test_score_batch_scores_the_reward_on_its_split_and_attaches_the_audit() -> None:
    sandbox = SquareSandbox()
    config = RewardConfig(mode="partial", with_audit=True)
    honest, memo = score_batch([TASK, TASK], [SQUARE, MEMO], sandbox=sandbox, config=config)
    assert [len(r.tests) for r in sandbox.requests] == [5, 5]  # one run, both splits, same count
    assert all(t.name.startswith("t") for r in sandbox.requests for t in r.tests)
    assert honest.passed and honest.audit is not None and honest.audit.passed
    assert memo.passed and memo.pass_fraction == 1.0  # the reward reads its 3 tests only
    assert memo.audit is not None and not memo.audit.passed and memo.audit.reward == 0.0  # binary
    assert memo.execution is not None and [t.name for t in memo.execution.tests] == ["h0", "h1", "h2"]
    plain = score_batch([TASK], [MEMO], sandbox=sandbox, config=RewardConfig())
    assert plain[0].audit is None and len(sandbox.requests[-1].tests) == 3


class OwnTestsVerifier:
    """A verifier that builds its own tests: its runs cannot carry the audit split."""

    def prepare(self, task: Task, completion: str, config: RewardConfig) -> ExecutionRequest:
        return ExecutionRequest(
            language="python", program=completion, tests=(CallTest("own", "f", (1,), expected=1),)
        )

    def finish(self, task: Task, completion: str, result: ExecutionResult, config: RewardConfig) -> Score:
        return Score.success(execution=result) if result.passed else Score.failure("wrong_answer")


register_verifier("own_tests_blind_test", OwnTestsVerifier())


def test_a_verifier_with_tests_of_its_own_falls_back_to_a_separate_audit() -> None:
    task = dataclasses.replace(TASK, domain="own_tests_blind_test")
    sandbox = SquareSandbox()
    (score,) = score_batch(
        [task], ["def f(x):\n    return x * x\n"], sandbox=sandbox, config=RewardConfig(with_audit=True)
    )
    assert score.passed and score.audit is None  # recipes.audit re-runs it on the audit tests
    assert [t.name for t in sandbox.requests[0].tests] == ["own"]
