"""Loading validates every row: all bad rows are reported with file, line and field, or set aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execrl.sandbox.types import IOTest
from execrl.tasks import (
    LoadReport,
    TaskSourceError,
    TaskValidationError,
    load_tasks,
    save_tasks,
    task_to_dict,
)
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata


def _good(task_id: str) -> dict[str, object]:
    task = Task(
        task_id,
        "code",
        "Echo",
        CodeSpec(kind="stdio"),
        TaskMetadata("echo"),
        hidden_tests=(IOTest("a", "1\n", "1\n"), IOTest("b", "2\n", "2\n")),
    )
    return task_to_dict(task)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _mixed_file(tmp_path: Path) -> tuple[Path, list[str]]:
    no_stdout = _good("t2")
    del no_stdout["hidden_tests"][1]["expected_stdout"]  # type: ignore[index]
    bad_kind = _good("t4")
    bad_kind["spec"]["kind"] = "script"  # type: ignore[index]
    lines = [
        json.dumps(_good("t1")),
        json.dumps(no_stdout),
        "",  # blank lines are skipped but still counted
        '{"id": "t3", oops',
        json.dumps(bad_kind),
        json.dumps(_good("t1")),
        json.dumps(_good("t5")),
    ]
    return _write(tmp_path / "tasks.jsonl", lines), lines


def test_all_bad_rows_are_reported_with_file_line_and_field(tmp_path: Path) -> None:
    path, _ = _mixed_file(tmp_path)
    with pytest.raises(TaskValidationError) as info:
        load_tasks(path)
    assert [str(e) for e in info.value.errors] == [
        f"{path}:2: field 'hidden_tests[1].expected_stdout': missing",
        f"{path}:4: row: invalid JSON: Expecting property name enclosed in double quotes (column 14)",
        f"{path}:5: field 'spec.kind': must be one of ['function', 'stdio', 'repository'], got 'script'",
        f"{path}:6: field 'id': duplicate id 't1' (first at {path}:1)",
    ]
    assert info.value.bad_locations == (f"{path}:2", f"{path}:4", f"{path}:5", f"{path}:6")
    assert "4 invalid row(s)" in str(info.value) and "rejects_path" in str(info.value)


def test_rejects_file_gets_bad_rows_verbatim_and_counts(tmp_path: Path) -> None:
    path, lines = _mixed_file(tmp_path)
    report = load_tasks(path, rejects_path=tmp_path / "rejects.jsonl")
    assert isinstance(report, LoadReport)
    assert (report.loaded, report.rejected) == (2, 4)
    assert [t.id for t in report.tasks] == ["t1", "t5"]
    rejects = [json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert [r["row"] for r in rejects] == [lines[1], lines[3], lines[4], lines[5]]
    assert rejects[0]["location"] == f"{path}:2"
    assert rejects[0]["errors"] == [f"{path}:2: field 'hidden_tests[1].expected_stdout': missing"]


def test_clean_file_with_rejects_path_reports_zero(tmp_path: Path) -> None:
    path = _write(tmp_path / "ok.jsonl", [json.dumps(_good("a"))])
    report = load_tasks(path, rejects_path=tmp_path / "rejects.jsonl")
    assert (report.loaded, report.rejected) == (1, 0)
    assert (tmp_path / "rejects.jsonl").read_text() == ""


def test_many_problems_in_one_row_are_all_listed(tmp_path: Path) -> None:
    row = {"id": 7, "domain": "code", "spec": {"type": "code", "kind": "stdio", "lang": "c"}, "metadata": {}}
    path = _write(tmp_path / "one.jsonl", [json.dumps(row)])
    with pytest.raises(TaskValidationError) as info:
        load_tasks(path)
    assert [(e.field, e.message) for e in info.value.errors] == [
        ("id", "expected str, got int"),
        ("prompt", "missing"),
        (
            "spec.lang",
            "unknown field (known: type, kind, language, entry_point, prompt_code, files, program_path, starter_code)",
        ),
        ("metadata.family", "missing"),
    ]


def test_non_object_rows_and_unknown_test_type(tmp_path: Path) -> None:
    weird = _good("w")
    weird["hidden_tests"] = [{"type": "shell", "name": "x"}]
    path = _write(tmp_path / "w.jsonl", ["[1, 2]", json.dumps(weird)])
    with pytest.raises(TaskValidationError) as info:
        load_tasks(path)
    assert [str(e) for e in info.value.errors] == [
        f"{path}:1: row: expected object, got list",
        f"{path}:2: field 'hidden_tests[0].type': must be one of ['code', 'call', 'io'], got 'shell'",
    ]


def test_memory_url_load() -> None:
    url = "memory://unit-storage/tasks.jsonl"
    import fsspec

    with fsspec.open(url, "wt") as out:
        out.write(json.dumps(_good("m1")) + "\n" + json.dumps(_good("m2")) + "\n")
    assert [t.id for t in load_tasks(url)] == ["m1", "m2"]


def test_s3_without_s3fs_names_the_package() -> None:
    pytest.importorskip("fsspec")
    try:
        import s3fs  # noqa: F401
    except ImportError:
        with pytest.raises(TaskSourceError, match="needs the package 's3fs'"):
            load_tasks("s3://bucket/tasks.jsonl")
    else:
        pytest.skip("s3fs is installed here; the missing-package message cannot be exercised")


def test_save_refuses_duplicates_and_invalid_tasks(tmp_path: Path) -> None:
    task = Task(
        "d", "code", "p", CodeSpec(kind="stdio"), TaskMetadata("f"), hidden_tests=(IOTest("a", "", "x"),)
    )
    with pytest.raises(TaskValidationError, match="d: field 'id': duplicate id"):
        save_tasks([task, task], tmp_path / "dup.jsonl")
    assert not (tmp_path / "dup.jsonl").exists()


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_tasks(tmp_path / "nope.jsonl")
    with pytest.raises(TaskSourceError, match="empty task path"):
        load_tasks("")
