"""SandboxFusion /run_code request parsing and response mapping (no sandbox needed)."""

from __future__ import annotations

import base64

import pytest

from execrl.sandbox import ExecutionResult, Limits
from execrl.sandbox.service import fusion
from execrl.sandbox.service.fusion import UnsupportedLanguage, parse_run_code, run_code_response
from execrl.sandbox.service.serialize import RequestFieldError
from execrl.sandbox.types import Verdict


def test_verl_style_body_becomes_a_plain_run() -> None:
    body = {
        "compile_timeout": 10, "run_timeout": 3, "code": "print(input())", "stdin": "7\n",
        "memory_limit_MB": 256, "language": "python", "files": {}, "fetch_files": [],
    }  # fmt: skip
    request = parse_run_code(body, default_memory_mb=1024)
    assert request.language == "python" and request.program == "print(input())" and request.stdin == "7\n"
    assert request.tests == ()
    assert request.limits == Limits(timeout_s=3.0, cpu_time_s=3.0, memory_mb=256, compile_timeout_s=10.0)


def test_defaults_alias_and_files() -> None:
    encoded = base64.b64encode("héllo".encode()).decode()
    body = {"code": "x=1", "language": "python3", "files": {"d/a.txt": encoded, "skip.txt": None}}
    request = parse_run_code(body, default_memory_mb=700)
    assert request.language == "python"
    # -1 -> server default; compile_timeout's default is SandboxFusion's 10 s
    assert request.limits == Limits(timeout_s=10.0, cpu_time_s=10.0, memory_mb=700, compile_timeout_s=10.0)
    assert request.files == {"d/a.txt": "héllo".encode()}  # bytes as sent: any file, not only text
    assert request.stdin == ""


def test_run_timeout_limits_the_run_only() -> None:
    body = {"code": "int main(){}", "language": "cpp", "run_timeout": 2, "compile_timeout": 5}
    limits = parse_run_code(body, default_memory_mb=512).limits
    assert (limits.timeout_s, limits.cpu_time_s) == (2.0, 2.0)
    assert limits.compile_timeout_s == 5.0  # the compile step's own limit (issue 9: it was ignored)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"code": "x", "language": "cobol"}, "language"),
        ({"code": "x"}, "language"),
        ({"language": "python"}, "code"),
        ({"code": "x", "language": "python", "run_timeout": 0}, "run_timeout"),
        ({"code": "x", "language": "python", "run_timeout": "soon"}, "run_timeout"),
        ({"code": "x", "language": "python", "compile_timeout": -1}, "compile_timeout"),
        ({"code": "x", "language": "python", "memory_limit_MB": 8}, "memory_limit_MB"),
        ({"code": "x", "language": "python", "fetch_files": ["/etc/passwd"]}, "fetch_files"),
        ({"code": "x", "language": "python", "fetch_files": ["../out.txt"]}, "fetch_files"),
        ({"code": "x", "language": "python", "fetch_files": ["a/./b"]}, "fetch_files"),
        ({"code": "x", "language": "python", "fetch_files": ["a", "a"]}, "fetch_files"),
        ({"code": "x", "language": "python", "files": {"a": "%%%"}}, "files.a"),
        ({"code": "x", "language": "python", "files": {"../a": "eA=="}}, "files"),
        ({"code": "x", "language": "python", "files": {"/tmp/a": "eA=="}}, "files"),
        ({"code": "x\ud800", "language": "python"}, "code"),
    ],
)
def test_bad_bodies_name_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(RequestFieldError) as info:
        parse_run_code(body, default_memory_mb=512)
    assert info.value.problems[0].field == field


def test_known_but_unsupported_language_is_a_sandbox_side_refusal() -> None:
    with pytest.raises(UnsupportedLanguage, match=r"'php' is not supported.*'cpp', 'go', .*'java'"):
        parse_run_code({"code": "<?php echo 1;", "language": "php"}, default_memory_mb=512)


def test_fetch_files_and_binary_files_reach_the_request() -> None:
    """Regression (issue 13): fetch_files was refused (422) and files had to be UTF-8 text."""
    body = {"code": "x=1", "language": "python", "files": {"in.bin": base64.b64encode(b"\xff\x00").decode()},
            "fetch_files": ["out.csv", "d/e.png"]}  # fmt: skip
    request = parse_run_code(body, default_memory_mb=512)
    assert request.files == {"in.bin": b"\xff\x00"}
    assert request.fetch_files == ("out.csv", "d/e.png")


@pytest.mark.parametrize(
    ("name", "language"),
    [("python", "python"), ("python3", "python"), ("cpp", "cpp"), ("nodejs", "javascript"), ("js", "javascript"),
     ("javascript", "javascript"), ("typescript", "typescript-transpile"), ("ts", "typescript-transpile"),
     ("go", "go"), ("java", "java"), ("rust", "rust"), ("bash", "bash"), ("c", "c"), ("go_test", "go_test"),
     ("junit", "junit")],
)  # fmt: skip
def test_every_language_is_reachable_under_its_sandbox_fusion_name(name: str, language: str) -> None:
    """Each name runs as its execrl language where that is registered, else answers SandboxFusion's
    unsupported-runner shape (``UnsupportedLanguage`` -> ``status: SandboxError``), never a 422."""
    from execrl.sandbox.langs.registry import get_language, list_languages

    body = {"code": "x", "language": name}
    if language in list_languages() and get_language(language).missing():  # this host lacks the toolchain
        with pytest.raises(UnsupportedLanguage, match=f"language {name!r} cannot run on this server"):
            parse_run_code(body, default_memory_mb=512)
    elif language in list_languages():
        assert parse_run_code(body, default_memory_mb=512).language == language
    else:
        with pytest.raises(UnsupportedLanguage, match=f"language {name!r} is not supported"):
            parse_run_code(body, default_memory_mb=512)


