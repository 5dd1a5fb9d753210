"""Prove each task can tell right from wrong: its reference must score full reward, its wrong answer not.

``check_tasks`` sends every ``reference_solution`` and ``wrong_solution`` through the scorer it is given:
the real reward path (``execrl.rewards.check_scorer``: ``score_batch``, hence the sandbox) for ``execrl
tasks check``, exactly as a policy's completion would go, and also
checks the reference against the *visible* tests (a visible example the reference fails would punish
correct answers in a refine loop) and against the held-back *audit* tests (an audit test the reference
fails would call every correct answer a reward hack). Tasks without an audit split are listed in
``CheckReport.without_audit``: not a failure, but their completions cannot be audited during training.
A task with a tool session's ``reference_cells`` (``SessionSpec``) is also checked through the tool:
``tool_reference_answers`` runs the cells in a fork of the task's session template and the last cell's
stdout, written as "The answer is X.", must score full reward on the hidden tests (column ``tool``), so
a tool suite proves its tasks are solvable with the tool it offers.
A task without a reference or wrong answer is reported as
``missing`` for that column, not counted as passing. ``CheckReport.ok`` is what ``execrl tasks check``
turns into its exit status.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from execrl.tasks.schema import Task, audit_view


class ScoreLike(Protocol):
    """What ``check_tasks`` reads from a score (``execrl.rewards.Score`` has it)."""

    @property
    def passed(self) -> bool: ...

    @property
    def valid(self) -> bool: ...

    @property
    def reason(self) -> str: ...


# (tasks, completions, hidden) -> one score per completion, in order.
Scorer = Callable[[Sequence[Task], Sequence[str], bool], Sequence[ScoreLike]]


@dataclass(frozen=True)
class TaskCheck:
    """One task's outcome: each field is "ok", "missing", or what went wrong (a score reason)."""

    task_id: str
    family: str
    reference: str  # "ok" = passed the hidden tests
    wrong: str  # "ok" = failed the hidden tests (validly, not by a sandbox error)
    visible: str  # "ok" = the reference passed the visible tests ("missing": no visible tests/reference)
    audit: str = "missing"  # "ok" = the reference passed the audit tests ("missing": none, or no reference)
    tool: str = "missing"  # "ok" = the reference cells' output passed the hidden tests

    @property
    def ok(self) -> bool:
        columns = (self.reference, self.wrong, self.visible, self.audit, self.tool)
        return all(v in ("ok", "missing") for v in columns)


@dataclass(frozen=True)
class FamilyVerdict:
    family: str
    tasks: int
    reference_passed: int
    reference_total: int
    wrong_failed: int
    wrong_total: int
    visible_passed: int
    visible_total: int
    audit_passed: int = 0
    audit_total: int = 0
    tool_passed: int = 0
    tool_total: int = 0

    @property
    def ok(self) -> bool:
        return (
            self.reference_passed == self.reference_total
            and self.wrong_failed == self.wrong_total
            and self.visible_passed == self.visible_total
            and self.audit_passed == self.audit_total
            and self.tool_passed == self.tool_total
        )


@dataclass(frozen=True)
class CheckReport:
    tasks: tuple[TaskCheck, ...]
    families: tuple[FamilyVerdict, ...]
    without_audit: tuple[str, ...] = ()  # ids of tasks with no audit_tests (cannot be audited)

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tasks)

    @property
    def failures(self) -> tuple[TaskCheck, ...]:
        return tuple(t for t in self.tasks if not t.ok)


def _run(scorer: Scorer, jobs: list[tuple[Task, str]], hidden: bool) -> list[ScoreLike]:
    if not jobs:
        return []
    scores = list(scorer([t for t, _ in jobs], [c for _, c in jobs], hidden))
    if len(scores) != len(jobs):
        raise RuntimeError(f"scorer returned {len(scores)} scores for {len(jobs)} completions")
    return scores


def _verdicts(checks: Sequence[TaskCheck]) -> tuple[FamilyVerdict, ...]:
    out = []
    for family in sorted({c.family for c in checks}):
        group = [c for c in checks if c.family == family]

        def count(attr: str, group: list[TaskCheck] = group) -> tuple[int, int]:
            present = [getattr(c, attr) for c in group if getattr(c, attr) != "missing"]
            return sum(v == "ok" for v in present), len(present)

        (rp, rt), (wf, wt), (vp, vt) = count("reference"), count("wrong"), count("visible")
        (ap, at), (tp, tt) = count("audit"), count("tool")
        out.append(FamilyVerdict(family, len(group), rp, rt, wf, wt, vp, vt, ap, at, tp, tt))
    return tuple(out)


