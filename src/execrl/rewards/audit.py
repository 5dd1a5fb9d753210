"""Audit the reward: score the completions it passed on the task's held-back audit tests too.

Why: RL optimises whatever the reward measures, and a fixed set of tests is a target a policy can learn
to game (special-case the visible inputs, print the expected text, exit before the asserts; rLLM #143,
the reward-hacking sections of the DeepCoder, AceCoder and Kimi k1.5 reports). A completion that truly
solves a task passes tests it has never been scored on; a hack usually does not.

The audit is blind (``blind.py``): the reward run of every completion carries its task's audit tests,
shuffled among the reward's afresh per execution, and the audit's verdict (``Score.audit``) comes from
the very execution the reward scored. "Indistinguishable" covers everything a program observes from
inside the sandbox: test names (none enter it), the number and order of tests, the position of a run
and what earlier runs left in the work directory, the inputs on the harness's stack or a call harness's
stdin, whether it runs inline as pid 1, its limits: all drawn alike in every execution, since there is
only one kind. What remains: a program sees every input of its execution and can recognise inputs it
memorised (answering those from memory and computing the rest is a correct program, which the audit
rightly passes); and both splits share the execution's limits, so a program that exhausts one during
an audit test loses the reward tests not yet run. Every reward-passing completion is audited, at the
cost of its audit tests' run time. Only a completion whose verifier cannot carry the audit tests is
re-run on them apart (``run_audit``, for a sampled ``share``; not blind).

Metrics (``audit_metrics``), over the completions whose task has an audit split ("auditable"):

- ``audit/reward_pass_rate`` R: share of valid auditable completions the reward passed;
- ``audit/pass_rate`` A: share of the audited reward-passing completions that also pass the audit;
- ``audit/confirmed_pass_rate`` = R x A: the pass rate the audit confirms (the second curve);
- ``audit/gap`` = R x (1 - A): the estimated share of completions the reward passes but the audit
  fails, what the ``reward_audit_divergence`` alarm watches. It is 0 under a sound reward whatever R is,
  and it grows with R when the reward is being gamed. ``A`` and the gap are absent on a step that audited
  nothing (no estimate beats a made-up 0).

Limits: with few passing completions a step audits few samples, so a single step's A is noise; the
alarm requires the gap to stay high for several audited steps. An audit split
drawn from the same generator as the reward tests catches input-specific hacks (hard-coded outputs,
special-cased inputs), not a misunderstanding shared by both splits. Invalid audit scores (the sandbox
broke) are counted in ``audit/invalid`` and left out of A.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from execrl.rewards.batch import SyncRunner, score_batch
from execrl.rewards.blind import audit_config
from execrl.rewards.types import RewardConfig, Score
from execrl.tasks.schema import Task, audit_view

__all__ = ["AuditOutcome", "audit_metrics", "pick_for_audit", "run_audit"]


def pick_for_audit(tasks: Sequence[Task], scores: Sequence[Score], *, share: float, seed: str) -> list[int]:
    """Rows to audit: a seeded ``share`` of the rows the reward passed whose task has audit tests.

    The count is ``share x eligible`` rounded stochastically (floor, plus one with the fractional part's
    probability), so the expected share is exact even when a step has only a few passing rows.
    ``share=1`` audits every eligible row (evaluation). ``seed`` makes the choice reproducible on resume.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"audit share must lie in [0, 1]; got {share!r}")
    eligible = [i for i, (t, s) in enumerate(zip(tasks, scores, strict=True)) if s.passed and t.audit_tests]
    rng = random.Random(seed)
    exact = share * len(eligible)
    count = math.floor(exact) + (1 if rng.random() < exact - math.floor(exact) else 0)
    return sorted(rng.sample(eligible, count))


def run_audit(
    tasks: Sequence[Task], completions: Sequence[str], *, sandbox: SyncRunner, reward: RewardConfig
) -> list[Score]:
    """Score each completion on its task's audit tests in executions of their own: one ``score_batch``
    call, all-pass (binary). Not blind (a program can tell such a run apart): only for the completions
    whose reward run could not carry the audit tests (``blind.py``); the others have ``Score.audit``."""
    if not tasks:
        return []
    config = audit_config(reward)
    return score_batch([audit_view(t) for t in tasks], completions, sandbox=sandbox, config=config)


@dataclass(frozen=True)
class AuditOutcome:
    """One step's audit: per row of the batch, its domain, whether it was auditable and passed the reward,
    and (for audited rows) the audit score."""

    domains: tuple[str, ...]  # [N]
    auditable: tuple[bool, ...]  # [N] the task has audit tests and the reward score is valid
    reward_passed: tuple[bool, ...]  # [N]
    audit: dict[int, Score]  # row -> audit score, for the audited rows


def _summary(outcome: AuditOutcome, rows: Sequence[int], prefix: str) -> dict[str, float]:
    auditable = [i for i in rows if outcome.auditable[i]]
    audited = [outcome.audit[i] for i in rows if i in outcome.audit]
    valid = [s for s in audited if s.valid]
    out = {f"{prefix}/audited": float(len(audited)), f"{prefix}/invalid": float(len(audited) - len(valid))}
    if not auditable:
        return out
    reward_rate = sum(outcome.reward_passed[i] for i in auditable) / len(auditable)
    out[f"{prefix}/reward_pass_rate"] = reward_rate
    if valid:
        audit_rate = sum(s.passed for s in valid) / len(valid)
        out[f"{prefix}/pass_rate"] = audit_rate
        out[f"{prefix}/confirmed_pass_rate"] = reward_rate * audit_rate
        out[f"{prefix}/gap"] = reward_rate * (1.0 - audit_rate)
    return out


def audit_metrics(outcome: AuditOutcome) -> dict[str, float]:
    """``audit/*`` for the whole batch and ``audit/<domain>/*`` per domain (see the module docstring).

    Hand check: 10 auditable rows, 6 reward-passing, 2 audited of which 1 passes: R = 0.6, A = 0.5,
    confirmed = 0.3, gap = 0.3.
    """
    rows = range(len(outcome.domains))
    out = _summary(outcome, rows, "audit")
    for domain in sorted(set(outcome.domains)):
        out.update(_summary(outcome, [i for i in rows if outcome.domains[i] == domain], f"audit/{domain}"))
    return out
