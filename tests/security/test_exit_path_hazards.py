"""A Python program's exit status must be the one plain ``python main.py`` gives (issue 28, item 0).

A plain run (and each stdin/stdout test) runs the program in a fork of the harness interpreter, and the
exit status is the verdict and ``/run_code``'s ``return_code``. The bug guarded against: the harness
ended with ``os._exit(code)`` looked up after the program ran, so
``import os; e = os._exit; os._exit = lambda c: e(0); assert 1 == 2`` answered ``Success`` with return
code 0 (plain Python: 1), and SandboxFusion's anti-hack prelude ``os._exit = None`` failed every
correct program. Each hostile program here replaces something the harness used to read back from the
candidate's own process (``os``, ``sys``, builtins, modules, the output streams, exception objects);
the sandbox must give the status plain Python gives for the same file, which each test runs beside
it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from security_helpers import py

from execrl.sandbox import CallTest, CodeTest, ExecutionRequest, IOTest, Sandbox, Verdict
from execrl.sandbox.service.fusion import parse_run_code, run_code_response

FORGED_EXIT = "import os; e = os._exit; os._exit = lambda c: e(0); assert 1 == 2\n"
ANTIHACK = "import os\nimport sys\nexit = None\nos._exit = None\nsys.exit = None\n"  # SandboxFusion's header

# Programs that change what an in-process harness would read after them, each with its plain status.
HOSTILE = {
    "forged os._exit": FORGED_EXIT,
    "forged os._exit, then SystemExit(1)": "import os, sys\ne = os._exit\nos._exit = lambda c: e(0)\nsys.exit(1)\n",
    "os._exit removed, assert fails": ANTIHACK + "assert 1 == 2\n",
    "os._exit removed, correct program": ANTIHACK + "print('ok')\n",
    "os module emptied": "import os\nfor k in list(vars(os)):\n    if not k.startswith('__'):\n        delattr(os, k)\nraise ValueError\n",
    "builtins replaced": (
        "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda *a: 0\n"
        "builtins.print = None\nbuiltins.str = None\nbuiltins.getattr = None\nraise SystemExit('why')\n"
    ),
    "exception classes replaced": (
        "import builtins\nbuiltins.SystemExit = ValueError\nbuiltins.BaseException = ValueError\n"
        "builtins.KeyboardInterrupt = ValueError\nraise RuntimeError\n"
    ),
    "int subclass lies about its value": (
        "import sys\nclass I(int):\n    def __and__(self, o): return 0\n    def __index__(self): return 0\n"
        "    def __int__(self): return 0\nsys.exit(I(3))\n"
    ),
    "object claims to be an int": "import sys\nclass F:\n    __class__ = int\n    def __str__(self): return 'F'\nsys.exit(F())\n",
    "code property on a SystemExit subclass": (
        "class E(SystemExit):\n    @property\n    def code(self): raise RuntimeError('no')\nraise E(0)\n"
    ),
    "status past a C long": "import sys\nsys.exit(2 ** 70)\n",
    "status 256": "import sys\nsys.exit(256)\n",
    "negative status": "import sys\nsys.exit(-1)\n",
    "stderr is None": "import sys\nsys.stderr = None\nsys.exit('to fd 2')\n",
    "stdout flush fails": (
        "import sys\nclass W:\n    def write(self, s): return len(s)\n    def flush(self): raise OSError('full')\n"
        "sys.stdout = W()\nprint('x')\n"
    ),
    "stdout closed": "import sys\nsys.stdout.close()\n",
    "excepthook replaced": "import sys\nsys.excepthook = lambda *a: print('hooked', a[0].__name__)\n1 / 0\n",
    "excepthook raises": "import sys\ndef hook(*a): raise ValueError('hook')\nsys.excepthook = hook\n1 / 0\n",
    "excepthook removed": "import sys\ndel sys.excepthook\n1 / 0\n",
    "exception whose str raises": "class E(Exception):\n    def __str__(self): raise RuntimeError\nraise E\n",
    "atexit callback": "import atexit\natexit.register(print, 'bye')\nassert False\n",
    "non-daemon thread outlives main": (
        "import threading, time\ndef w():\n    time.sleep(0.1)\n    print('late')\n"
        "threading.Thread(target=w).start()\nraise SystemExit(4)\n"
    ),
    "threading._shutdown replaced": "import threading\nthreading._shutdown = None\nprint('x')\n",
    "json and time replaced": "import json, time\njson.dumps = json.loads = time.perf_counter = None\nraise KeyError\n",
    "uncaught KeyboardInterrupt": "raise KeyboardInterrupt\n",
}


def plain_python(program: str, tmp_path: Path) -> tuple[int, str]:
    """Exit status and stdout of the same file under ``python -S`` (the interpreter the sandbox runs)."""
    path = tmp_path / "main.py"
    path.write_text(program)
    done = subprocess.run(
        [sys.executable, "-S", "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    return done.returncode, done.stdout


def sandbox_status(result: object) -> int:
    """The result's status in ``subprocess``'s convention (-n for a signal)."""
    assert result.signal is None or result.exit_code is None  # type: ignore[attr-defined]
    return -result.signal if result.signal is not None else result.exit_code  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_plain_run_status_is_plain_pythons(sandbox: Sandbox, tmp_path: Path, name: str) -> None:
    program = HOSTILE[name]
    status, stdout = plain_python(program, tmp_path)
    result = sandbox.run(ExecutionRequest(language="python", program=program))
    assert (sandbox_status(result), result.stdout) == (status, stdout), result.stderr
    assert result.passed is (status == 0)


def test_forged_exit_code_is_failed_with_return_code_1_on_run_code(sandbox: Sandbox) -> None:
    """The exact program of the report, through SandboxFusion's ``/run_code`` schema."""
    body = {"code": FORGED_EXIT, "language": "python"}
    result = sandbox.run(parse_run_code(body, default_memory_mb=512))
    response = run_code_response(result, "python")
    assert response["status"] == "Failed"
    assert response["run_result"]["return_code"] == 1
    assert "AssertionError" in response["run_result"]["stderr"]


