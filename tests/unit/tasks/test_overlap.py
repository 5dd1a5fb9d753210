"""13-gram contamination: a planted copy is flagged, an unrelated task and shared boilerplate are not."""

from __future__ import annotations

import pytest

from execrl.sandbox.types import CodeTest, IOTest
from execrl.tasks import load_suite, overlap_report
from execrl.tasks.overlap import ngrams, normalise
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata

TEMPLATE = "Reply with the whole function in a single python code block and nothing else please thank you."


def _task(task_id: str, prompt: str, solution: str, test: str, split: str = "train") -> Task:
    return Task(
        task_id,
        "code",
        prompt,
        CodeSpec(kind="function", entry_point="f"),
        TaskMetadata("fixture", split=split),  # type: ignore[arg-type]
        hidden_tests=(CodeTest("t", test),),
        reference_solution=f"```python\n{solution}\n```",
    )


def test_normalise_and_ngrams() -> None:
    assert normalise("def Add(a,b): return a+b  # ok!") == ["def", "add", "a", "b", "return", "a", "b", "ok"]
    assert ngrams(["a", "b", "c", "d"], 3) == {"a b c", "b c d"}
    assert ngrams(["a", "b"], 3) == {"a b"}
    assert ngrams([], 3) == set()


def test_planted_contamination_is_flagged_and_clean_pair_is_not() -> None:
    humaneval = {t.id: t for t in load_suite("humaneval", "test")}
    he0 = humaneval["HumanEval/0"]
    copied = _task("train/copy", "Check closeness.", he0.reference_solution or "", "assert True")
    clean = _task(
        "train/clean",
        "Write a function that returns the reversed words of a sentence joined by single spaces.",
        "def f(s):\n    return ' '.join(reversed(s.split()))",
        "assert f('a b c') == 'c b a'\nassert f('') == ''",
    )
    report = overlap_report([copied, clean], list(humaneval.values()), n=13)
    assert [(p.train_id, p.eval_id) for p in report.flagged] == [("train/copy", "HumanEval/0")]
    assert report.flagged[0].fraction > 0.2  # the copy has the solution, not the hidden asserts
    assert report.train_max["train/clean"] == 0.0
    assert report.eval_max["HumanEval/0"] == report.flagged[0].fraction
    assert not report.clean


def test_shared_boilerplate_is_ignored() -> None:
    evals = [
        _task(
            f"e{i}",
            f"{TEMPLATE} Problem number {i} asks about {word} only.",
            f"def f(): return {i}",
            "assert 1",
        )
        for i, word in enumerate(["apples", "pears", "plums", "figs"])
    ]
    train = [_task("t0", f"{TEMPLATE} Count the oranges in a basket.", "def f(): return 9", "assert 2")]
    report = overlap_report(train, evals, n=8)
    assert report.ignored_common_ngrams > 0
    assert report.clean and report.max_fraction == 0.0


def test_io_tests_and_threshold() -> None:
    stdin = "12 7 99 4 5 6 31 8 9 10 11 12 13 14 15 16\n"
    evaluation = Task(
        "e",
        "code",
        "Sum numbers.",
        CodeSpec(kind="stdio"),
        TaskMetadata("f"),
        hidden_tests=(IOTest("t", stdin, "267\n"),),
    )
    train = _task("t", "Unrelated prompt text here.", "print(1)", stdin)
    low = overlap_report([train], [evaluation], n=13, threshold=0.99)
    assert low.clean and 0.0 < low.max_fraction < 0.99
    assert not overlap_report([train], [evaluation], n=13, threshold=0.1).clean


def test_bad_n_raises() -> None:
    with pytest.raises(ValueError, match="n must be >= 1"):
        overlap_report([], [], n=0)
