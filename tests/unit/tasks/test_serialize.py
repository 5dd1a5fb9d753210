"""Round trips of every spec and test type through dicts, JSONL files and Hugging Face datasets."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from execrl.sandbox.types import CallTest, CodeTest, IOTest
from execrl.tasks import (
    ChatMessage,
    CodeSpec,
    MathSpec,
    StructuredSpec,
    Task,
    TaskMetadata,
    TaskValidationError,
    from_hf_dataset,
    load_tasks,
    save_tasks,
    task_from_dict,
    task_to_dict,
    to_hf_dataset,
    validate_task,
)


def _tasks() -> list[Task]:
    """One task per spec kind and test type, with lists (not tuples) where JSON would give lists back."""
    function = Task(
        id="fn/1",
        domain="code",
        prompt=(ChatMessage("system", "Be brief."), ChatMessage("user", "Write add(a, b).")),
        spec=CodeSpec(kind="function", entry_point="add", prompt_code="def add(a, b):\n"),
        metadata=TaskMetadata(family="arith", difficulty=2, source="unit", split="test"),
        visible_tests=(CallTest("v0", "add", (1, [2, 3]), {"c": None}, [3, "x"], rel_tol=0.5, abs_tol=0.25),),
        hidden_tests=(CodeTest("h0", "assert add(1, 2) == 3"),),
        reference_solution="```python\ndef add(a, b):\n    return a + b\n```",
        wrong_solution="```python\ndef add(a, b):\n    return a - b\n```",
        audit_tests=(CodeTest("a0", "assert add(5, 5) == 10"),),
    )
    stdio = Task(
        id="io/1",
        domain="code",
        prompt="Echo the input. Ünïcode ✓",
        spec=CodeSpec(kind="stdio", language="cpp"),
        metadata=TaskMetadata(family="echo"),
        hidden_tests=(IOTest("h0", "1 2\n", "1 2\n", compare="float", rel_tol=0.1, abs_tol=0.2),),
    )
    repository = Task(
        id="repo/1",
        domain="code",
        prompt="Fix lib.py",
        spec=CodeSpec(
            kind="repository",
            files={"tests/test_lib.py": "from lib import f\n", "README": "x"},
            program_path="lib.py",
            starter_code="def f():\n    return 1\n",
        ),
        metadata=TaskMetadata(family="repo", difficulty=5),
        hidden_tests=(CodeTest("suite", "import tests.test_lib"),),
    )
    math = Task(
        "m/1",
        "math",
        "What is 3/4 of 1?",
        MathSpec("3/4"),
        TaskMetadata("frac"),
        reference_solution="The answer is 3/4",
    )
    structured = Task(
        "s/1",
        "structured",
        "Give JSON",
        StructuredSpec(
            {"type": "object", "properties": {"a": {"type": "integer"}}}, {"address.city": "Paris"}
        ),
        TaskMetadata("json"),
    )
    return [function, stdio, repository, math, structured]


def test_dict_round_trip_keeps_every_field() -> None:
    for task in _tasks():
        assert task_from_dict(json.loads(json.dumps(task_to_dict(task)))) == task


def test_type_tags_are_written() -> None:
    dicts = [task_to_dict(t) for t in _tasks()]
    assert [d["spec"]["type"] for d in dicts] == ["code", "code", "code", "math", "structured"]
    assert dicts[0]["visible_tests"][0]["type"] == "call"
    assert dicts[0]["hidden_tests"][0]["type"] == "code"
    assert dicts[1]["hidden_tests"][0]["type"] == "io"
    assert dicts[0]["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Write add(a, b)."},
    ]


def test_call_args_come_back_as_a_tuple() -> None:
    task = task_from_dict(task_to_dict(_tasks()[0]))
    test = task.visible_tests[0]
    assert isinstance(test, CallTest) and test.args == (1, [2, 3]) and test.kwargs == {"c": None}


def test_jsonl_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    assert save_tasks(_tasks(), path) == 5
    assert len(path.read_text(encoding="utf-8").splitlines()) == 5
    assert load_tasks(path) == _tasks()
    assert load_tasks(f"file://{path}") == _tasks()


def test_gzip_and_memory_url_round_trip() -> None:
    save_tasks(_tasks(), "memory://unit-serialize/tasks.jsonl.gz")
    assert load_tasks("memory://unit-serialize/tasks.jsonl.gz") == _tasks()


def test_hf_dataset_round_trip() -> None:
    dataset = to_hf_dataset(_tasks())
    assert dataset.num_rows == 5
    assert dataset[1]["prompt"] == "Echo the input. Ünïcode ✓" and dataset[1]["prompt_messages"] == ""
    assert dataset[0]["prompt"] == "" and json.loads(dataset[0]["prompt_messages"])[0]["role"] == "system"
    assert dataset[4]["family"] == "json" and dataset[2]["difficulty"] == 5
    assert from_hf_dataset(dataset) == _tasks()


def test_hf_dataset_rows_are_validated() -> None:
    rows = to_hf_dataset(_tasks()[:2]).to_list()
    rows[1]["spec"] = "{not json"
    rows[0]["difficulty"] = 9
    with pytest.raises(TaskValidationError) as info:
        from_hf_dataset(rows, name="hub")
    assert [str(e) for e in info.value.errors] == [
        "hub[0]: field 'metadata.difficulty': must be in 1..5, got 9",
        "hub[1]: field 'spec': invalid JSON: Expecting property name enclosed in double quotes (column 2)",
    ]


def test_validate_task_rejects_inconsistent_task() -> None:
    bad = Task("x", "code", "p", CodeSpec(kind="function"), TaskMetadata("f"))
    with pytest.raises(TaskValidationError) as info:
        validate_task(bad)
    assert [(e.field, e.message) for e in info.value.errors] == [
        ("spec.entry_point", "missing (required for kind 'function')"),
        ("hidden_tests", "empty: a code task needs at least one hidden test to be scored"),
    ]


def test_domain_must_match_spec_type() -> None:
    data = task_to_dict(_tasks()[3])
    data["domain"] = "structured"
    with pytest.raises(
        TaskValidationError, match="field 'spec.type': domain 'structured' needs spec type 'structured'"
    ):
        task_from_dict(data)


def test_unknown_domain_with_any_spec_is_allowed() -> None:
    data = task_to_dict(_tasks()[3]) | {"domain": "my_domain"}
    assert task_from_dict(data).domain == "my_domain"


def test_audit_test_that_repeats_a_hidden_test_is_reported() -> None:
    """An audit split that repeats a reward test is no held-back check at all: the row names the field."""
    data = task_to_dict(_tasks()[0])
    data["audit_tests"] = [data["hidden_tests"][0]]
    with pytest.raises(TaskValidationError, match=r"audit_tests\[0\].*held back"):
        task_from_dict(data)


def test_task_without_audit_tests_writes_no_audit_key() -> None:
    """Files of tasks without an audit split stay byte-identical to before the field existed."""
    assert "audit_tests" not in task_to_dict(_tasks()[1])
    assert task_to_dict(_tasks()[0])["audit_tests"] == [
        {"type": "code", "name": "a0", "code": "assert add(5, 5) == 10"}
    ]


def test_test_name_defaults_to_its_index_as_in_sandbox_requests() -> None:
    """Regression: task files required a test ``name`` while sandbox requests defaulted it (two parsers)."""
    from execrl.sandbox.service.serialize import case_from_dict

    data = task_to_dict(_tasks()[1])
    raw = {"type": "io", "stdin": "3\n", "expected_stdout": "3\n"}
    data["hidden_tests"] = [data["hidden_tests"][0], raw]
    task = task_from_dict(data)
    assert task.hidden_tests[1] == IOTest("test_1", "3\n", "3\n") == case_from_dict(raw, index=1)


def test_test_errors_are_worded_for_task_files() -> None:
    data = task_to_dict(_tasks()[0])
    data["hidden_tests"] = [
        {"type": "code", "name": 3, "code": "pass", "cmd": "x"},
        {"type": "io", "expected_stdout": "1", "compare": "fuzzy"},
        {"type": "call", "entry_point": "add", "args": "1, 2", "abs_tol": "0.1"},
        ["not", "an", "object"],
        {"name": "untyped"},
    ]
    with pytest.raises(TaskValidationError) as info:
        task_from_dict(data)
    assert [(e.field, e.message) for e in info.value.errors] == [
        ("hidden_tests[0].name", "expected str, got int"),
        ("hidden_tests[0].cmd", "unknown field (known: type, name, code)"),
        ("hidden_tests[1].compare", "must be one of ['exact', 'whitespace', 'float'], got 'fuzzy'"),
        ("hidden_tests[2].args", "expected list, got str"),
        ("hidden_tests[2].abs_tol", "must be a finite number >= 0, got '0.1'"),
        ("hidden_tests[3]", "expected object, got list"),
        ("hidden_tests[4].type", "missing"),
    ]


def test_save_refuses_a_test_that_would_not_load_back(tmp_path: Path) -> None:
    """A tolerance the parser refuses is refused on save too (the check is the parser itself)."""
    bad = dataclasses.replace(_tasks()[1], hidden_tests=(IOTest("h0", "1\n", "1\n", rel_tol=float("nan")),))
    with pytest.raises(TaskValidationError, match=r"hidden_tests\[0\]\.rel_tol.*finite number >= 0, got nan"):
        save_tasks([bad], tmp_path / "t.jsonl")
    assert not (tmp_path / "t.jsonl").exists()
