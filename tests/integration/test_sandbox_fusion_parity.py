"""SandboxFusion parity of ``/run_code`` against a real server, through verl's eyes (issue 13).

verl's reward client (``verl/utils/reward_score/sandbox_fusion/utils.py`` @b178a3c) posts one
``/run_code`` body per test case and turns the response into a code: True (pass), False (wrong
answer), -1 (API or sandbox error), -2 (runtime error), -3 (timeout), -4 (compile error or compile
timeout). ``verl_code`` restates that decision from the fields verl reads; each test sends the body verl
sends for one of its three case shapes (stdin/stdout, ``fn_name`` wrapper, ``assert_case``) and checks
the code SandboxFusion gives for the same program (research notes, sandbox.md Appendix C).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from service_server import EXECRL, post, running_server


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server() as url:
        yield f"{url}/run_code"


def verl_body(code: str, stdin: str | None, language: str = "python", timeout: int = 10) -> dict[str, Any]:
    """Every key verl's ``call_sandbox_api`` sends, with its types (ints for the timeouts)."""
    return {
        "compile_timeout": timeout, "run_timeout": timeout, "code": code, "stdin": stdin,
        "memory_limit_MB": 1024, "language": language, "files": {}, "fetch_files": [],
    }  # fmt: skip


def verl_code(response: dict[str, Any], expected_output: str | None) -> bool | int:
    """verl's per-case code, from ``status``, ``compile_result`` and ``run_result`` as verl reads them."""
    status = response.get("status")
    compiled, run = response.get("compile_result"), response.get("run_result")
    if status == "Success":
        if not run or run.get("status") != "Finished":
            return -1
        if expected_output is None:
            return True
        return str(run.get("stdout") or "").rstrip("\n") == expected_output.rstrip("\n")
    if status != "Failed":
        return -1
    if compiled and (
        compiled.get("status") in ("Error", "TimeLimitExceeded")
        or (compiled.get("status") == "Finished" and compiled.get("return_code") != 0)
    ):
        return -4
    if not run:
        return -1
    if run.get("status") == "TimeLimitExceeded":
        return -3
    if run.get("status") == "Error" or run.get("return_code") != 0:
        return -2
    return -1


def fn_name_wrapper(generation: str, fn_name: str) -> str:
    """A program shaped like verl's ``fn_name`` wrapper: the standard library star-imported (``sys``,
    ``io`` and ``builtins`` included), the candidate's code, then one JSON argument per stdin line, the
    function looked up globally or on ``Solution()``, and the result printed (JSON for containers, None
    and bools)."""
    modules = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
               "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")  # fmt: skip
    header = "".join(f"from {m} import *\n" for m in modules) + "import json, sys, traceback\n"
    return (
        f"{header}\n{generation}\n\n"
        "def _call():\n"
        "    raw = sys.stdin.read()\n"
        "    args = [json.loads(line) for line in raw.split('\\n')] if raw.strip() else []\n"
        f"    target = globals().get({fn_name!r})\n"
        f"    if target is None and 'Solution' in globals():\n"
        f"        target = getattr(globals()['Solution'](), {fn_name!r})\n"
        "    return target(*args)\n\n"
        "if __name__ == '__main__':\n"
        "    try:\n"
        "        result = _call()\n"
        "    except Exception:\n"
        "        sys.stderr.write(traceback.format_exc())\n"
        "    else:\n"
        "        plain = isinstance(result, (dict, list, tuple, bool)) or result is None\n"
        "        print(json.dumps(result) if plain else str(result))\n"
    )


STDIN_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)"


@pytest.mark.parametrize(
    ("code", "stdin", "expected", "verl"),
    [
        (STDIN_PROGRAM, "2 3\n", "5", True),
        (STDIN_PROGRAM, "2 3\n", "6", False),
        ("print(1 // 0)", "", "0", -2),
        ("import time\ntime.sleep(30)", "", "", -3),
        ("import sys\nsys.exit(3)", "", "", -2),
        ("print(input())", None, "x", -2),  # stdin null: EOFError, as on SandboxFusion
    ],
)
def test_verl_stdin_cases(server: str, code: str, stdin: str | None, expected: str, verl: bool | int) -> None:
    _, response = post(server, verl_body(code, stdin, timeout=2))
    assert verl_code(response, expected) == verl


@pytest.mark.parametrize(
    ("generation", "stdin", "expected", "verl"),
    [
        ("def plus(a, b):\n    return a + b", "1\n2", "3", True),
        ("class Solution:\n    def plus(self, a, b):\n        return [a, b]", "1\n2", "[1, 2]", True),
        ("def plus(a, b):\n    return a - b", "1\n2", "3", False),
        ("def plus(a, b):\n    return a / 0", "1\n2", "3", False),  # the wrapper prints nothing, exits 0
        ("def plus(a, b):\n    while True: pass", "1\n2", "3", -3),
    ],
)
def test_verl_fn_name_cases(
    server: str, generation: str, stdin: str, expected: str, verl: bool | int
) -> None:
    """(Not ``add``: the wrapper's ``from operator import *`` defines one, which wins over ``Solution``.)"""
    _, response = post(server, verl_body(fn_name_wrapper(generation, "plus"), stdin, timeout=2))
    assert verl_code(response, expected) == verl