def test_antihack_prelude_keeps_a_correct_program_passing(sandbox: Sandbox) -> None:
    """``exit = os._exit = sys.exit = None`` before a correct solution: every test shape still passes
    (before the fix the harness's own exit raised TypeError and every run failed)."""
    program = (
        ANTIHACK
        + "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    print(add(*map(int, input().split())))\n"
    )
    body = {"code": program, "language": "python", "stdin": "2 3\n"}
    response = run_code_response(sandbox.run(parse_run_code(body, default_memory_mb=512)), "python")
    assert response["status"] == "Success" and response["run_result"]["stdout"] == "5\n"
    shapes = [
        (CodeTest("inline", "assert add(2, 3) == 5"),),
        (CallTest("call", "add", (2, 3), expected=5), CodeTest("code", "assert add(1, 1) == 2")),
        (IOTest("io", "2 3\n", "5\n"),),
    ]
    for tests in shapes:
        result = sandbox.run(py(program, *tests))
        assert result.verdict is Verdict.PASSED, (tests, result)


def test_forged_exit_cannot_pass_an_io_test(sandbox: Sandbox) -> None:
    """The expected output, then a failing assert: plain Python exits 1, so the test fails."""
    program = "import os\ne = os._exit\nos._exit = lambda c: e(0)\nprint(5)\nassert 1 == 2\n"
    result = sandbox.run(py(program, IOTest("io", "", "5\n")))
    assert result.tests[0].verdict is Verdict.RUNTIME_ERROR
    assert result.tests[0].error_type == "AssertionError"


def test_replaced_exec_cannot_skip_an_assert_test(sandbox: Sandbox) -> None:
    """An assert test the rewrite leaves alone (two computed values compared) runs through ``exec``: a
    program that replaces ``builtins.exec`` (and ``compile``) must not make the harness skip it."""
    program = (
        "import builtins\nbuiltins.exec = lambda *a, **k: None\nbuiltins.compile = lambda *a, **k: None\n"
        "def add(a, b):\n    return a - b\n"
    )
    test = CodeTest("computed", "assert add(1, 1) == add(2, 0) + 2\n")
    for tests in ((test,), (test, CodeTest("other", "assert add(1, 1) == 2"))):
        result = sandbox.run(py(program, *tests))
        assert result.tests[0].verdict is Verdict.WRONG_ANSWER, result