def test_python_runtime_applies_to_python_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fusion, "_check_runnable", lambda *args: None)  # python-data need not be installed
    body = {"code": "x", "language": "python"}
    assert parse_run_code(body, default_memory_mb=512, python_runtime="python-data").runtime == "python-data"
    cpp = parse_run_code(
        {"code": "x", "language": "cpp"}, default_memory_mb=512, python_runtime="python-data"
    )
    assert cpp.runtime is None


def _run(status: str, time_s: float | None, code: int | None, out: str, err: str) -> dict[str, object]:
    return {"status": status, "execution_time": time_s, "return_code": code, "stdout": out, "stderr": err}


def _response(
    status: str, run: object, compile_result: object = None, message: str = ""
) -> dict[str, object]:
    return {
        "status": status, "message": message, "compile_result": compile_result, "run_result": run,
        "executor_pod_name": None, "files": {},
    }  # fmt: skip


def test_success_maps_like_appendix_c() -> None:
    result = ExecutionResult(verdict=Verdict.PASSED, stdout="1\n", exit_code=0, wall_time_s=0.0089)
    assert run_code_response(result, "python") == _response("Success", _run("Finished", 0.0089, 0, "1\n", ""))


def test_nonzero_exit_is_failed_with_finished_run() -> None:
    result = ExecutionResult(
        verdict=Verdict.RUNTIME_ERROR,
        stdout="before\n",
        stderr="ZeroDivisionError",
        exit_code=1,
        wall_time_s=0.01,
    )
    expected = _response("Failed", _run("Finished", 0.01, 1, "before\n", "ZeroDivisionError"))
    assert run_code_response(result, "python") == expected


def test_timeout_has_null_return_code() -> None:
    result = ExecutionResult(
        verdict=Verdict.TIME_LIMIT, stdout="start\n", signal=9, limit_kind="wall", wall_time_s=1.0
    )
    expected = _response("Failed", _run("TimeLimitExceeded", 1.0, None, "start\n", ""))
    assert run_code_response(result, "python") == expected


def test_killed_by_signal_is_negative_return_code() -> None:
    result = ExecutionResult(verdict=Verdict.MEMORY_LIMIT, signal=9, wall_time_s=0.2)
    assert run_code_response(result, "python")["run_result"] == _run("Finished", 0.2, -9, "", "")


def test_exit_zero_but_not_passed_says_why() -> None:
    result = ExecutionResult(verdict=Verdict.OUTPUT_LIMIT, exit_code=0, wall_time_s=0.1)
    response = run_code_response(result, "python")
    assert response["status"] == "Failed" and response["message"].startswith("execrl verdict: output_limit")


def test_sandbox_error_is_sandbox_error_status() -> None:
    result = ExecutionResult(verdict=Verdict.SANDBOX_ERROR, sandbox_error="worker died")
    expected = _response("SandboxError", _run("Error", None, None, "", "worker died"), message="worker died")
    assert run_code_response(result, "python") == expected


def test_cpp_compile_error_has_compile_result_and_no_run() -> None:
    result = ExecutionResult(
        verdict=Verdict.COMPILE_ERROR, compile_output="main.cpp:1: error", compile_wall_time_s=0.3
    )
    compile_result = _run("Finished", 0.3, 1, "", "main.cpp:1: error")
    assert run_code_response(result, "cpp") == _response("Failed", None, compile_result)


def test_cpp_compile_timeout_is_time_limit_exceeded() -> None:
    """As SandboxFusion: a compile past compile_timeout is compile_result TimeLimitExceeded with a null
    return code (verl: compile_timeout, -4), no run."""
    result = ExecutionResult(
        verdict=Verdict.COMPILE_ERROR, compile_output="", compile_wall_time_s=2.0, compile_timed_out=True
    )
    compile_result = _run("TimeLimitExceeded", 2.0, None, "", "")
    assert run_code_response(result, "cpp") == _response("Failed", None, compile_result)


def test_fetched_files_are_base64_and_missing_ones_are_explained() -> None:
    result = ExecutionResult(
        verdict=Verdict.PASSED, exit_code=0, wall_time_s=0.1, files={"o.bin": b"\x00\xff"},
        file_errors={"passwd": "is, or lies under, a symbolic link"},
    )  # fmt: skip
    response = run_code_response(result, "python")
    assert response["status"] == "Success" and response["files"] == {"o.bin": "AP8="}
    assert response["message"] == "fetch_files not returned: 'passwd' is, or lies under, a symbolic link"


def test_cpp_success_has_both_results() -> None:
    """Each step's own time: the run's excludes the compile (it used to be the whole execution's)."""
    result = ExecutionResult(
        verdict=Verdict.PASSED,
        stdout="3\n",
        exit_code=0,
        wall_time_s=0.5,
        compile_wall_time_s=0.4,
        run_wall_time_s=0.08,
    )
    response = run_code_response(result, "cpp")
    assert response["compile_result"] == _run("Finished", 0.4, 0, "", "")
    assert response["run_result"] == _run("Finished", 0.08, 0, "3\n", "")
    assert response["status"] == "Success"