@pytest.mark.parametrize(
    ("assert_case", "verl"),
    [("assert add(1, 2) == 3", True), ("assert add(1, 2) == 4", -2), ("assert add(1) == 1", -2)],
)
def test_verl_assert_cases(server: str, assert_case: str, verl: bool | int) -> None:
    """verl appends each ``assert_case`` to the program, sends stdin "" and expects no output."""
    code = "def add(a, b):\n    return a + b" + "\n\n" + assert_case
    _, response = post(server, verl_body(code, ""))
    assert verl_code(response, None) == verl


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_verl_cpp_compile_error_and_compile_timeout(server: str) -> None:
    _, bad = post(server, verl_body("int main() { return x; }", "", language="cpp"))
    assert verl_code(bad, "") == -4 and bad["compile_result"]["status"] == "Finished"
    slow = (  # 4e10 constant-evaluation steps: minutes of g++, far beyond a 1 s compile budget
        "constexpr long f() { long s = 0; for (long i = 0; i < 200000; ++i)\n"
        "  for (long j = 0; j < 200000; ++j) s += i ^ j; return s; }\n"
        "constexpr long v = f();\nint main() { return v == 0; }\n"
    )
    body = {**verl_body(slow, "", language="cpp"), "compile_timeout": 1}
    _, response = post(server, body)
    assert verl_code(response, "") == -4
    assert response["compile_result"]["status"] == "TimeLimitExceeded"
    assert response["compile_result"]["return_code"] is None and response["run_result"] is None


def test_unsupported_language_is_verl_sandbox_error(server: str) -> None:
    _, response = post(server, verl_body("puts 1", "", language="ruby"))
    assert response["status"] == "SandboxError" and verl_code(response, "1") == -1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_files_in_and_fetch_files_out_are_bytes(server: str) -> None:
    code = (
        "data = open('in/blob.bin', 'rb').read()\nopen('out.bin', 'wb').write(data[::-1])\nprint(len(data))"
    )
    body = {"code": code, "language": "python", "files": {"in/blob.bin": _b64(bytes(range(256)))},
            "fetch_files": ["out.bin", "never-written.txt"]}  # fmt: skip
    _, response = post(server, body)
    assert response["status"] == "Success" and response["run_result"]["stdout"] == "256\n"
    assert base64.b64decode(response["files"]["out.bin"]) == bytes(range(256))[::-1]
    assert "never-written.txt" not in response["files"]  # as SandboxFusion; the message says why
    assert "'never-written.txt' not found in the work directory" in response["message"]


def test_symlinks_named_like_fetched_files_never_leak_host_files(server: str) -> None:
    """A candidate links the names the client will fetch to host files: nothing outside the work
    directory comes back (SandboxFusion's ``os.path.isfile`` + ``open`` follows such links)."""
    code = (
        "import os\n"
        "os.symlink('/etc/passwd', 'answer.txt')\n"
        "os.symlink('/proc/1/environ', 'env.txt')\n"
        "os.symlink('/usr', 'usr')\n"
        "os.symlink('/', 'root')\n"
        "os.mkdir('d'); os.symlink('../answer.txt', 'd/again.txt')\n"
    )
    fetch = ["answer.txt", "env.txt", "usr/lib/os-release", "root/etc/passwd", "d/again.txt"]
    _, response = post(server, {"code": code, "language": "python", "fetch_files": fetch})
    assert response["status"] == "Success" and response["files"] == {}
    for path in fetch:
        assert f"{path!r} is, or lies under, a symbolic link" in response["message"]


def test_fetch_size_limit_is_reported_not_truncated(server: str) -> None:
    code = "open('big.bin', 'wb').write(b'x' * (5 << 20))\nopen('small.txt', 'w').write('ok')"
    body = {"code": code, "language": "python", "fetch_files": ["big.bin", "small.txt"]}
    _, response = post(server, body)
    assert response["files"] == {"small.txt": _b64(b"ok")}
    assert "'big.bin' holds 5242880 bytes, over limits.max_fetch_file_bytes (4194304)" in response["message"]


def test_native_execute_fetches_files_too(server: str) -> None:
    body = {"language": "python", "program": "open('o.txt', 'w').write(open('i.bin', 'rb').read().hex())",
            "files_base64": {"i.bin": _b64(b"\x01\xfe")}, "fetch_files": ["o.txt"]}  # fmt: skip
    status, result = post(server.replace("/run_code", "/v1/execute"), body)
    assert status == 200 and result["verdict"] == "passed"
    assert result["files"] == {"o.txt": _b64(b"01fe")} and result["file_errors"] == {}
    assert json.dumps(result)  # plain JSON all the way


def test_run_code_python_data_runtime_imports_numpy() -> None:
    """SandboxFusion's python has numpy and pandas; ``--run-code-python-runtime python-data`` gives them."""
    code = "import numpy as np, pandas as pd\nprint(int(np.arange(5).sum()), pd.Series([1, 2]).sum())"
    with running_server("--run-code-python-runtime", "python-data") as url:
        _, response = post(f"{url}/run_code", verl_body(code, ""))
    assert verl_code(response, "10 3") is True


def test_server_refuses_to_start_with_a_missing_runtime(tmp_path: object) -> None:
    env = {**os.environ, "EXECRL_RUNTIMES_DIR": str(tmp_path)}
    command = [EXECRL, "sandbox", "serve", "--port", "0", "--run-code-python-runtime", "python-data"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "not installed at" in done.stderr and "scripts/setup.sh --python-data" in done.stderr
