"""Execute and refine: the model writes code, the sandbox runs the visible tests, the failures go back into
the context, the model corrects itself; scored on hidden tests against honest controls.

    execrl refine --model smollm2-135m-instruct --suite humaneval --rounds 3 --json out.json
    execrl refine --base-url http://127.0.0.1:8000/v1 --model served-name --suite humaneval
    execrl refine show out.trace.jsonl

    from execrl.episodes import LocalBackend
    from execrl.refine import RefineConfig, evaluate_refine
    summary = evaluate_refine(tasks, LocalBackend(engine, tokenizer), sandbox, RefineConfig(rounds=3))

Modules: ``env.py`` (the refine environment of the one rollout loop, ``execrl.episodes``: visible-test
feedback between turns; multi-turn RL trains on it, the evaluation records its attempts), ``evaluate.py``
(the conditions, each one ``run_episodes`` call), ``replay.py`` (the same first attempts for every
condition), ``runs.py`` (settings and records), ``feedback.py`` (formats), ``report.py`` (metrics),
``trace.py`` (the JSONL trace and ``execrl refine show``), ``metrics.py`` (RL step metrics).
"""

from execrl.refine.evaluate import CONDITIONS, evaluate_refine, run_condition
from execrl.refine.feedback import FEEDBACK_FORMATS, FeedbackFormat, render_feedback
from execrl.refine.replay import SharedFirstTurns
from execrl.refine.report import summarize
from execrl.refine.runs import (
    Attempt,
    GenerationParams,
    ProblemRun,
    RefineConfig,
    best_visible_index,
    problem_run,
)
from execrl.refine.trace import TraceWriter, format_trace, read_trace

__all__ = [
    "CONDITIONS",
    "FEEDBACK_FORMATS",
    "Attempt",
    "FeedbackFormat",
    "GenerationParams",
    "ProblemRun",
    "RefineConfig",
    "SharedFirstTurns",
    "TraceWriter",
    "best_visible_index",
    "evaluate_refine",
    "format_trace",
    "problem_run",
    "read_trace",
    "render_feedback",
    "run_condition",
    "summarize",
]
