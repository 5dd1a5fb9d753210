"""``execrl refine``: the loop and its two controls on one suite, in one run, on shared first attempts.

Order: the first attempt of every problem (shared), then the refine loop with its own feedback, the
random-feedback control and the matched-budget resampling baseline. The report (``report.py``) pairs them
problem by problem. ``conditions`` may drop the controls for a quick run (the report then has no deltas).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.refine.loop import (
    FeedbackSource,
    ProblemRun,
    RefineConfig,
    first_attempts,
    run_refine,
    run_resample,
)
from execrl.refine.report import summarize
from execrl.refine.trace import TraceWriter
from execrl.tasks.schema import Task

if TYPE_CHECKING:
    from execrl.refine.backends import ChatBackend
    from execrl.rewards.batch import SyncRunner

__all__ = ["CONDITIONS", "evaluate_refine"]

log = logging.getLogger("execrl.refine")
CONDITIONS = ("refine", "random_feedback", "resample")


def evaluate_refine(
    tasks: Sequence[Task],
    backend: ChatBackend,
    runner: SyncRunner,
    config: RefineConfig,
    *,
    conditions: Sequence[str] = CONDITIONS,
    trace_path: Path | None = None,
) -> dict[str, Any]:
    """Run the chosen conditions and return the summary (with the config and timings)."""
    unknown = set(conditions) - set(CONDITIONS)
    if unknown or "refine" not in conditions:
        raise ValueError(
            f"conditions must include 'refine' and be among {CONDITIONS}, got {list(conditions)}"
        )
    trace = TraceWriter(trace_path) if trace_path is not None else None
    timings: dict[str, float] = {}
    try:
        start = time.perf_counter()
        first = first_attempts(tasks, backend, runner, config)
        timings["first_attempts_s"] = time.perf_counter() - start
        log.info("first attempts: %d problems in %.0f s", len(tasks), timings["first_attempts_s"])
        runs: dict[str, list[ProblemRun]] = {}
        for name in conditions:
            start = time.perf_counter()
            if name == "resample":
                runs[name] = run_resample(tasks, backend, runner, config, first=first, trace=trace)
            else:
                source: FeedbackSource = "own" if name == "refine" else "random"
                runs[name] = run_refine(
                    tasks, backend, runner, config, first=first, source=source, trace=trace
                )
            timings[f"{name}_s"] = time.perf_counter() - start
            log.info("%s: done in %.0f s", name, timings[f"{name}_s"])
    finally:
        if trace is not None:
            trace.close()
    summary = summarize(runs, config.rounds, seed=config.seed)
    summary["backend"] = backend.name
    summary["config"] = _config_dict(config)
    summary["timings_s"] = timings
    summary["problems_without_visible_tests"] = sum(not t.visible_tests for t in tasks)
    return summary


def _config_dict(config: RefineConfig) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(config)
