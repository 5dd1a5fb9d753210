"""``execrl refine``: the loop and its two controls on one suite, in one run, on shared first attempts.

Each condition is one call of the one rollout loop (``execrl.episodes.run_episodes``) with the refine
environment (``env.py``, ``record_attempts=True``): ``refine`` (own feedback), ``random_feedback`` (another
problem's feedback of the same turn) and ``resample`` (fresh samples of the original prompt, the
matched-budget baseline). One episode per problem; its recorded attempts are the ``ProblemRun`` the report
(``report.py``) pairs problem by problem and the trace (``trace.py``) writes. ``conditions`` may drop the
controls for a quick run (the report then has no deltas).

Shared first attempts: the backend is wrapped in ``SharedFirstTurns`` (``replay.py``), so the first
condition samples every problem's first attempt and the others get the same ones back; ``refine`` runs
first. Seeds are the old loop's: the first attempt with ``config.seed``, the attempt numbered t >= 2 with
``config.seed + 7919 * t`` (+1 for resampling, so its fresh samples differ from the repairs' draws).

Any backend of the loop runs it: the local engine (``execrl.episodes.LocalBackend``) or an
OpenAI-compatible endpoint (``execrl.episodes.chat.ChatBackend``). An endpoint error is an attempt with
``error`` set that failed everything; that problem stops, the others go on.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from execrl.refine.report import summarize
from execrl.refine.runs import ProblemRun, RefineConfig, problem_run
from execrl.refine.trace import TraceWriter
from execrl.tasks.schema import Task

if TYPE_CHECKING:
    from execrl.episodes.backend import Backend
    from execrl.episodes.environment import Environment
    from execrl.episodes.loop import SeedRule
    from execrl.refine.env import MultiTurnConfig
    from execrl.rewards.batch import SyncRunner
    from execrl.rollout.types import SamplingParams

__all__ = ["CONDITIONS", "evaluate_refine", "run_condition"]

log = logging.getLogger("execrl.refine")
CONDITIONS = ("refine", "random_feedback", "resample")
Condition = Literal["refine", "random_feedback", "resample"]
TURN_SEED_STRIDE = 7919


def multi_turn_config(config: RefineConfig) -> MultiTurnConfig:
    """The refine environment's settings for ``config`` (no invalid-turn penalty: an evaluation)."""
    from execrl.refine.env import MultiTurnConfig
    from execrl.rewards import RewardConfig

    return MultiTurnConfig(
        max_turns=config.rounds, feedback=config.feedback, reward=RewardConfig(limits=config.limits),
        max_failures_shown=config.max_failures_shown, max_feedback_chars=config.max_feedback_chars,
        max_feedback_tokens=config.max_feedback_tokens,
    )  # fmt: skip


def sampling_params(config: RefineConfig) -> SamplingParams:
    from execrl.rollout.types import SamplingParams

    g = config.generation
    return SamplingParams(
        samples_per_prompt=1, max_new_tokens=g.max_new_tokens, temperature=g.temperature, top_p=g.top_p,
        seed=config.seed,
    )  # fmt: skip


def seed_rule(seed: int, condition: str) -> SeedRule:
    """Turn index k (0-based) samples attempt k + 1: the first with ``seed``, attempt t >= 2 with
    ``seed + 7919 * t`` (+1 for resampling)."""
    offset = 1 if condition == "resample" else 0
    return lambda _task, turn: seed if turn == 0 else seed + TURN_SEED_STRIDE * (turn + 1) + offset


def run_condition(
    tasks: Sequence[Task], backend: Backend, runner: SyncRunner, config: RefineConfig, *, condition: Condition
) -> list[ProblemRun]:
    """One condition: one episode per problem through the rollout loop, as ``ProblemRun``s in task order.
    Pass a ``SharedFirstTurns``-wrapped backend to share first attempts between calls."""
    from execrl.episodes.loop import run_episodes
    from execrl.refine.env import RefineEnvironment

    environment = cast("Environment", RefineEnvironment(
        runner, multi_turn_config(config), condition=condition, history=config.history, record_attempts=True,
        seed=config.seed,
    ))  # fmt: skip
    params = sampling_params(config)
    result = run_episodes(
        environment, backend, tasks, params=params, seed_for=seed_rule(config.seed, condition)
    )
    return [problem_run(episode, condition) for episode in result.episodes]


def evaluate_refine(
    tasks: Sequence[Task],
    backend: Backend,
    runner: SyncRunner,
    config: RefineConfig,
    *,
    conditions: Sequence[str] = CONDITIONS,
    trace_path: Path | None = None,
    backend_name: str | None = None,
) -> dict[str, Any]:
    """Run the chosen conditions and return the summary (with the config and timings)."""
    from execrl.refine.replay import SharedFirstTurns

    unknown = set(conditions) - set(CONDITIONS)
    if unknown or "refine" not in conditions:
        raise ValueError(
            f"conditions must include 'refine' and be among {CONDITIONS}, got {list(conditions)}"
        )
    order = [cast("Condition", c) for c in CONDITIONS if c in conditions]  # refine first: it samples turn 1
    shared = SharedFirstTurns(backend)
    trace = TraceWriter(trace_path) if trace_path is not None else None
    timings: dict[str, float] = {}
    runs: dict[str, list[ProblemRun]] = {}
    try:
        with backend.session(config.rounds):  # one prefix cache across the conditions (replay.py)
            for name in order:
                start = time.perf_counter()
                runs[name] = run_condition(tasks, shared, runner, config, condition=name)
                timings[f"{name}_s"] = time.perf_counter() - start
                if trace is not None:
                    trace.write_runs(runs[name])
                log.info("%s: done in %.0f s", name, timings[f"{name}_s"])
    finally:
        if trace is not None:
            trace.close()
    timings["first_attempts_s"] = shared.first_turns_s  # sampling them (inside refine_s)
    summary = summarize({name: runs[name] for name in conditions}, config.rounds, seed=config.seed)
    summary["backend"] = backend_name or str(getattr(backend, "name", type(backend).__name__))
    summary["config"] = dataclasses.asdict(config)
    summary["timings_s"] = timings
    summary["problems_without_visible_tests"] = sum(not t.visible_tests for t in tasks)
    return summary
