"""Request-edge checks of the sandbox as pure functions (issue 14, classes 1, 8, 9); no sandbox needed."""

from __future__ import annotations

import math

import pytest

from execrl.sandbox.api import validate_request
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.service.caps import (
    check_batch,
    check_execution,
    check_json_shape,
    execution_bytes,
    fit_default_output,
    result_bytes,
)
from execrl.sandbox.service.fusion import run_code_response
from execrl.sandbox.service.serialize import RequestFieldError
from execrl.sandbox.service.server import ServiceConfig
from execrl.sandbox.types import (
    CallTest,
    CodeTest,
    ExecutionRequest,
    ExecutionResult,
    IOTest,
    Limits,
    Verdict,
    workdir_space_problems,
)
from execrl.sandbox.types import work_path_problems as problems

TWO_TESTS = ExecutionRequest(
    language="python",
    program="x = 1",
    tests=(CodeTest("a", "pass"), CodeTest("bb", "pass")),
    limits=Limits(max_output_bytes=1000),
)


def test_result_and_execution_bounds_by_hand() -> None:
    # marker "\n...[truncated 1099511627776 bytes]" = 35 bytes
    # streams: 3 x (1000 + 35) = 3105; tests: 5 x (4096 + 35) + len(name) each = 20656 + 20657
    assert result_bytes(TWO_TESTS) == 3105 + 20656 + 20657 == 44418
    # in flight, one record per test: 2 x (1000 + 65536)
    assert execution_bytes(TWO_TESTS) == 44418 + 2 * 66536 == 177490


def test_caps_name_the_field() -> None:
    caps = {"max_output_bytes": 1000, "max_tests": 2, "max_result_mb": 1}
    check_execution(TWO_TESTS, **caps)  # exactly at the caps: accepted
    with pytest.raises(RequestFieldError) as info:
        check_execution(TWO_TESTS, **{**caps, "max_output_bytes": 999}, prefix="requests[3]")
    assert info.value.problems[0].field == "requests[3].limits.max_output_bytes"
    with pytest.raises(RequestFieldError) as info:
        check_execution(TWO_TESTS, **{**caps, "max_tests": 1})
    assert info.value.problems[0].field == "tests"
    check_batch([TWO_TESTS] * 23, max_result_mb=1)  # 23 x 44418 = 1,021,614 <= 1 MiB
    with pytest.raises(RequestFieldError) as info:
        check_batch([TWO_TESTS] * 24, max_result_mb=1)  # 1,066,032 > 1,048,576
    assert info.value.problems[0].field == "requests" and info.value.problems[0].kind == "cap_exceeded"


def test_default_output_limit_fits_a_lower_cap_but_an_explicit_one_does_not() -> None:
    default = ExecutionRequest(language="python", program="x = 1")
    assert fit_default_output(default, 4096).limits.max_output_bytes == 4096
    assert fit_default_output(default, 8 << 20) is default
    assert fit_default_output(TWO_TESTS, 64) is TWO_TESTS  # explicit 1000 stays: check_execution refuses it


@pytest.mark.parametrize(
    ("raw", "too_deep"),
    [
        (b'"text"', False),
        (b'{"a": [[1]]}', False),  # depth 3
        (b'{"a": [[[1]]]}', True),  # depth 4
        (b'[[], [[]], {"k": {}}]', False),  # depth 3 at most: siblings do not add up
        (rb'["[[[[[[", "\\", "\\\"[[[[["]', False),  # brackets and escapes inside strings do not count
        (b"[[[[", True),  # not JSON, but already deeper than the cap
        (b"[[[[[]]]]]", True),
    ],
)
def test_json_shape_depth(raw: bytes, too_deep: bool) -> None:
    """Bug: JSON nested ~1,000 deep answered a plain-text 500; counted on the bytes, before parsing."""
    if too_deep:
        with pytest.raises(RequestFieldError, match="nested more than 3 levels deep") as info:
            check_json_shape(raw, max_depth=3)
        assert info.value.problems[0].field == "body"
    else:
        check_json_shape(raw, max_depth=3)


def test_json_shape_counts_values_not_string_content() -> None:
    """Bug: a 64 MiB body of ``{},`` decoded into 22 million dicts (3.2 GB RSS) before any check."""
    check_json_shape(b'[1, 2, {"a": "x,y,z,[,{"}]', max_items=4)  # 2 commas + 1 "[" + 1 "{" = 4
    with pytest.raises(RequestFieldError, match="more than 4 JSON values"):
        check_json_shape(b"[1, 2, 3, {}]", max_items=4)  # 3 + 1 + 1 = 5


@pytest.mark.parametrize(
    ("files", "program_path", "expected"),
    [
        (["a/b.txt", "c"], "main.py", []),
        (["a\x00"], None, [("files", "'a\\x00' contains a NUL byte")]),
        (["."], None, [("files", "'.' has an empty, '.' or '..' component; write it as a/b/c")]),
        (["a//b"], None, [("files", "'a//b' has an empty, '.' or '..' component; write it as a/b/c")]),
        (["/x"], None, [("files", "'/x' is absolute; give a path relative to the work directory")]),
        (["ok", "y" * 256], None, [("files", f"{'y' * 60!r}... (256 characters) has a component longer than 255 bytes")]),
        (["é" * 128], None, [("files", f"{'é' * 60!r}... (128 characters) has a component longer than 255 bytes")]),
        (["a", "a/b"], None, [("files", "'a/b' needs the directory 'a', which is a file")]),
        (["a/b"], "a", [("files", "'a/b' needs the directory 'a', which is a file")]),
        (["m.py"], "m.py", [("program_path", "'m.py' is also in files; the program would replace that file")]),
        ([], "../m.py", [("program_path", "'../m.py' has an empty, '.' or '..' component; write it as a/b/c")]),
    ],
)  # fmt: skip
def test_work_path_problems(
    files: list[str], program_path: str | None, expected: list[tuple[str, str]]
) -> None:
    assert problems(files, program_path) == expected


