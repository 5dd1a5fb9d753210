"""JSON <-> dataclass conversion shared by the sandbox CLI and HTTP service."""

from __future__ import annotations

import json

import pytest

from execrl.sandbox import CallTest, CodeTest, ExecutionRequest, ExecutionResult, IOTest, Limits, types
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.service.serialize import (
    RequestFieldError,
    case_from_dict,
    find_unencodable,
    request_from_dict,
    request_to_dict,
    result_from_dict,
    result_to_dict,
)
from execrl.sandbox.types import Verdict


def _request() -> ExecutionRequest:
    return ExecutionRequest(
        language="python",
        program="def add(a, b):\n    return a + b\n",
        tests=(
            CallTest("c", "add", args=(1, [2, 3]), kwargs={"b": 2.5}, expected=[1, 2], rel_tol=1e-3),
            IOTest("i", stdin="1 2\n", expected_stdout="3\n", compare="float"),
            CodeTest("k", "assert add(1, 2) == 3"),
        ),
        stdin="x",
        files={"pkg/data.txt": "hello"},
        program_path="pkg/main.py",
        limits=Limits(timeout_s=2.5, memory_mb=128),
        stop_on_first_failure=True,
    )


def test_request_round_trips_through_json_text() -> None:
    request = _request()
    assert request_from_dict(json.loads(json.dumps(request_to_dict(request)))) == request


def test_request_json_tags_each_test_with_its_type() -> None:
    tests = request_to_dict(_request())["tests"]
    assert [t["type"] for t in tests] == ["call", "io", "code"]
    assert tests[0]["args"] == [1, [2, 3]]


def test_omitted_fields_take_dataclass_defaults_and_names_default_to_index() -> None:
    request = request_from_dict(
        {"language": "python", "program": "x = 1", "tests": [{"type": "code", "code": "pass"}]}
    )
    assert request.limits == Limits()
    assert request.tests == (CodeTest("test_0", "pass"),)
    assert request.stdin == "" and request.files == {} and request.program_path is None


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (
            {"language": "python", "program": "x", "tests": [{"type": "io", "stdin": ""}]},
            "tests[0].expected_stdout",
        ),
        ({"language": "python", "program": "x", "tests": [{"code": "pass"}]}, "tests[0]"),
        ({"language": "python", "program": "x", "limits": {"timeout_s": "5"}}, "limits.timeout_s"),
        ({"language": "python", "program": "x", "limits": {"timeout": 5}}, "limits.timeout"),
        ({"language": "python", "program": "x", "limits": {"memory_mb": 1.5}}, "limits.memory_mb"),
        ({"language": "python", "program": 3}, "program"),
        ({"program": "x"}, "language"),
        ({"language": "python", "program": "x", "stdin": "a\ud800"}, "stdin"),
        ({"language": "python", "program": "x", "files": {"a.txt": "\udcff"}}, "files.a.txt"),
        ([1, 2], "body"),
    ],
)
def test_schema_errors_name_the_field(data: object, field: str) -> None:
    with pytest.raises(RequestFieldError) as info:
        request_from_dict(data)
    assert info.value.problems[0].field == field
    assert str(info.value).startswith(f"{field}: ")


def test_value_errors_name_the_field() -> None:
    with pytest.raises(RequestFieldError, match=r"^limits: limits\.timeout_s=5000\.0 is out of range"):
        request_from_dict({"language": "python", "program": "x", "limits": {"timeout_s": 5000}})
    with pytest.raises(RequestFieldError, match="^program: is empty"):
        request_from_dict({"language": "python", "program": "   "})
    with pytest.raises(InvalidRequestError, match="test names must be unique"):
        request_from_dict(
            {"language": "python", "program": "x", "tests": [{"type": "code", "name": "a", "code": ""}] * 2}
        )


def test_prefix_is_prepended_to_fields() -> None:
    with pytest.raises(RequestFieldError) as info:
        request_from_dict({"language": "python"}, prefix="requests[3]")
    assert info.value.problems[0].field == "requests[3].program"


def test_single_test_from_dict() -> None:
    assert case_from_dict({"type": "call", "entry_point": "f", "args": [1]}, index=4) == CallTest(
        "test_4", "f", args=(1,)
    )
    with pytest.raises(RequestFieldError) as info:
        case_from_dict({"type": "io", "expected_stdout": 3})
    assert info.value.problems[0].field == "expected_stdout"


def _result() -> ExecutionResult:
    return ExecutionResult(
        verdict=Verdict.WRONG_ANSWER,
        tests=(
            types.TestResult("a", Verdict.PASSED, wall_time_s=0.001),
            types.TestResult("b", Verdict.WRONG_ANSWER, input="1", expected="2", got="3"),
        ),
        stdout="out",
        exit_code=0,
        cpu_time_s=0.01,
        wall_time_s=0.02,
        peak_memory_mb=9.5,
    )


def test_result_round_trips_and_adds_derived_fields() -> None:
    data = json.loads(json.dumps(result_to_dict(_result())))
    assert data["verdict"] == "wrong_answer"
    assert data["tests"][1]["verdict"] == "wrong_answer"
    assert data["passed"] is False and data["pass_fraction"] == 0.5
    assert result_from_dict(data) == _result()


def test_result_with_invalid_bytes_in_output_still_encodes() -> None:
    raw = b"ok \xff\xfe end".decode("utf-8", "surrogateescape")
    data = result_to_dict(ExecutionResult(verdict=Verdict.PASSED, stdout=raw, stderr="lone \ud800"))
    text = json.dumps(data, ensure_ascii=False).encode("utf-8")  # would raise on a surrogate
    assert data["stdout"] == "ok \ufffd\ufffd end"
    assert data["stderr"] == "lone ?"
    assert b"ok" in text


def test_find_unencodable_reports_nested_paths() -> None:
    assert find_unencodable({"a": [{"b": "fine"}, {"c": "\ud800"}]}) == "a[1].c"
    assert find_unencodable({"a": ["fine"]}) is None


def test_json_models_cover_every_dataclass_field() -> None:
    """Guards against a field added to a dataclass but not accepted (or silently dropped) over JSON."""
    import dataclasses

    from execrl.sandbox.service import serialize

    def names(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    assert set(serialize.LimitsModel.model_fields) == names(Limits)
    # files_base64: the bytes entries of ExecutionRequest.files (JSON strings cannot hold bytes)
    assert set(serialize.ExecutionRequestModel.model_fields) == names(ExecutionRequest) | {"files_base64"}
    assert set(serialize._CallTestModel.model_fields) == names(CallTest) | {"type"}
    assert set(serialize._IOTestModel.model_fields) == names(IOTest) | {"type"}
    assert set(serialize._CodeTestModel.model_fields) == names(CodeTest) | {"type"}
