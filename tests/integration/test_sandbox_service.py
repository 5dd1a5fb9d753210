"""The HTTP service as a real server (``execrl sandbox serve --port 0``) driven by real HTTP requests.

Covers SandboxFusion's ``/run_code`` success/failure/timeout examples (research notes, Appendix C), a
body exactly as verl's client sends it, malformed bodies (the server must keep serving), execrl's own
``/v1/execute`` and ``/v1/execute_batch``, and that slow executions never block the event loop.
"""

from __future__ import annotations

import base64
import json
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from service_server import post as _post
from service_server import running_server

SF_RESPONSE_KEYS = {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
SF_COMMAND_KEYS = {"status", "execution_time", "return_code", "stdout", "stderr"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server("--max-body-mb", "1") as url:
        yield url


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_ping(server: str) -> None:
    assert _get(f"{server}/v1/ping") == (200, "pong")


def test_run_code_success_matches_sandbox_fusion(server: str) -> None:
    status, body = _post(f"{server}/run_code", {"code": "print(1)", "language": "python"})
    assert status == 200 and set(body) == SF_RESPONSE_KEYS and set(body["run_result"]) == SF_COMMAND_KEYS
    assert body["status"] == "Success" and body["message"] == ""
    assert body["compile_result"] is None and body["executor_pod_name"] is None and body["files"] == {}
    run = body["run_result"]
    assert (run["status"], run["return_code"], run["stdout"], run["stderr"]) == ("Finished", 0, "1\n", "")
    assert 0 < run["execution_time"] < 10


def test_run_code_failure_matches_sandbox_fusion(server: str) -> None:
    status, body = _post(f"{server}/run_code", {"code": "print('before')\n1/0\n", "language": "python"})
    run = body["run_result"]
    assert status == 200 and body["status"] == "Failed" and body["message"] == ""
    assert (run["status"], run["return_code"], run["stdout"]) == ("Finished", 1, "before\n")
    assert "ZeroDivisionError: division by zero" in run["stderr"]


def test_run_code_timeout_matches_sandbox_fusion(server: str) -> None:
    code = "import time\nprint('start', flush=True)\ntime.sleep(10)\n"
    status, body = _post(f"{server}/run_code", {"code": code, "language": "python", "run_timeout": 1})
    run = body["run_result"]
    assert status == 200 and body["status"] == "Failed"
    assert (run["status"], run["return_code"], run["stdout"]) == ("TimeLimitExceeded", None, "start\n")
    # the run alone (issue 28): the watchdog fires 1 s after the program started, which the harness times from a
    # moment later, so a timed-out run may report a hair under 1 s (0.9988 s seen in a full suite run)
    assert 0.9 <= run["execution_time"] < 10


def test_verl_client_payload(server: str) -> None:
    """The exact body and headers verl's ``call_sandbox_api`` sends (one request per stdin test)."""
    payload = json.dumps(
        {
            "compile_timeout": 10,
            "run_timeout": 10,
            "code": "a, b = map(int, input().split())\nprint(a + b)",
            "stdin": "2 3\n",
            "memory_limit_MB": 1024,
            "language": "python",
            "files": {},
            "fetch_files": [],
        }  # fmt: skip
    ).encode()
    request = urllib.request.Request(
        f"{server}/run_code",
        data=payload,
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        body = json.loads(response.read())
    assert body["status"] == "Success" and body["run_result"]["stdout"] == "5\n"


def test_run_code_files_are_written_to_the_work_directory(server: str) -> None:
    files = {"data/in.txt": base64.b64encode(b"42\n").decode()}
    code = "print(int(open('data/in.txt').read()) + 1)"
    _, body = _post(f"{server}/run_code", {"code": code, "language": "python", "files": files})
    assert body["status"] == "Success" and body["run_result"]["stdout"] == "43\n"


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_run_code_cpp_compile_error_and_success(server: str) -> None:
    _, bad = _post(f"{server}/run_code", {"code": "int main() { return x; }", "language": "cpp"})
    assert bad["status"] == "Failed" and bad["run_result"] is None
    assert bad["compile_result"]["return_code"] != 0 and "error" in bad["compile_result"]["stderr"]
    code = (
        "#include <iostream>\nint main() { int a, b; std::cin >> a >> b; std::cout << a * b << std::endl; }"
    )
    _, good = _post(f"{server}/run_code", {"code": code, "language": "cpp", "stdin": "6 7"})
    assert good["status"] == "Success" and good["compile_result"]["return_code"] == 0
    assert good["run_result"]["stdout"] == "42\n"


def test_known_but_unsupported_language_is_sandbox_error(server: str) -> None:
    status, body = _post(f"{server}/run_code", {"code": "<?php echo 1;", "language": "php"})
    assert status == 200 and body["status"] == "SandboxError" and "'php' is not supported" in body["message"]


@pytest.mark.parametrize(
    ("path", "raw", "status", "field"),
    [
        ("/run_code", b"{not json", 422, "body"),
        ("/run_code", b'{"code": "print(1)", "language": "python"\xff}', 422, "body"),
        ("/run_code", b'{"code": 5, "language": "python"}', 422, "code"),
        ("/run_code", b'{"code": "print(1)", "language": "cobol"}', 422, "language"),
        ("/v1/execute", b'{"language": "python", "program": ""}', 422, "program"),  # /run_code runs "" (issue 28)
        ("/run_code", b'{"code": "print(1)", "language": "python", "run_timeout": -1}', 422, "run_timeout"),
        ("/run_code", b'{"code": "print(1)", "language": "python", "memory_limit_MB": 4}', 422, "memory_limit_MB"),
        ("/run_code", b'{"code": "print(1)", "language": "python", "fetch_files": ["../a"]}', 422, "fetch_files"),
        ("/run_code", b'["code"]', 422, "body"),
        ("/v1/execute", b'{"language": "python", "program": "x", "tests": [{"type": "io"}]}', 422, "tests[0].expected_stdout"),
        ("/v1/execute", b'{"language": "python", "program": "x", "limits": {"timeout_s": 0}}', 422, "limits"),
        ("/v1/execute", b'{"language": "klingon", "program": "x"}', 422, "language"),
        ("/v1/execute", b'{"language": "python", "program": "x\\ud800"}', 422, "program"),
        ("/v1/execute_batch", b'{"requests": {}}', 422, "requests"),
        ("/v1/execute_batch", b'{"requests": [{"language": "python"}]}', 422, "requests[0].program"),
        ("/run_code", b"x" * (2 << 20), 413, "/run_code"),
    ],
)  # fmt: skip
def test_bad_input_is_a_json_error_naming_the_field(
    server: str, path: str, raw: bytes, status: int, field: str
) -> None:
    got_status, body = _post(f"{server}{path}", None, raw=raw)
    assert got_status == status
    assert body["detail"][0]["field"] == field and body["error"].startswith(f"{field}: ")
    assert _post(f"{server}/run_code", {"code": "print(2)", "language": "python"})[1]["status"] == "Success"


def test_unknown_route_and_method_are_json(server: str) -> None:
    assert _get(f"{server}/nope")[0] == 404
    status, body = _get(f"{server}/run_code")
    assert status == 405 and body["detail"][0]["loc"] == ["path", "/run_code"]


def test_execute_with_tests_reports_each_test(server: str) -> None:
    request = {
        "language": "python",
        "program": "def add(a, b):\n    return a + b if a < 10 else 0\n",
        "tests": [
            {"type": "call", "name": "small", "entry_point": "add", "args": [1, 2], "expected": 3},
            {"type": "call", "name": "large", "entry_point": "add", "args": [10, 2], "expected": 12},
            {"type": "code", "name": "assert", "code": "assert add(2, 2) == 4"},
        ],
    }
    status, result = _post(f"{server}/v1/execute", request)
    assert status == 200 and result["verdict"] == "wrong_answer" and result["passed"] is False
    assert [(t["name"], t["verdict"]) for t in result["tests"]] == [
        ("small", "passed"), ("large", "wrong_answer"), ("assert", "passed"),
    ]  # fmt: skip
    assert result["pass_fraction"] == pytest.approx(2 / 3)


def test_execute_batch_keeps_input_order(server: str) -> None:
    requests = [{"language": "python", "program": f"print({i} * {i})"} for i in range(5)]
    status, body = _post(f"{server}/v1/execute_batch", {"requests": requests})
    assert status == 200 and [r["stdout"] for r in body["results"]] == [f"{i * i}\n" for i in range(5)]


def test_invalid_utf8_output_is_replaced(server: str) -> None:
    code = "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end')\n"
    status, result = _post(f"{server}/v1/execute", {"language": "python", "program": code})
    assert status == 200 and result["stdout"] == "ok \ufffd\ufffd end"


def test_slow_executions_do_not_block_the_event_loop(server: str) -> None:
    """Three 2 s sleeps occupy both workers and queue one; /v1/ping must answer before they finish."""
    slow = {"code": "import time\ntime.sleep(2)\n", "language": "python"}
    threads = [threading.Thread(target=_post, args=(f"{server}/run_code", slow)) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    assert _get(f"{server}/v1/ping") == (200, "pong")
    still_running = sum(thread.is_alive() for thread in threads)
    for thread in threads:
        thread.join()
    assert still_running == 3