def check_tasks(
    tasks: Sequence[Task], *, scorer: Scorer, tool_answers: Mapping[str, str] | None = None
) -> CheckReport:
    """Score every task's reference (hidden and visible tests) and wrong answer; see the module doc.

    ``scorer`` is passed in (``execrl.rewards.check_scorer`` for the real reward path) because the
    rewards package sits above this one: tasks never import it. ``tool_answers``: task id -> the answer
    its reference cells produced (``tool_reference_answers``), scored on the hidden tests."""
    score = scorer
    ref_jobs = [(t, t.reference_solution) for t in tasks if t.reference_solution is not None]
    wrong_jobs = [(t, t.wrong_solution) for t in tasks if t.wrong_solution is not None]
    vis_jobs = [
        (t, t.reference_solution) for t in tasks if t.reference_solution is not None and t.visible_tests
    ]
    audit_jobs = [
        (audit_view(t), t.reference_solution)
        for t in tasks
        if t.reference_solution is not None and t.audit_tests
    ]
    by_id = {t.id: t for t in tasks}
    tool_jobs = [(by_id[task_id], answer) for task_id, answer in (tool_answers or {}).items()]
    tool = {t.id: s for (t, _), s in zip(tool_jobs, _run(score, tool_jobs, True), strict=True)}
    hidden_scores = _run(score, [*ref_jobs, *wrong_jobs, *audit_jobs], True)
    visible_scores = _run(score, vis_jobs, False)
    ref = {t.id: s for (t, _), s in zip(ref_jobs, hidden_scores[: len(ref_jobs)], strict=True)}
    after_ref = hidden_scores[len(ref_jobs) :]
    wrong = {t.id: s for (t, _), s in zip(wrong_jobs, after_ref[: len(wrong_jobs)], strict=True)}
    audit = {t.id: s for (t, _), s in zip(audit_jobs, after_ref[len(wrong_jobs) :], strict=True)}
    vis = {t.id: s for (t, _), s in zip(vis_jobs, visible_scores, strict=True)}
    checks = []
    for task in tasks:
        checks.append(
            TaskCheck(
                task_id=task.id,
                family=task.metadata.family,
                reference=_should_pass(ref.get(task.id)),
                wrong=_should_fail(wrong.get(task.id)),
                visible=_should_pass(vis.get(task.id)),
                audit=_should_pass(audit.get(task.id)),
                tool=_should_pass(tool.get(task.id)),
            )
        )
    without = tuple(t.id for t in tasks if not t.audit_tests)
    return CheckReport(tasks=tuple(checks), families=_verdicts(checks), without_audit=without)


def tool_reference_answers(tasks: Sequence[Task], sandbox: Any) -> dict[str, str]:
    """Task id -> "The answer is <stdout of the last reference cell>." for each task with reference
    cells, run one after the other in a fork of the task's session template (its files and setup cells).
    A cell that fails gives an answer that says so (and fails the check)."""
    answers: dict[str, str] = {}
    for task in tasks:
        spec = task.session
        if spec is None or not spec.reference_cells:
            continue
        template = sandbox.open_template(setup=list(spec.setup), runtime=spec.runtime, files=dict(spec.files))
        try:
            [session] = template.fork(1)
            with session:
                results = [session.run(cell) for cell in spec.reference_cells]
        finally:
            template.close()
        failed = [r for r in results if not r.passed]
        answers[task.id] = (
            f"reference cell {failed[0].index} failed: {failed[0].error_type or failed[0].message}"
            if failed else f"The answer is {results[-1].stdout.strip()}."
        )  # fmt: skip
    return answers


def _should_pass(score: ScoreLike | None) -> str:
    if score is None:
        return "missing"
    return "ok" if score.passed else f"failed: {score.reason}"


def _should_fail(score: ScoreLike | None) -> str:
    if score is None:
        return "missing"
    if score.passed:
        return "PASSED (the verifier accepts a wrong answer)"
    return "ok" if score.valid else f"invalid: {score.reason}"


def report_to_dict(report: CheckReport) -> dict[str, Any]:
    """JSON-ready form for ``execrl tasks check --json``."""
    from dataclasses import asdict

    return {
        "ok": report.ok,
        "families": [asdict(f) | {"ok": f.ok} for f in report.families],
        "failures": [asdict(t) for t in report.failures],
        "tasks": len(report.tasks),
        "without_audit": list(report.without_audit),
    }
