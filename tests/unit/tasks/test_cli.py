"""``execrl tasks ls|overlap|import`` through the real top-level parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.tasks import import_mbpp, load_suite, load_tasks, save_tasks

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tasks"


def test_ls_json_lists_humaneval(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "ls", "--json"]) == 0
    infos = {i["name"]: i for i in json.loads(capsys.readouterr().out)}
    assert infos["humaneval"]["counts"] == {"test": 164} and infos["humaneval"]["domains"] == ["code"]


def test_ls_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "ls"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["suite", "domains", "train", "test"]
    assert any(line.split()[:4] == ["humaneval", "code", "-", "164"] for line in out)


def test_import_converts_to_our_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "cc.jsonl"
    assert main(["tasks", "import", "codecontests", str(FIXTURES / "codecontests.jsonl"), str(dest)]) == 0
    assert "imported 1 task(s)" in capsys.readouterr().out
    (task,) = load_tasks(dest)
    assert task.id == "codecontests/1000_A. Max of Three" and task.metadata.split == "train"
    assert main(["tasks", "import", "mbpp", str(FIXTURES / "mbpp.jsonl"), str(dest), "--split", "test"]) == 0
    assert {t.metadata.split for t in load_tasks(dest)} == {"test"}


def test_import_bad_file_exits_2_with_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text('{"task_id": 3}\n')
    assert main(["tasks", "import", "mbpp", str(src), str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{src}:1: field 'text': missing" in err and f"{src}:1: field 'test_list': missing" in err


def test_overlap_on_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    humaneval = load_suite("humaneval", "test")
    contaminated = tmp_path / "dirty.jsonl"
    save_tasks([humaneval[5]], contaminated)
    assert main(["tasks", "overlap", str(contaminated), "--against", "humaneval"]) == 1
    assert "FLAGGED HumanEval/5 ~ HumanEval/5" in capsys.readouterr().out
    clean = tmp_path / "clean.jsonl"
    save_tasks(import_mbpp(FIXTURES / "mbpp.jsonl"), clean)
    assert main(["tasks", "overlap", str(clean), "--against", "humaneval", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["clean"], data["train_tasks"], data["eval_tasks"], data["n"]) == (True, 2, 164, 13)


def test_check_refuses_train_split_of_humaneval(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "check", "humaneval", "--split", "train"]) == 2
    assert "evaluation only" in capsys.readouterr().err


@pytest.mark.slow
def test_check_imported_file_through_the_real_reward_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "cc.jsonl"
    assert main(["tasks", "import", "codecontests", str(FIXTURES / "codecontests.jsonl"), str(dest)]) == 0
    capsys.readouterr()
    assert main(["tasks", "check", str(dest), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["failures"] == []
    assert report["families"][0] == {
        "family": "codecontests",
        "tasks": 1,
        "reference_passed": 1,
        "reference_total": 1,
        "wrong_failed": 1,
        "wrong_total": 1,
        "visible_passed": 1,
        "visible_total": 1,
        "audit_passed": 0,
        "audit_total": 0,
        "tool_passed": 0,  # no reference cells: the tool column is empty
        "tool_total": 0,
        "ok": True,
    }
    # the fixture's task has too few tests to hold some back for an audit: the check says so
    assert report["without_audit"] == [t.id for t in load_tasks(dest)]
