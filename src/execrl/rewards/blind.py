"""The blind audit: a completion's reward tests and its task's audit tests run in ONE execution, so no
run is ever an "audit run" that a program could tell apart and behave well in.

Why: the audit (``execrl.rewards.audit``) is a measurement, and it only measures the reward's runs if
the program cannot tell it is being measured. With a separate audit run a program could: the test names
(``hidden_3`` vs ``audit_1``) sat on the Python harness's stack, the number of tests differed (7 in a
reward run, 4 in an audit), and the n-th run of one execution shares its work directory with the ones
before (a counter file), so "behave from run 5 on" was never audited. Now every execution the reward
scores (``RewardConfig.with_audit``) carries both splits:

* shuffled afresh per execution from the OS's randomness (``random.SystemRandom``: a program that knows
  this code still cannot compute the order), under opaque names (``t0``, ``t1``...; the sandbox sends
  no test name into the jail at all, ``sandbox.runner._test_dict``);
* the same tests, the same count and the same shape in every execution of a task: there is only one
  kind of run;
* the reward reads its subset (``restrict``: the hidden tests, renamed back, in their order) and the
  audit reads its own, each through the task's own verifier (``finish``), so a registered verifier needs
  no change as long as its request runs ``task.hidden_tests`` as given.

What "indistinguishable" covers: everything a program can observe from inside the sandbox (test names,
count, order, position of a run, the inputs of the other tests, its limits, its work directory) is
drawn from the same distribution whether or not its audit tests are the ones being read, because they
always are. What remains: a program can still recognise inputs it has memorised (the reward's tests
leak into a policy only through its reward; that is the hack the audit catches, since the audit inputs
are ones it never saw); and the two splits share the execution's limits (CPU, wall clock, output,
processes, memory), so a program that exhausts one during an audit test loses the reward tests that had
not run yet: the one way audit tests can move the reward, through resource exhaustion only, never
through values. Cost: the audit tests' own run time in every scored execution (a few milliseconds per
execution for call tests, one program run per io test; ``execrl bench audit`` measures it) instead of
a separate execution for a sampled share.

Not blind (the audit falls back to a separate run, ``execrl.rewards.audit.run_audit``): a verifier whose
request does not run the task's hidden tests unchanged, and requests with ``stop_on_first_failure``
(the reward's tests after the first audit failure would go unreported).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass

from execrl.rewards.types import RewardConfig
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, TestCase, Verdict, overall_verdict
from execrl.tasks.schema import Task

__all__ = ["BlindPlan", "audit_config", "blind_plan", "carries_plan", "restrict"]

_SHUFFLE = random.SystemRandom()


@dataclass(frozen=True)
class BlindPlan:
    """One execution's combined tests: ``task`` is the view the verifier prepares (its ``hidden_tests``
    are both splits, shuffled, named ``t<position>``); ``reward``/``audit`` map each split's opaque
    names to the original names, in the split's own order."""

    task: Task
    reward: Mapping[str, str]
    audit: Mapping[str, str]


def blind_plan(task: Task, rng: random.Random = _SHUFFLE) -> BlindPlan | None:
    """The combined view of ``task``, or ``None`` when it has no audit split (nothing to hide)."""
    if not task.audit_tests or not task.hidden_tests:
        return None
    tagged = [("reward", t) for t in task.hidden_tests] + [("audit", t) for t in task.audit_tests]
    order = list(range(len(tagged)))
    rng.shuffle(order)
    combined: list[TestCase] = [dataclasses.replace(tagged[k][1], name=f"t{p}") for p, k in enumerate(order)]
    opaque = {k: f"t{p}" for p, k in enumerate(order)}
    n_reward = len(task.hidden_tests)
    reward = {opaque[k]: tagged[k][1].name for k in range(n_reward)}
    audit = {opaque[k]: tagged[k][1].name for k in range(n_reward, len(tagged))}
    return BlindPlan(dataclasses.replace(task, hidden_tests=tuple(combined)), reward, audit)


def carries_plan(request: ExecutionRequest, plan: BlindPlan) -> bool:
    """Whether the verifier's request runs exactly the combined tests (so each split can be read back)."""
    return not request.stop_on_first_failure and request.tests == plan.task.hidden_tests


def restrict(result: ExecutionResult, names: Mapping[str, str]) -> ExecutionResult:
    """``result`` as one split sees it: only the tests in ``names`` (opaque -> original name), renamed
    back, in that order, and a verdict from those tests plus how the run as a whole ended (a compile
    error, a sandbox error, an output limit no test carries). Output, times and files stay the run's.

    A split test with no result (only a run stopped early) can never make the split pass."""
    by_name = {t.name: t for t in result.tests}
    tests = tuple(
        dataclasses.replace(by_name[n], name=original) for n, original in names.items() if n in by_name
    )
    verdicts = [t.verdict for t in tests]
    if result.verdict not in {t.verdict for t in result.tests} or len(tests) < len(names):
        verdicts.append(result.verdict)  # a run-wide outcome (or a missing test) applies to both splits
    verdict = overall_verdict(verdicts)
    return dataclasses.replace(
        result,
        verdict=verdict,
        tests=tests,
        limit_kind=result.limit_kind if verdict is Verdict.TIME_LIMIT else None,
        sandbox_error=result.sandbox_error if verdict is Verdict.SANDBOX_ERROR else None,
    )


def audit_config(config: RewardConfig) -> RewardConfig:
    """How the audit split is scored: all-pass (binary) on the tests it is given, never with audit tests
    of its own."""
    return dataclasses.replace(config, mode="binary", use_hidden_tests=True, with_audit=False)
