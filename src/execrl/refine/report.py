"""The honest evaluation of a refine run: per-round hidden pass rate of the loop, the matched-budget
resampling baseline and the random-feedback control, paired bootstrap intervals on every difference, fix
rate by error type, regressions, identical resubmissions.

Definitions (all over the same problems, pure functions of the ``ProblemRun``s):

- *hidden pass at round r*: the hidden verdict of the program the condition would return had it stopped
  after r generations (the loop: its latest attempt; resampling: the best on visible tests so far);
- *fix rate by error type*: over transitions attempt t -> t+1 whose attempt t failed the visible tests with
  reason code c, the share where attempt t+1 passes them;
- *regression*: a transition where a visible test that passed at t fails at t+1;
- *identical resubmission*: attempt t+1's extracted code equals attempt t's (whitespace-normalised);
- *endpoint errors*: attempts the backend could not answer (counted as failed; listed with their error).

Intervals: percentile bootstrap over problems (``execrl.eval.stats``); differences use the paired bootstrap.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from execrl.eval.stats import bootstrap_ci, paired_bootstrap_diff
from execrl.refine.runs import Attempt, ProblemRun, best_visible_index

__all__ = ["endpoint_errors", "hidden_at_round", "summarize", "transition_stats"]


def hidden_at_round(run: ProblemRun, round_: int) -> bool:
    """Hidden verdict of the program this condition returns after ``round_`` generations (1-based)."""
    seen = run.attempts[:round_]
    if run.condition != "resample":
        return seen[-1].hidden_passed
    return seen[best_visible_index(seen)].hidden_passed


def _normalized(code: str | None) -> str | None:
    return None if code is None else " ".join(code.split())


def _regressed(before: Attempt, after: Attempt) -> bool:
    passed_before = {name for name, verdict in before.visible_tests if verdict == "passed"}
    now = dict(after.visible_tests)
    return any(now.get(name, "missing") != "passed" for name in passed_before)


def transition_stats(runs: Sequence[ProblemRun]) -> dict[str, Any]:
    """Fix rate by error type, regressions and identical resubmissions over all t -> t+1 transitions."""
    tried: Counter[str] = Counter()
    fixed: Counter[str] = Counter()
    regressions = identical = transitions = 0
    for run in runs:
        for before, after in zip(run.attempts, run.attempts[1:], strict=False):
            transitions += 1
            code = before.visible_reason.split(":", 1)[0].strip()
            tried[code] += 1
            fixed[code] += after.visible_passed
            regressions += _regressed(before, after)
            identical += _normalized(before.code) == _normalized(after.code) and before.code is not None
    return {
        "transitions": transitions,
        "fix_rate_by_error": {
            c: {"tried": n, "fixed": fixed[c], "rate": fixed[c] / n} for c, n in tried.items()
        },
        "fix_rate": sum(fixed.values()) / transitions if transitions else None,
        "regression_rate": regressions / transitions if transitions else None,
        "identical_resubmission_rate": identical / transitions if transitions else None,
    }


def _usage(runs: Sequence[ProblemRun]) -> dict[str, float]:
    n = len(runs)
    return {
        "generations_per_problem": sum(len(r.attempts) for r in runs) / n,
        "completion_tokens_per_problem": sum(a.completion_tokens for r in runs for a in r.attempts) / n,
        "prompt_tokens_per_problem": sum(a.prompt_tokens for r in runs for a in r.attempts) / n,
    }


def summarize(
    conditions: Mapping[str, Sequence[ProblemRun]], rounds: int, *, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """The report (see the module docstring); ``conditions`` maps names to runs in the same task order."""
    ids = [r.task_id for r in next(iter(conditions.values()))]
    for name, runs in conditions.items():
        if [r.task_id for r in runs] != ids:
            raise ValueError(f"condition {name!r} ran different problems; the comparison must be paired")
    opts = {"resamples": resamples, "seed": seed}
    per_round: dict[str, list[list[float]]] = {
        name: [[float(hidden_at_round(r, k)) for r in runs] for k in range(1, rounds + 1)]
        for name, runs in conditions.items()
    }
    out: dict[str, Any] = {"problems": len(ids), "rounds": rounds, "conditions": {}, "deltas": {}}
    for name, runs in conditions.items():
        out["conditions"][name] = {
            "hidden_pass_by_round": [bootstrap_ci(v, **opts).as_dict() for v in per_round[name]],
            "visible_pass_final": sum(r.final.visible_passed for r in runs) / len(runs),
            "endpoint_errors": sum(a.error is not None for r in runs for a in r.attempts),
            "usage": _usage(runs),
            **transition_stats(runs),
        }
    if "refine" in conditions:
        for other in (c for c in conditions if c != "refine"):
            out["deltas"][f"refine_minus_{other}"] = [
                paired_bootstrap_diff(per_round[other][k], per_round["refine"][k], **opts).as_dict()
                for k in range(rounds)
            ]
    out["endpoint_errors"] = endpoint_errors(conditions)
    return out


def endpoint_errors(conditions: Mapping[str, Sequence[ProblemRun]], limit: int = 100) -> list[dict[str, Any]]:
    """The attempts the backend could not answer (``Attempt.error``), the first ``limit`` of them."""
    found = [
        {"condition": name, "task_id": r.task_id, "turn": a.turn, "error": a.error}
        for name, runs in conditions.items()
        for r in runs
        for a in r.attempts
        if a.error is not None
    ]
    return found[:limit]
