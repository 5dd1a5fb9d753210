"""Each importer on a small fixture file in its public format (tests/fixtures/tasks/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execrl.sandbox.judge import asserts
from execrl.sandbox.types import CodeTest, IOTest
from execrl.tasks import (
    TaskSourceError,
    TaskValidationError,
    get_importer,
    import_apps,
    import_codecontests,
    import_livecodebench,
    import_mbpp,
    import_mbpp_plus,
    import_sandboxfusion,
)
from execrl.tasks.schema import CodeSpec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tasks"


def test_mbpp() -> None:
    first, second = import_mbpp(FIXTURES / "mbpp.jsonl")
    assert (first.id, first.metadata.split, second.metadata.split) == ("mbpp/11", "test", "train")
    assert first.spec == CodeSpec(kind="function", entry_point="remove_occ")
    assert 'assert remove_occ("hello","l") == "heo"' in first.prompt
    assert first.visible_tests == (CodeTest("visible_0", 'assert remove_occ("hello","l") == "heo"'),)
    assert [t.name for t in first.hidden_tests] == ["test_0", "test_1", "test_2"]
    assert "\r" not in (first.reference_solution or "") and first.reference_solution.startswith("```python\n")
    # setup code is prepended to every test; challenge tests are hidden too
    assert [t.code for t in second.hidden_tests][-1] == "import math\nassert sum_squares([10] * 3) == 300"


def test_mbpp_split_override() -> None:
    assert {t.metadata.split for t in import_mbpp(FIXTURES / "mbpp.jsonl", split="train")} == {"train"}


def test_mbpp_plus() -> None:
    common, area = import_mbpp_plus(FIXTURES / "mbpp_plus.jsonl")
    assert (common.id, common.spec.entry_point, common.metadata.split) == (
        "mbpp_plus/2",
        "common_sorted",
        "test",
    )
    assert common.visible_tests == (
        CodeTest("visible_0", "assert common_sorted([3, 4, 5, 6], [5, 7, 4, 10]) == [4, 5]"),
    )
    assert common.hidden_tests[0].code.startswith("def assertion(out, exp, atol):")
    assert not common.prompt.startswith('"""') and common.prompt.startswith("Write a function to find")
    assert area.hidden_tests[0].code.startswith("import math\n")


def test_mbpp_plus_without_test_harness_explains_why(tmp_path: Path) -> None:
    row = json.loads((FIXTURES / "mbpp_plus.jsonl").read_text().splitlines()[0])
    del row["test"]
    path = tmp_path / "plus.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(TaskValidationError, match=r"plus.jsonl:1: field 'test': missing: MBPP\+ rows need"):
        import_mbpp_plus(path)


def test_apps_stdio_and_call_based() -> None:
    stdio, call = import_apps(FIXTURES / "apps.jsonl")
    assert (stdio.spec.kind, stdio.metadata.difficulty, call.metadata.difficulty) == ("stdio", 1, 3)
    assert stdio.hidden_tests[1] == IOTest("test_1", "10 -3\n", "7\n")
    assert stdio.visible_tests == stdio.hidden_tests[:1]
    assert call.spec == CodeSpec(kind="function", entry_point="Solution", starter_code=call.spec.starter_code)
    code = call.hidden_tests[0].code
    assert "Solution().countVowels(*_args)" in code and "_json.loads('[\"hello\"]')" in code
    plan = asserts.plan(code)  # the expected value is judged by the parent, outside the sandbox (issue 9)
    assert plan.form == "judged" and plan.expectations[0].op == "In"


def test_codecontests() -> None:
    (task,) = import_codecontests(FIXTURES / "codecontests.jsonl")
    assert task.id == "codecontests/1000_A. Max of Three" and task.metadata.difficulty == 1
    assert [t.name for t in task.visible_tests] == ["public_0"]
    assert [t.name for t in task.hidden_tests] == ["public_0", "private_0", "private_1", "generated_0"]
    assert (
        task.reference_solution == "```python\nprint(max(map(int, input().split())))\n```"
    )  # the Python 3 one
    assert task.wrong_solution == "```python\nprint(sorted(map(int, input().split()))[1])\n```"


def test_livecodebench_stdin_and_functional() -> None:
    stdin, functional = import_livecodebench(FIXTURES / "livecodebench.jsonl")
    assert (stdin.id, stdin.spec.kind, stdin.metadata.split) == ("livecodebench/abc999_a", "stdio", "test")
    assert stdin.visible_tests == (IOTest("public_0", "3\n", "6\n"),)
    assert [t.name for t in stdin.hidden_tests] == ["public_0", "private_0", "private_1"]
    assert functional.spec.entry_point == "Solution" and functional.metadata.difficulty == 3
    assert "Solution().countPairs(*_args)" in functional.hidden_tests[0].code
    assert "_json.loads('[[1, 2, 3, 4], 5]')" in functional.hidden_tests[0].code


def test_livecodebench_compressed_private_cases_are_refused() -> None:
    with pytest.raises(TaskValidationError) as info:
        import_livecodebench(FIXTURES / "livecodebench_compressed.jsonl")
    (error,) = info.value.errors
    assert error.location.endswith("livecodebench_compressed.jsonl:1") and error.field == "private_test_cases"
    assert "unpickling downloaded data can run arbitrary code" in error.message


def test_sandboxfusion_json_array() -> None:
    reverse, words = import_sandboxfusion(FIXTURES / "sandboxfusion.json")
    assert (reverse.id, reverse.metadata.difficulty, words.metadata.difficulty) == ("oj/1", 1, 3)
    assert reverse.hidden_tests == (IOTest("test_0", "abc\n", "cba\n"), IOTest("test_1", "x\n", "x\n"))
    assert (
        reverse.reference_solution == "```python\nprint(input()[::-1])\n```"
        and words.reference_solution is None
    )
    assert words.prompt.startswith("Print the number of words")


def test_sandboxfusion_bad_rows_are_located_by_index(tmp_path: Path) -> None:
    rows = json.loads((FIXTURES / "sandboxfusion.json").read_text())
    rows[0]["test"][1]["input"] = {"stdin": "x", "data.txt": "1"}
    del rows[1]["test"]
    path = tmp_path / "sf.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(TaskValidationError) as info:
        import_sandboxfusion(path)
    assert [str(e) for e in info.value.errors] == [
        f"{path}[0]: field 'test[1].input': files other than 'stdin' are not supported: ['data.txt']",
        f"{path}[1]: field 'test': missing",
    ]


def test_importer_rows_report_file_line_field(tmp_path: Path) -> None:
    lines = (FIXTURES / "apps.jsonl").read_text().splitlines()
    broken = json.loads(lines[0]) | {"difficulty": "legendary", "input_output": "{not json"}
    path = tmp_path / "apps.jsonl"
    path.write_text("\n".join([lines[1], json.dumps(broken)]) + "\n")
    with pytest.raises(TaskValidationError) as info:
        import_apps(path)
    assert [str(e) for e in info.value.errors] == [
        f"{path}:2: field 'input_output': invalid JSON text: Expecting property name enclosed in double quotes (column 2)",
        f"{path}:2: field 'difficulty': unknown difficulty 'legendary'; known: ['introductory', 'interview', 'competition']",
    ]


def test_unknown_format_lists_known() -> None:
    with pytest.raises(TaskSourceError, match="known formats: apps, codecontests, livecodebench, mbpp"):
        get_importer("humaneval_x")
