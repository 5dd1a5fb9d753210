"""``execrl sandbox run`` input handling: tests files, language from suffix, the verdict table."""

from __future__ import annotations

from pathlib import Path

import pytest

from execrl.sandbox import CallTest, CodeTest, ExecutionResult, IOTest, types
from execrl.sandbox.cli import InvalidTestsFileError, format_result, language_for, load_tests
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.types import Verdict


def test_json_array_with_all_three_types(tmp_path: Path) -> None:
    path = tmp_path / "tests.json"
    path.write_text(
        '[\n {"type": "io", "stdin": "1 2", "expected_stdout": "3"},\n'
        ' {"type": "call", "name": "c", "entry_point": "add", "args": [1, 2], "expected": 3},\n'
        ' {"type": "code", "code": "assert True"}\n]\n'
    )
    assert load_tests(path) == (
        IOTest("test_0", stdin="1 2", expected_stdout="3"),
        CallTest("c", "add", args=(1, 2), expected=3),
        CodeTest("test_2", "assert True"),
    )


def test_jsonl_skips_blank_and_comment_lines(tmp_path: Path) -> None:
    path = tmp_path / "tests.jsonl"
    path.write_text('# header\n\n{"type": "code", "code": "pass"}\n{"type": "code", "code": "x = 1"}\n')
    assert load_tests(path) == (CodeTest("test_0", "pass"), CodeTest("test_1", "x = 1"))


def test_json_array_error_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[\n  {"type": "code", "code": "pass"},\n\n  {"type": "io",\n   "stdin": "1"}\n]')
    with pytest.raises(
        InvalidTestsFileError, match=r"t\.json:4: test 1: field 'expected_stdout': Field required"
    ):
        load_tests(path)


def test_jsonl_error_names_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "code", "code": "pass"}\n{"type": "call", "entry_point": 5}\n')
    with pytest.raises(
        InvalidTestsFileError, match=r"t\.jsonl:2: test 1: field 'entry_point': Input should be"
    ):
        load_tests(path)


def test_jsonl_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "code", "code": "pass"}\n\n{"type": "code", \n')
    with pytest.raises(InvalidTestsFileError, match=r"t\.jsonl:3: not JSON"):
        load_tests(path)


def test_json_array_missing_comma_names_line(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[\n{"type": "code", "code": "a"}\n{"type": "code", "code": "b"}\n]')
    with pytest.raises(InvalidTestsFileError, match=r"t\.json:3: expected ',' or a final"):
        load_tests(path)


def test_json_file_must_be_an_array(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"type": "code", "code": "a"}')
    with pytest.raises(InvalidTestsFileError, match="must be a JSON array"):
        load_tests(path)


def test_explicit_names_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"type": "code", "name": "a", "code": "pass"}\n{"type": "code", "name": "b", "code": "x"}\n'
    )
    assert [t.name for t in load_tests(path)] == ["a", "b"]


def test_non_utf8_tests_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type": "code", "code": "\xff"}\n')
    with pytest.raises(InvalidRequestError, match=r"t\.jsonl: tests file is not UTF-8"):
        load_tests(path)


def test_language_from_suffix_and_override() -> None:
    assert language_for(Path("a.py"), None) == "python"
    assert language_for(Path("a.CC"), None) == "cpp"
    assert language_for(Path("a.txt"), "python") == "python"
    with pytest.raises(InvalidRequestError, match="pass --language"):
        language_for(Path("a.rb"), None)


def test_table_shows_each_test_and_why_it_failed() -> None:
    result = ExecutionResult(
        verdict=Verdict.WRONG_ANSWER,
        tests=(
            types.TestResult("t_ok", Verdict.PASSED, wall_time_s=0.0012),
            types.TestResult("t_bad", Verdict.WRONG_ANSWER, input="1 2", expected="3", got="4"),
            types.TestResult(
                "t_err",
                Verdict.RUNTIME_ERROR,
                error_type="ZeroDivisionError",
                error_message="division by zero",
            ),
        ),
        stdout="ignored for test runs",
    )
    table = format_result(result, "sol.py (python)")
    assert "verdict  wrong_answer (1/3 tests passed)" in table
    assert "t_ok" in table and "1.2 ms" in table
    assert "input '1 2' expected '3' got '4'" in table
    assert "ZeroDivisionError: division by zero" in table
    assert "ignored for test runs" not in table
