"""`execrl bench rewards`: the sample mix (pure) and a tiny real run writing the JSON keys."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import execrl.tasks
from execrl.bench import rewards as bench
from execrl.tasks.schema import Task


def _task(make_code_task: Callable[..., Task], i: int) -> Task:
    task = make_code_task(task_id=f"add{i}")
    return Task(
        **{
            **task.__dict__,
            "reference_solution": "```python\ndef add(a, b):\n    return a + b\n```",
            "wrong_solution": "```python\ndef add(a, b):\n    return a * b\n```",
        }
    )


def test_build_samples_mix(make_code_task: Callable[..., Task]) -> None:
    tasks = [_task(make_code_task, i) for i in range(3)]
    samples = bench.build_samples(tasks, count=1000, loopers=6)
    kinds = Counter(s.kind for s in samples)
    # Pattern of 20: 9 correct, 7 wrong, 2 crash, 1 syntax error, 1 no code -> 450/350/100/50/50 over 1000.
    # Loopers replace slots i % 166 == 165: i = 165, 331, 497, 663, 829, 995, whose pattern positions
    # (i % 20 = 5, 11, 17, 3, 9, 15) were correct, wrong, crash, correct, wrong, wrong.
    assert kinds == {"correct": 448, "wrong": 347, "crash": 99, "syntax_error": 50, "no_code": 50, "loop": 6}
    assert samples[0].task.id == "add0" and samples[1].task.id == "add1"
    assert "while True" in next(s.completion for s in samples if s.kind == "loop")


def test_build_samples_needs_tasks() -> None:
    with pytest.raises(ValueError, match="suite is empty"):
        bench.build_samples([], count=10, loopers=0)


def test_tiny_run_writes_the_report(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_code_task: Callable[..., Task],
    capsys: pytest.CaptureFixture[str],
) -> None:
    tasks = [_task(make_code_task, i) for i in range(4)]
    monkeypatch.setattr(execrl.tasks, "load_suite", lambda name, split="train": tasks, raising=False)
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "bench.json"
    args = parser.parse_args(
        ["--count", "40", "--loopers", "1", "--peer-count", "4", "--timeout-s", "0.5", "--json", str(out)]
    )
    assert bench.run(args) == 0
    report = json.loads(out.read_text())
    assert report["count"] == 40 and report["mismatches"] == []
    assert {"completions_per_s", "outside_sandbox_share", "count", "by_reason"} <= set(report)
    assert 0.0 < report["outside_sandbox_share"] < 1.0 and report["completions_per_s"] > 0
    assert (
        report["by_reason"]["timeout"] == 1 and report["by_reason"]["passed"] == report["by_kind"]["correct"]
    )
    assert "outside-sandbox share" in capsys.readouterr().out
