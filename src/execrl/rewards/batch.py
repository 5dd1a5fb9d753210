"""Score a batch of completions: prepare all, run every program in ONE sandbox batch call, finish all.

Why one call: a sandbox batch runs requests concurrently on its worker pool; verifiers that call the
sandbox one by one leave it idle (the reward stage then dominates the step: verl #1130, fastrl #6). The
phases are public (``prepare_batch`` / ``finish_batch``) so a streaming caller or a benchmark can run the
sandbox itself and time it.

Failure policy: a verifier that raises, or a sandbox error result, yields ``Score(valid=False)`` with the
reason (exception type and message, or the sandbox's own message): excluded from the advantage, counted
in ``reward/invalid_rate`` and ``reward/reason/*``, never a silent 0 and never a crashed training step.
Configuration errors (an unknown domain, mismatched lengths) raise before any work is done.

With ``RewardConfig.with_audit`` each request of a task with audit tests carries them too, and
``finish_batch`` scores both splits of its result (``blind.py``: the blind audit).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from execrl.rewards.blind import BlindPlan, audit_config, blind_plan, carries_plan, restrict
from execrl.rewards.registry import get_verifier
from execrl.rewards.types import RewardConfig, Score, Verifier
from execrl.sandbox.errors import InvalidRequestError, SandboxFailure
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, Verdict
from execrl.tasks.schema import audit_view

if TYPE_CHECKING:
    from execrl.tasks.schema import Task

logger = logging.getLogger(__name__)
ERROR_MAX_CHARS = 300  # of an exception message quoted in a Score reason


class SyncRunner(Protocol):
    """What ``score_batch`` needs from a sandbox (``execrl.sandbox.Sandbox`` satisfies it)."""

    def run_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]: ...


class AsyncRunner(Protocol):
    """What ``ascore_batch`` needs from a sandbox."""

    async def arun_batch(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]: ...


@dataclass(frozen=True)
class PreparedBatch:
    """The outcome of ``prepare_batch``: scores decided without running, and the requests still to run.

    ``decided[i]`` is the score of completion ``i`` or ``None`` when it waits for ``requests[j]`` with
    ``request_index[j] == i``; ``plans[j]`` says how ``requests[j]`` carries its task's audit tests
    (``None``: it does not).
    """

    tasks: tuple[Task, ...]
    completions: tuple[str, ...]
    verifiers: tuple[Verifier, ...]
    decided: tuple[Score | None, ...]
    requests: tuple[ExecutionRequest, ...]
    request_index: tuple[int, ...]
    plans: tuple[BlindPlan | None, ...] = ()


def _guarded(phase: str, call: Callable[..., object], *args: object) -> object:
    """Run one verifier phase; any exception becomes an invalid score that records its type and message.

    The only broad ``except`` of the rewards package, on purpose: verifiers are user code that may raise
    anything, and one bad sample must not crash a training step. Nothing is swallowed: the reason carries
    the error, metrics count it, the traceback is logged at DEBUG level.
    """
    try:
        return call(*args)
    except Exception as exc:  # noqa: BLE001 - user-code boundary, see the docstring
        logger.debug("verifier %s raised", phase, exc_info=True)
        message = str(exc) if len(str(exc)) <= ERROR_MAX_CHARS else str(exc)[: ERROR_MAX_CHARS - 3] + "..."
        return Score.invalid(f"verifier_error: {phase}: {type(exc).__name__}: {message}")


def prepare_batch(tasks: Sequence[Task], completions: Sequence[str], config: RewardConfig) -> PreparedBatch:
    """Phase 1: route each completion to its domain's verifier and prepare it (no sandbox call)."""
    if len(tasks) != len(completions):
        raise ValueError(
            f"got {len(tasks)} tasks but {len(completions)} completions; pass one task per completion"
        )
    verifiers = tuple(get_verifier(task.domain) for task in tasks)  # unknown domain: raise now
    decided: list[Score | None] = []
    requests: list[ExecutionRequest] = []
    request_index: list[int] = []
    plans: list[BlindPlan | None] = []
    for i, (task, completion, verifier) in enumerate(zip(tasks, completions, verifiers, strict=True)):
        plan = blind_plan(task) if config.with_audit and config.use_hidden_tests else None
        outcome = _guarded("prepare", verifier.prepare, plan.task if plan else task, completion, config)
        if plan is not None and isinstance(outcome, ExecutionRequest) and not carries_plan(outcome, plan):
            plan = None  # the verifier built tests of its own: the audit runs apart (blind.py)
            outcome = _guarded("prepare", verifier.prepare, task, completion, config)
        if isinstance(outcome, ExecutionRequest):
            requests.append(outcome)
            request_index.append(i)
            plans.append(plan)
            decided.append(None)
        elif isinstance(outcome, Score):
            decided.append(outcome)
        else:
            kind = type(outcome).__name__
            decided.append(
                Score.invalid(f"verifier_error: prepare returned {kind}, not a Score or ExecutionRequest")
            )
    return PreparedBatch(
        tuple(tasks),
        tuple(completions),
        verifiers,
        tuple(decided),
        tuple(requests),
        tuple(request_index),
        tuple(plans),
    )


