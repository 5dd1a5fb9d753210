"""Identifiers that reach generated test code are validated (issue 14, class 3).

Regression: LiveCodeBench's ``func_name`` was pasted into test code unchecked, so a row whose function name
is an expression returning the expected value made a wrong completion score 1.0. Every importer and the
task schema itself now refuse a name that is not a Python identifier, naming file, line and field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execrl.sandbox.types import CallTest
from execrl.tasks import TaskValidationError, import_apps, import_livecodebench, import_mbpp_plus
from execrl.tasks.serialize import parse_task, task_to_dict
from execrl.tasks.storage import load_tasks

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tasks"
HOSTILE = ["countPairs(*[]) if 0 else (lambda *a: 2)", "class", "a b", "", "1x", "f;import os"]


def _write_row(tmp_path: Path, fixture: str, line: int, edit: object) -> Path:
    rows = (FIXTURES / fixture).read_text().splitlines()
    row = json.loads(rows[line])
    edit(row)  # type: ignore[operator]
    path = tmp_path / fixture
    path.write_text(json.dumps(row) + "\n")
    return path


@pytest.mark.parametrize("name", HOSTILE)
def test_identifier_problem_refuses_expressions_and_keywords(name: str) -> None:
    from execrl.tasks.serialize import identifier_problem

    assert identifier_problem(name) is not None
    assert identifier_problem("countPairs") is None and identifier_problem("_f2") is None


@pytest.mark.parametrize("name", HOSTILE)
def test_livecodebench_func_name_must_be_an_identifier(tmp_path: Path, name: str) -> None:
    path = _write_row(
        tmp_path, "livecodebench.jsonl", 1, lambda r: r.update(metadata=json.dumps({"func_name": name}))
    )
    with pytest.raises(TaskValidationError) as info:
        import_livecodebench(path)
    (error,) = info.value.errors
    assert (error.location, error.field) == (f"{path}:1", "metadata.func_name")
    assert "must be a Python identifier" in error.message


def test_livecodebench_func_name_of_wrong_type_is_an_error(tmp_path: Path) -> None:
    path = _write_row(
        tmp_path, "livecodebench.jsonl", 1, lambda r: r.update(metadata=json.dumps({"func_name": 7}))
    )
    with pytest.raises(TaskValidationError, match=r"livecodebench.jsonl:1: field 'metadata.func_name'"):
        import_livecodebench(path)


def test_apps_fn_name_keyword_is_refused(tmp_path: Path) -> None:
    def edit(row: dict[str, object]) -> None:
        io = json.loads(str(row["input_output"]))
        row["input_output"] = json.dumps(io | {"fn_name": "lambda"})

    path = _write_row(tmp_path, "apps.jsonl", 1, edit)
    with pytest.raises(TaskValidationError, match=r"apps.jsonl:1: field 'input_output.fn_name': must be"):
        import_apps(path)


def test_mbpp_plus_entry_point_is_validated(tmp_path: Path) -> None:
    path = _write_row(tmp_path, "mbpp_plus.jsonl", 0, lambda r: r.update(entry_point="print) or (f"))
    with pytest.raises(TaskValidationError, match=r"mbpp_plus.jsonl:1: field 'entry_point': must be"):
        import_mbpp_plus(path)


def _native_task() -> dict[str, object]:
    (task,) = import_livecodebench(FIXTURES / "livecodebench.jsonl")[1:]
    data = task_to_dict(task)
    data["hidden_tests"] = [
        {"type": "call", "name": "c0", "entry_point": "countPairs", "args": [[1, 4], 5], "expected": 1}
    ]
    return data


def test_schema_refuses_call_test_and_spec_entry_points_that_are_not_names(tmp_path: Path) -> None:
    data = _native_task()
    data["spec"] = dict(data["spec"]) | {"entry_point": "Solution or True"}  # type: ignore[arg-type]
    data["hidden_tests"][0]["entry_point"] = "f()"  # type: ignore[index]
    _, problems = parse_task(data)
    assert ("spec.entry_point", "must be a Python identifier") in [(f, m[:27]) for f, m in problems]
    assert ("hidden_tests[0].entry_point", "must be a Python identifier") in [
        (f, m[:27]) for f, m in problems
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(TaskValidationError, match=r"tasks.jsonl:1: field 'spec.entry_point'"):
        load_tasks(path)


@pytest.mark.parametrize("tol", [-1.0, float("nan"), float("inf"), 10**400])
def test_schema_refuses_negative_or_nonfinite_tolerances(tol: float) -> None:
    """Regression: a NaN or negative tolerance crashed ``execrl tasks check`` instead of being refused."""
    data = _native_task()
    data["hidden_tests"][0]["rel_tol"] = tol  # type: ignore[index]
    _, problems = parse_task(data)
    assert [f for f, _ in problems] == ["hidden_tests[0].rel_tol"]
    assert "finite number >= 0" in problems[0][1]
    assert CallTest(name="x", entry_point="f").rel_tol == 1e-6  # the default still passes
