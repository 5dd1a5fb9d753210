"""N-gram contamination check between a training set and an evaluation set.

Follows the 13-gram overlap test of GPT-3 (Brown et al. 2020, appendix C): text is lowercased and split on
non-alphanumerics, and a training task "contains" an eval task to the extent that they share token
13-grams. Both prompts and answers count (solutions, test code, stdin/stdout, call arguments): a training
task that copies HumanEval's canonical solution under a new prompt is contamination too.

Boilerplate is not contamination: an n-gram that occurs in many eval tasks (an instruction template, a
license header, ``from typing import List``...) is ignored when it appears in more than
``max(2, common_fraction * len(eval_tasks))`` of them.

Limits: exact token overlap only. A paraphrased problem or a solution with renamed variables is not
detected; use embedding similarity for that. The score of a pair is the share of the *eval* task's
n-grams that the train task also has, so a long train task quoting a short eval task scores high.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from execrl.sandbox.types import CallTest, CodeTest, IOTest, TestCase
from execrl.tasks.schema import CodeSpec, MathSpec, StructuredSpec, Task

_TOKEN = re.compile(r"[a-z0-9]+")


def normalise(text: str) -> list[str]:
    """Lowercase alphanumeric tokens of ``text`` (everything else is a separator)."""
    return _TOKEN.findall(text.lower())


def ngrams(tokens: Sequence[str], n: int) -> set[str]:
    """The set of space-joined token ``n``-grams (a text shorter than ``n`` tokens is one gram)."""
    if len(tokens) < n:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def _test_text(test: TestCase) -> str:
    if isinstance(test, CodeTest):
        return test.code
    if isinstance(test, CallTest):
        return f"{test.entry_point} {json.dumps(list(test.args), default=str)} {json.dumps(test.expected, default=str)}"
    assert isinstance(test, IOTest)
    return f"{test.stdin}\n{test.expected_stdout}"


def task_text(task: Task) -> str:
    """Everything of a task a model could memorise: prompt, solutions, tests, spec content."""
    prompt = task.prompt if isinstance(task.prompt, str) else "\n".join(m.content for m in task.prompt)
    parts = [prompt, task.reference_solution or ""]
    parts += [_test_text(t) for t in (*task.visible_tests, *task.hidden_tests)]
    spec = task.spec
    if isinstance(spec, CodeSpec):
        parts += [spec.prompt_code, spec.starter_code, *spec.files.values()]
    elif isinstance(spec, MathSpec):
        parts.append(spec.answer)
    elif isinstance(spec, StructuredSpec):
        parts.append(json.dumps(spec.expected_values, default=str))
    return "\n".join(parts)


@dataclass(frozen=True)
class OverlapPair:
    train_id: str
    eval_id: str
    shared_ngrams: int
    fraction: float  # shared / n-grams of the eval task (after boilerplate removal)


@dataclass(frozen=True)
class OverlapReport:
    n: int
    threshold: float
    train_tasks: int
    eval_tasks: int
    ignored_common_ngrams: int
    eval_max: dict[str, float] = field(default_factory=dict)  # eval id -> max fraction over train
    train_max: dict[str, float] = field(default_factory=dict)  # train id -> max fraction over eval
    flagged: tuple[OverlapPair, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.flagged

    @property
    def max_fraction(self) -> float:
        return max(self.eval_max.values(), default=0.0)


def _eval_index(eval_grams: list[set[str]], common_fraction: float) -> tuple[dict[str, list[int]], int]:
    """n-gram -> eval task indices, without n-grams common to many eval tasks."""
    doc_freq = Counter(g for grams in eval_grams for g in grams)
    limit = max(2.0, common_fraction * len(eval_grams))
    common = {g for g, count in doc_freq.items() if count > limit}
    index: dict[str, list[int]] = {}
    for i, grams in enumerate(eval_grams):
        grams -= common
        for gram in grams:
            index.setdefault(gram, []).append(i)
    return index, len(common)


def overlap_report(
    train_tasks: Sequence[Task],
    eval_tasks: Sequence[Task],
    *,
    n: int = 13,
    threshold: float = 0.1,
    common_fraction: float = 0.05,
) -> OverlapReport:
    """Shared token ``n``-grams of every (train, eval) pair; pairs at or above ``threshold`` are flagged.

    ``threshold`` is the share of the eval task's n-grams found in the train task (0.1 = a tenth).
    """
    train = [(t.id, task_text(t)) for t in train_tasks]
    return text_overlap_report(train, eval_tasks, n=n, threshold=threshold, common_fraction=common_fraction)


def text_overlap_report(
    train: Sequence[tuple[str, str]],
    eval_tasks: Sequence[Task],
    *,
    n: int = 13,
    threshold: float = 0.1,
    common_fraction: float = 0.05,
) -> OverlapReport:
    """``overlap_report`` with training texts given as ``(id, text)`` pairs (SFT rows: everything a row
    shows the model, its answers and tool outputs included)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    eval_grams = [ngrams(normalise(task_text(t)), n) for t in eval_tasks]
    index, ignored = _eval_index(eval_grams, common_fraction)
    sizes = [len(g) for g in eval_grams]
    eval_max = {t.id: 0.0 for t in eval_tasks}
    train_max: dict[str, float] = {}
    flagged: list[OverlapPair] = []
    for train_id, text in train:
        shared: Counter[int] = Counter()
        for gram in ngrams(normalise(text), n):
            shared.update(index.get(gram, ()))
        best = 0.0
        for i, count in shared.items():
            fraction = count / sizes[i]
            best = max(best, fraction)
            eval_id = eval_tasks[i].id
            eval_max[eval_id] = max(eval_max[eval_id], fraction)
            if fraction >= threshold:
                flagged.append(OverlapPair(train_id, eval_id, count, fraction))
        train_max[train_id] = best
    flagged.sort(key=lambda p: (-p.fraction, p.train_id, p.eval_id))
    return OverlapReport(
        n=n,
        threshold=threshold,
        train_tasks=len(train),
        eval_tasks=len(eval_tasks),
        ignored_common_ngrams=ignored,
        eval_max=eval_max,
        train_max=train_max,
        flagged=tuple(flagged),
    )