def test_library_requests_refuse_bad_tolerances_and_paths() -> None:
    """Bug: a NaN or negative tolerance reached math.isclose while judging (HTTP 500, `tasks check` crash)."""
    for bad in (-1.0, math.nan, math.inf):
        call = CallTest(name="t", entry_point="f", rel_tol=bad)
        with pytest.raises(InvalidRequestError, match="test 't': rel_tol must be a finite number >= 0"):
            validate_request(ExecutionRequest(language="python", program="x", tests=(call,)))
        io = IOTest(name="t", stdin="", expected_stdout="", abs_tol=bad)
        with pytest.raises(InvalidRequestError, match="test 't': abs_tol must be a finite number >= 0"):
            validate_request(ExecutionRequest(language="python", program="x", tests=(io,)))
    with pytest.raises(InvalidRequestError, match="files: 'a/../b' has an empty"):
        ExecutionRequest(language="python", program="x", files={"a/../b": ""})
    with pytest.raises(InvalidRequestError, match="'main.py' is also in files"):
        validate_request(ExecutionRequest(language="python", program="x", files={"main.py": ""}))


def test_service_config_checks_its_caps_and_origins() -> None:
    with pytest.raises(InvalidRequestError, match="max_output_bytes"):
        ServiceConfig(max_output_bytes=10)
    with pytest.raises(InvalidRequestError, match="max_result_mb"):
        ServiceConfig(max_result_mb=0)
    with pytest.raises(InvalidRequestError, match="scheme://host"):
        ServiceConfig(allowed_origins=("https://ok.example/path",))
    assert ServiceConfig(allowed_origins=("http://127.0.0.1:3000",)).allowed_origins == (
        "http://127.0.0.1:3000",
    )


def test_run_code_output_limit_message_and_return_code() -> None:
    """Bug: output over the limit answered Failed with an empty message and a null return code."""
    result = ExecutionResult(verdict=Verdict.OUTPUT_LIMIT, stderr_truncated=True, wall_time_s=0.1)
    response = run_code_response(result, "python", max_output_bytes=1024)
    assert response["status"] == "Failed" and response["run_result"]["return_code"] == -9
    assert response["message"] == (
        "execrl verdict: output_limit: the program wrote more than 1024 bytes to stderr; "
        "what is shown is truncated there"
    )


def test_workdir_space_by_hand() -> None:
    """Bug: files that cannot fit the work directory came back as sandbox_error with the harness's traceback."""
    small = Limits(workdir_mb=1, workdir_inodes=16)
    # 255 pages of file + 1 page of program = 256 pages = 1024 KiB: fits exactly (checked in the real sandbox)
    assert workdir_space_problems({"a": "x" * ((1 << 20) - 4096)}, "p", small) == []
    ((field, message),) = workdir_space_problems({"a": "x" * ((1 << 20) - 4095)}, "p", small)
    assert field == "files" and message.startswith(
        "need 1028 KiB of the work directory with the program (1024 KiB)"
    )
    # 13 files in d/ + d + the program + the root = 16 inodes: fits exactly; a 14th file does not
    assert workdir_space_problems({f"d/f{i}": "" for i in range(13)}, "p", small) == []
    ((field, message),) = workdir_space_problems({f"d/f{i}": "" for i in range(14)}, "p", small)
    assert message.startswith("need 17 inodes") and "limits.workdir_inodes (now 16)" in message
    # nested directories count once each: 11 files + a, a/b, a/b/c + the program + the root = 16
    assert workdir_space_problems({f"a/b/c/f{i}": "" for i in range(11)}, "p", small) == []
    assert workdir_space_problems({f"a/b/c/f{i}": "" for i in range(12)}, "p", small) != []


_SHAPES = [
    b'{"a": [[1]]}',
    b'[[], [[]], {"k": {}}]',
    rb'["[[[[[[", "\\", "\\\"[[[[["]',
    rb'{"a": "\\\\\\\\", "b": [["\\\\\"]]"]]}',
    b"[[[[[]]]]]",
    b"]]]]]][[[[",
    b'[1, 2, {"a": "x,y,z,[,{"}]',
    b"[1, 2, 3, {}]",
]


@pytest.mark.parametrize("raw", _SHAPES)
def test_json_shape_is_the_same_in_pieces(raw: bytes) -> None:
    """A large body is scanned in pieces (``caps.body_slices``: issue 35, class 8, one C call over 60 MiB
    held the GIL ~0.5 s); strings, escapes and counts carry over, so every cut gives the same answer."""

    def outcome(slice_bytes: int) -> str:
        try:
            check_json_shape(raw, max_depth=3, max_items=4, slice_bytes=slice_bytes)
        except RequestFieldError as exc:
            return exc.problems[0].message
        return "ok"

    whole = outcome(len(raw))
    assert all(outcome(size) == whole for size in range(1, len(raw) + 1))
