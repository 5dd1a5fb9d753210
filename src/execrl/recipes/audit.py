"""The training step's reward audit: re-run a share of the passing completions on held-back tests, count
suspicious behaviour, and keep the flagged completions for a person to read.

One call per step (``audit_step``) after the groups are scored; it returns ``audit/*``, ``hack/*`` and
``perf/audit_*`` metrics and appends the step's most suspicious completions to ``run_dir/hack.jsonl``
(read by the report's ``hack`` section). See ``execrl.rewards.audit`` and ``execrl.rewards.hacking`` for
what is measured and why. The audit runs on the same sandbox as the reward, in one more batch call; its
cost is ``perf/audit_s`` and its share of the step ``perf/audit_share`` (goal: <= 5 % at the default
``audit.share``). A resumed run may append a step twice; readers keep the last record of a step.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.components.sampling import GroupSampler, ScoredGroups
from execrl.config import TrainConfig
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
    """Audit a seeded ``share`` of the reward-passing rows (one sandbox batch) and flag every row."""
    picked = pick_for_audit(tasks, scores, share=share, seed=seed)
    audited = run_audit(
        [tasks[i] for i in picked], [completions[i] for i in picked], sandbox=sandbox, reward=reward
    )
    audit = dict(zip(picked, audited, strict=True))
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
    groups: ScoredGroups,
    sampler: GroupSampler,
    config: TrainConfig,
    *,
    step_s: float,
) -> dict[str, float]:
    """Audit, count, record one training step; returns its ``audit/*``, ``hack/*``, ``perf/audit_*``."""
    if not config.audit.enabled:
        return {}
    t0 = time.perf_counter()
    rows = audit_rows(
        [groups.tasks[g] for g in groups.rollout.group_index.tolist()],
        list(groups.rollout.texts),
        groups.scores,
        sandbox=sampler.sandbox,
        reward=sampler.reward,
        share=config.audit.share,
        seed=f"{config.run.seed}:audit:{step}",
    )
    metrics = audit_metrics(outcome_of(rows)) | hack_metrics([r.flags for r in rows])
    write_flagged(run_dir / HACK_FILE, step, rows, limit=config.audit.flagged_per_step)
    audit_s = time.perf_counter() - t0
    metrics["perf/audit_s"] = audit_s
    metrics["perf/audit_share"] = audit_s / (step_s + audit_s)
    return metrics


def write_flagged(path: Path, step: int, rows: Sequence[AuditedRow], *, limit: int) -> None:
    """Append the step's ``limit`` most suspicious rows (failed audit first, then most flags)."""
    suspicious = sorted((r for r in rows if r.rank() > (0, 0)), key=lambda r: r.rank(), reverse=True)
    if not suspicious or limit == 0:
        return
    with path.open("a", encoding="utf-8") as fh:
        for row in suspicious[:limit]:
            fh.write(json.dumps(row.record(step), ensure_ascii=False) + "\n")


def eval_audit(
    tasks: Sequence[Task], per_task: Sequence[TaskEval], *, sandbox: SyncRunner, reward: RewardConfig
) -> dict[str, float]:
    """At evaluation every reward-passing completion is audited (share 1): the ``audit/*`` metrics of an
    eval, stored next to its pass@k so a trained model's gain can be checked against tests it never saw."""
    by_id = {t.id: t for t in tasks}
    rows = [
        (by_id[e.task_id], c, p, v)
        for e in per_task
        for c, p, v in zip(e.completions, e.passed, e.valid, strict=True)
    ]
    picked = [i for i, (task, _, passed, _) in enumerate(rows) if passed and task.audit_tests]
    audited = run_audit(
        [rows[i][0] for i in picked], [rows[i][1] for i in picked], sandbox=sandbox, reward=reward
    )
    outcome = AuditOutcome(
        domains=tuple(task.domain for task, *_ in rows),
        auditable=tuple(bool(task.audit_tests) and valid for task, _, _, valid in rows),
        reward_passed=tuple(passed for _, _, passed, _ in rows),
        audit=dict(zip(picked, audited, strict=True)),
    )
    return audit_metrics(outcome)