def finish_batch(
    prepared: PreparedBatch, results: Sequence[ExecutionResult | Score], config: RewardConfig
) -> list[Score]:
    """Phase 3: turn the sandbox results (in request order) into scores, in the batch's input order.

    A ``Score`` in place of a result is taken as it is (a request the sandbox rejected, see ``run_requests``).
    """
    if len(results) != len(prepared.requests):
        raise RuntimeError(
            f"the sandbox returned {len(results)} results for {len(prepared.requests)} requests; "
            "run_batch must return one result per request, in order"
        )
    scores = list(prepared.decided)
    plans = prepared.plans or (None,) * len(results)
    for index, result, plan in zip(prepared.request_index, results, plans, strict=True):
        if isinstance(result, Score):
            scores[index] = result
            continue
        verifier = prepared.verifiers[index]
        task, completion = prepared.tasks[index], prepared.completions[index]
        if plan is None:
            scores[index] = _finish(verifier, task, completion, result, config)
            continue
        score = _finish(verifier, task, completion, restrict(result, plan.reward), config)
        audit = _finish(
            verifier, audit_view(task), completion, restrict(result, plan.audit), audit_config(config)
        )
        scores[index] = dataclasses.replace(score, audit=audit)
    missing = [i for i, score in enumerate(scores) if score is None]
    if missing:
        raise RuntimeError(
            f"completions {missing} were neither decided nor sent to the sandbox (a PreparedBatch bug)"
        )
    return [score for score in scores if score is not None]


def _finish(
    verifier: Verifier, task: Task, completion: str, result: ExecutionResult, config: RewardConfig
) -> Score:
    outcome = _guarded("finish", verifier.finish, task, completion, result, config)
    if not isinstance(outcome, Score):
        return Score.invalid(f"verifier_error: finish returned {type(outcome).__name__}, not a Score")
    return outcome


def _rejected(exc: InvalidRequestError) -> Score:
    return Score.invalid(f"verifier_error: the sandbox rejected the request: {exc}")


def _failed(count: int, exc: SandboxFailure) -> list[ExecutionResult | Score]:
    """A batch the sandbox could not run at all: each one a SANDBOX_ERROR (invalid, not 0)."""
    message = f"batch failed: {type(exc).__name__}: {exc}"
    return [ExecutionResult(verdict=Verdict.SANDBOX_ERROR, sandbox_error=message) for _ in range(count)]


def run_requests(runner: SyncRunner, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult | Score]:
    """One ``run_batch`` call; on ``InvalidRequestError`` (the sandbox validates the whole batch before
    running any of it) the batch is bisected so that only the rejected requests become invalid scores
    and the rest still run. A ``SandboxFailure`` of the whole call makes every result a sandbox error."""
    try:
        return list(runner.run_batch(list(requests)))
    except SandboxFailure as exc:
        return _failed(len(requests), exc)
    except InvalidRequestError as exc:
        if len(requests) == 1:
            return [_rejected(exc)]
    middle = len(requests) // 2
    return run_requests(runner, requests[:middle]) + run_requests(runner, requests[middle:])


async def arun_requests(
    runner: AsyncRunner, requests: Sequence[ExecutionRequest]
) -> list[ExecutionResult | Score]:
    """The asyncio twin of ``run_requests`` (one ``arun_batch`` call unless a request is rejected)."""
    try:
        return list(await runner.arun_batch(list(requests)))
    except SandboxFailure as exc:
        return _failed(len(requests), exc)
    except InvalidRequestError as exc:
        if len(requests) == 1:
            return [_rejected(exc)]
    middle = len(requests) // 2
    return await arun_requests(runner, requests[:middle]) + await arun_requests(runner, requests[middle:])


def _default_sandbox() -> SyncRunner:
    from execrl.sandbox import default_sandbox  # lazy: starting the pool is costly and only needed here

    runner: SyncRunner = default_sandbox()
    return runner


def score_batch(
    tasks: Sequence[Task],
    completions: Sequence[str],
    *,
    sandbox: SyncRunner | None = None,
    config: RewardConfig | None = None,
) -> list[Score]:
    """Score ``completions[i]`` for ``tasks[i]``; code runs in one ``sandbox.run_batch`` call.

    ``sandbox=None`` uses ``execrl.sandbox.default_sandbox()`` (started only if some code must run).
    """
    config = config or RewardConfig()
    prepared = prepare_batch(tasks, completions, config)
    results: list[ExecutionResult | Score] = []
    if prepared.requests:
        results = run_requests(sandbox if sandbox is not None else _default_sandbox(), prepared.requests)
    return finish_batch(prepared, results, config)


async def ascore_batch(
    tasks: Sequence[Task],
    completions: Sequence[str],
    *,
    sandbox: AsyncRunner | None = None,
    config: RewardConfig | None = None,
) -> list[Score]:
    """The asyncio twin of ``score_batch`` (one ``await sandbox.arun_batch`` call)."""
    config = config or RewardConfig()
    prepared = prepare_batch(tasks, completions, config)
    results: list[ExecutionResult | Score] = []
    if prepared.requests:
        runner = sandbox if sandbox is not None else _default_async_sandbox()
        results = await arun_requests(runner, prepared.requests)
    return finish_batch(prepared, results, config)


def _default_async_sandbox() -> AsyncRunner:
    from execrl.sandbox import default_sandbox

    runner: AsyncRunner = default_sandbox()
    return runner


def check_scorer(tasks: Sequence[Task], completions: Sequence[str], hidden: bool) -> list[Score]:
    """Binary rewards on the hidden tests (``hidden``) or on the visible ones: the real reward path that
    ``execrl.tasks.check_tasks`` proves a suite's references and wrong answers against (``execrl tasks
    check``), in the default sandbox."""
    return score_batch(tasks, completions, config=RewardConfig(use_hidden_tests=hidden))
