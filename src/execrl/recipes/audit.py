"""The training step's reward audit: read the passing completions' verdicts on held-back tests, count
suspicious behaviour, and keep the flagged completions for a person to read.

One call per step (``audit_step``) after the groups are scored; it returns ``audit/*``, ``hack/*`` and
``perf/audit_*`` metrics and appends the step's most suspicious completions to ``run_dir/hack.jsonl``
(read by the report's ``hack`` section). See ``execrl.rewards.audit`` and ``execrl.rewards.hacking`` for
what is measured and why. The audit is blind (``execrl.rewards.blind``): the reward's executions
carried the audit tests (``RewardConfig.with_audit``), so every reward-passing completion is audited
from its own reward run; only completions whose verifier could not carry them are re-run apart, a
seeded ``audit.share`` of them, in one more batch call. Cost: ``perf/audit_tests_s``, the audit tests'
run time inside the step's reward executions (summed over executions: an upper bound on the wall time
they added, which concurrent workers share), plus the re-runs and the bookkeeping, together
``perf/audit_s``; its share of the step is ``perf/audit_share`` (goal: <= 5 %). A resumed run may
append a step twice; readers keep the last record of a step.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.components import setup
from execrl.config import TrainConfig
from execrl.episodes import StepEpisodes
from execrl.episodes.metrics import episode_scores
from execrl.eval.harness import TaskEval
from execrl.rewards import RewardConfig, Score
from execrl.rewards.audit import AuditOutcome, audit_metrics, pick_for_audit, run_audit
from execrl.rewards.hacking import hack_metrics, sandbox_flags, suspicious_flags
from execrl.tasks.schema import Task
from execrl.telemetry.hacking import HACK_FILE

if TYPE_CHECKING:
    from execrl.rewards.batch import SyncRunner

COMPLETION_MAX_CHARS = 2000  # of a completion quoted in hack.jsonl


@dataclass(frozen=True)
class AuditedRow:
    """One completion of the step: its reward score, its audit score (if sampled) and its flags."""

    index: int
    task: Task
    completion: str
    reward: Score
    audit: Score | None
    flags: frozenset[str]

    @property
    def audit_failed(self) -> bool:
        return self.audit is not None and self.audit.valid and not self.audit.passed

    def rank(self) -> tuple[int, int]:
        return (int(self.audit_failed), len(self.flags))

    def record(self, step: int) -> dict[str, Any]:
        text = self.completion
        return {
            "step": step,
            "row": self.index,
            "task_id": self.task.id,
            "domain": self.task.domain,
            "flags": sorted(self.flags | ({"audit_failed"} if self.audit_failed else set())),
            "reward": self.reward.reward,
            "reward_reason": self.reward.reason,
            "audit_reason": self.audit.reason if self.audit is not None else None,
            "completion": text if len(text) <= COMPLETION_MAX_CHARS else text[:COMPLETION_MAX_CHARS] + "...",
        }


def audit_rows(
    tasks: Sequence[Task],
    completions: Sequence[str],
    scores: Sequence[Score],
    *,
    sandbox: SyncRunner,
    reward: RewardConfig,
    share: float,
    seed: str,
) -> list[AuditedRow]:
    """Audit every reward-passing row from its own run (``Score.audit``, the blind audit), re-run a
    seeded ``share`` of the passing rows that have none (one sandbox batch), and flag every row."""
    audit = {
        i: s.audit for i, s in enumerate(scores) if s.passed and s.audit is not None and tasks[i].audit_tests
    }
    rest = [i for i in range(len(scores)) if i not in audit]
    chosen = pick_for_audit([tasks[i] for i in rest], [scores[i] for i in rest], share=share, seed=seed)
    picked = [rest[k] for k in chosen]
    audited = run_audit(
        [tasks[i] for i in picked], [completions[i] for i in picked], sandbox=sandbox, reward=reward
    )
    audit.update(zip(picked, audited, strict=True))
    rows = []
    for i, (task, completion, score) in enumerate(zip(tasks, completions, scores, strict=True)):
        extra = sandbox_flags(audit[i].execution) if i in audit else frozenset()
        flags = suspicious_flags(task, completion, score) | extra
        rows.append(AuditedRow(i, task, completion, score, audit.get(i), flags))
    return rows


def outcome_of(rows: Sequence[AuditedRow]) -> AuditOutcome:
    return AuditOutcome(
        domains=tuple(r.task.domain for r in rows),
        auditable=tuple(bool(r.task.audit_tests) and r.reward.valid for r in rows),
        reward_passed=tuple(r.reward.passed for r in rows),
        audit={r.index: r.audit for r in rows if r.audit is not None},
    )


def audit_step(
    run_dir: Path,
    step: int,
    groups: StepEpisodes,
    environment: Any,
    config: TrainConfig,
    *,
    step_s: float,
) -> dict[str, float]:
    """Audit, count, record one training step (each episode's final answer and the judge's score, with the
    run's reward settings on the environment's sandbox); returns its ``audit/*``, ``hack/*``,
    ``perf/audit_*``."""
    if not config.audit.enabled:
        return {}
    episodes = groups.episodes
    tasks = [groups.tasks[e.task_index] for e in episodes]
    return audit_completions(run_dir, step, tasks, [e.text for e in episodes], episode_scores(episodes),
                             sandbox=environment.runner, reward=setup.reward_config(config), config=config,
                             step_s=step_s)  # fmt: skip


def audit_completions(
    run_dir: Path,
    step: int,
    tasks: Sequence[Task],
    completions: Sequence[str],
    scores: Sequence[Score],
    *,
    sandbox: SyncRunner,
    reward: RewardConfig,
    config: TrainConfig,
    step_s: float,
) -> dict[str, float]:
    """``audit_step`` on rows given one by one: the task, the scored text and its reward ``Score`` of
    each (the tool recipe passes its episodes' final answers and the judge's scores)."""
    t0 = time.perf_counter()
    rows = audit_rows(
        tasks, completions, scores, sandbox=sandbox, reward=reward, share=config.audit.share,
        seed=f"{config.run.seed}:audit:{step}",
    )  # fmt: skip
    metrics = audit_metrics(outcome_of(rows)) | hack_metrics([r.flags for r in rows])
    write_flagged(run_dir / HACK_FILE, step, rows, limit=config.audit.flagged_per_step)
    own_s = time.perf_counter() - t0
    tests_s = audit_tests_s(scores)
    metrics["perf/audit_tests_s"] = tests_s
    metrics["perf/audit_s"] = own_s + tests_s
    metrics["perf/audit_share"] = (own_s + tests_s) / (step_s + own_s)
    return metrics


def audit_tests_s(scores: Sequence[Score]) -> float:
    """The audit tests' run time inside the reward's executions (every execution carried them, passing
    or not): what the blind audit adds to the reward stage, summed over executions."""
    return sum(
        test.wall_time_s
        for score in scores
        if score.audit is not None and score.audit.execution is not None
        for test in score.audit.execution.tests
    )


def write_flagged(path: Path, step: int, rows: Sequence[AuditedRow], *, limit: int) -> None:
    """Append the step's ``limit`` most suspicious rows (failed audit first, then most flags)."""
    suspicious = sorted((r for r in rows if r.rank() > (0, 0)), key=lambda r: r.rank(), reverse=True)
    if not suspicious or limit == 0:
        return
    with path.open("a", encoding="utf-8") as fh:
        for row in suspicious[:limit]:
            fh.write(json.dumps(row.record(step), ensure_ascii=False) + "\n")


def eval_audit(
    tasks: Sequence[Task],
    per_task: Sequence[TaskEval],
    *,
    sandbox: SyncRunner,
    reward: RewardConfig,
    scores: Sequence[Sequence[Score]] = (),
) -> dict[str, float]:
    """At evaluation every reward-passing completion is audited (share 1): the ``audit/*`` metrics of an
    eval, stored next to its pass@k so a trained model's gain can be checked against tests it never saw.
    ``scores`` ([tasks][samples], as ``per_task``): the eval's own scores; a passing one that carries
    ``Score.audit`` (the blind audit) is audited from its run, the others are re-run on the audit tests."""
    by_id = {t.id: t for t in tasks}
    rows = [
        (by_id[e.task_id], c, p, v)
        for e in per_task
        for c, p, v in zip(e.completions, e.passed, e.valid, strict=True)
    ]
    carried = [s.audit for samples in scores for s in samples] if scores else [None] * len(rows)
    picked = [i for i, (task, _, passed, _) in enumerate(rows) if passed and task.audit_tests]
    audit = {i: a for i in picked if (a := carried[i]) is not None}
    rerun = [i for i in picked if i not in audit]
    audited = run_audit(
        [rows[i][0] for i in rerun], [rows[i][1] for i in rerun], sandbox=sandbox, reward=reward
    )
    audit.update(zip(rerun, audited, strict=True))
    outcome = AuditOutcome(
        domains=tuple(task.domain for task, *_ in rows),
        auditable=tuple(bool(task.audit_tests) and valid for task, _, _, valid in rows),
        reward_passed=tuple(passed for _, _, passed, _ in rows),
        audit=audit,
    )
    return audit_metrics(outcome)
