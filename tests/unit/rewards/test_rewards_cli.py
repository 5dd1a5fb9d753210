"""`execrl rewards ls|score`: listing, the completions file format and its errors, the summary table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import execrl.tasks
from execrl.rewards.cli import CompletionFileError, format_summary, read_completions, register
from execrl.tasks.schema import MathSpec, StructuredSpec, Task, TaskMetadata

TASKS = [
    Task("m1", "math", "?", MathSpec("3/4"), TaskMetadata("t", split="test")),
    Task("m2", "math", "?", MathSpec("12"), TaskMetadata("t", split="test")),
    Task(
        "s1",
        "structured",
        "?",
        StructuredSpec({"type": "object", "required": ["a"]}),
        TaskMetadata("t", split="test"),
    ),
]


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="execrl")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def test_ls_prints_every_builtin_domain_with_its_doc(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(["rewards", "ls"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert {"code", "math", "structured"} <= set(lines)
    assert "execrl.rewards.math_verifier:score_math" in lines["math"] and "Exact rational" in lines["math"]
    assert "execrl.rewards.code_verifier:CodeVerifier" in lines["code"]


def test_score_prints_a_summary_and_writes_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(execrl.tasks, "load_suite", lambda name, split="train": TASKS, raising=False)
    completions = _write(
        tmp_path / "c.jsonl",
        [
            {"task_id": "m1", "completion": "The answer is 0.75"},
            {"task_id": "m2", "completion": "#### 13"},
            "",
            {"task_id": "s1", "completion": '{"a": 1}'},
            {"task_id": "m1", "completion": "no idea"},
        ],
    )
    out_json = tmp_path / "out" / "scores.json"
    assert (
        _main(
            ["rewards", "score", "--suite", "x", "--completions", str(completions), "--json", str(out_json)]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert table.splitlines() == [
        "count              4",
        "mean reward        0.5000",
        "pass rate          0.5000",
        "invalid            0 (0.0%)",
        "  passed           2",
        "  no_answer_found  1",
        "  wrong_answer     1",
    ]
    data = json.loads(out_json.read_text())
    assert data["summary"]["reward/count"] == 4.0
    assert [(r["task_id"], r["line"], r["reason"]) for r in data["scores"]] == [
        ("m1", 1, "passed"),
        ("m2", 2, "wrong_answer: expected 12, got 13"),
        ("s1", 4, "passed"),
        ("m1", 5, "no_answer_found"),
    ]


def test_score_unknown_task_id_names_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(execrl.tasks, "load_suite", lambda name, split="train": TASKS, raising=False)
    path = _write(
        tmp_path / "c.jsonl", [{"task_id": "m1", "completion": "1"}, {"task_id": "zz", "completion": "1"}]
    )
    assert _main(["rewards", "score", "--suite", "demo", "--completions", str(path)]) == 2
    assert f"{path}:2: task_id 'zz' is not in suite 'demo' split 'test'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json"], ":1: not valid JSON"),
        (['{"task_id": "a", "completion": "x"}', "[1, 2]"], ":2: expected a JSON object, got list"),
        (['{"completion": "x"}'], ":1: field 'task_id' must be a string (missing)"),
        (['{"task_id": "a", "completion": 3}'], ":1: field 'completion' must be a string (int)"),
        ([""], ": no completions"),
    ],
)
def test_completion_file_errors_name_file_line_and_field(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    path = _write(tmp_path / "c.jsonl", list(lines))
    with pytest.raises(CompletionFileError) as info:
        read_completions(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)


def test_missing_completion_file(tmp_path: Path) -> None:
    with pytest.raises(CompletionFileError, match="nope.jsonl: not found"):
        read_completions(tmp_path / "nope.jsonl")


def test_format_summary_orders_reasons_by_count() -> None:
    metrics = {
        "reward/count": 4.0,
        "reward/invalid_rate": 0.25,
        "reward/mean": 1 / 3,
        "reward/pass_rate": 1 / 3,
        "reward/reason/passed": 1.0,
        "reward/reason/wrong_answer": 2.0,
        "reward/reason/sandbox_error": 1.0,
    }
    assert format_summary(metrics).splitlines() == [
        "count            4",
        "mean reward      0.3333",
        "pass rate        0.3333",
        "invalid          1 (25.0%)",
        "  wrong_answer   2",
        "  passed         1",
        "  sandbox_error  1",
    ]


def test_score_with_a_bad_verifier_path_fails_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "c.jsonl", [{"task_id": "m1", "completion": "1"}])
    argv = [
        "rewards",
        "score",
        "--suite",
        "x",
        "--completions",
        str(path),
        "--verifier",
        "sql=nope.nothing:fn",
    ]
    assert _main(argv) == 2
    assert "cannot import module 'nope.nothing'" in capsys.readouterr().err
