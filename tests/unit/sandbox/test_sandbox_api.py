"""End-to-end verdicts through a real sandbox: every test style, C++, invalid requests, batches, errors."""

from __future__ import annotations

import asyncio
import time

import pytest

import execrl.sandbox as sandbox_pkg
from execrl.sandbox import (
    CallTest,
    CodeTest,
    ExecutionRequest,
    InvalidRequestError,
    IOTest,
    Limits,
    Sandbox,
    SandboxConfig,
    Verdict,
)
from execrl.sandbox.host import runner
from execrl.sandbox.types import TRUNCATION_MARKER

ADD = "def add(a, b):\n    return a + b\n"
CPP_SUM = '#include <iostream>\nint main(){long a,b; std::cin>>a>>b; std::cout<<a+b<<"\\n";}\n'


def py(program: str, *tests: object, **kwargs: object) -> ExecutionRequest:
    return ExecutionRequest(language="python", program=program, tests=tuple(tests), **kwargs)  # type: ignore[arg-type]


def test_public_api_is_exported() -> None:
    expected = {
        "CallTest", "CodeTest", "ExecutionRequest", "ExecutionResult", "IOTest", "InvalidRequestError",
        "Language", "Limits", "Runtime", "Sandbox", "SandboxConfig", "SandboxError", "SandboxFailure",
        "TestCase", "TestResult", "UnsupportedHostError", "Verdict", "default_sandbox", "list_backends",
        "list_languages", "list_runtimes", "register_backend", "register_language", "register_runtime",
        "CellResult", "Session", "SessionClosedError", "SessionError", "SessionForkError", "SessionLimits",
        "SessionTemplate",
    }  # fmt: skip
    assert set(sandbox_pkg.__all__) == expected
    assert all(hasattr(sandbox_pkg, name) for name in sandbox_pkg.__all__)


def test_plain_run_stdout_stdin_and_exit_code(sandbox: Sandbox) -> None:
    ok = sandbox.run(py("print(input()[::-1])", stdin="abc\n"))
    assert ok.verdict is Verdict.PASSED and ok.stdout == "cba\n" and ok.exit_code == 0
    bad = sandbox.run(py("import sys\nprint('x', file=sys.stderr)\nsys.exit(3)"))
    assert bad.verdict is Verdict.RUNTIME_ERROR and bad.exit_code == 3 and bad.stderr == "x\n"
    boom = sandbox.run(py("1/0"))
    assert boom.verdict is Verdict.RUNTIME_ERROR and "ZeroDivisionError" in boom.stderr


def test_code_tests_pass_fail_and_error(sandbox: Sandbox) -> None:
    result = sandbox.run(
        py(
            ADD,
            CodeTest("ok", "assert add(1, 2) == 3"),
            CodeTest("wrong", "assert add(1, 2) == 4, 'add is off'"),
            CodeTest("crash", "add(1, None)"),
        )
    )
    ok, wrong, crash = result.tests
    assert ok.verdict is Verdict.PASSED
    assert wrong.verdict is Verdict.WRONG_ANSWER and wrong.error_message == "add is off"
    assert crash.verdict is Verdict.RUNTIME_ERROR and crash.error_type == "TypeError"
    assert crash.traceback_tail is not None and "TypeError" in crash.traceback_tail
    assert result.verdict is Verdict.RUNTIME_ERROR  # worst of the three
    assert result.pass_fraction == pytest.approx(1 / 3)


def test_call_tests_compare_values(sandbox: Sandbox) -> None:
    program = ADD + "def pair(x):\n    return (x, x / 3)\ndef obj():\n    return object()\n"
    result = sandbox.run(
        py(
            program,
            CallTest("int", "add", (1, 2), expected=3),
            CallTest("tuple_vs_list", "pair", (1,), expected=[1, 0.333333333]),
            CallTest("wrong", "add", (2, 2), expected=5),
            CallTest("kwargs", "add", (), {"a": "x", "b": "y"}, expected="xy"),
            CallTest("unserializable", "obj", expected=None),
            CallTest("missing", "nope", expected=1),
        )
    )
    verdicts = [t.verdict for t in result.tests]
    assert verdicts == [
        Verdict.PASSED,
        Verdict.PASSED,
        Verdict.WRONG_ANSWER,
        Verdict.PASSED,
        Verdict.WRONG_ANSWER,
        Verdict.RUNTIME_ERROR,
    ]
    wrong = result.tests[2]
    assert (wrong.input, wrong.expected, wrong.got) == ("add(2, 2)", "5", "4")
    assert result.tests[5].error_type == "NameError"


def test_io_tests_compare_modes(sandbox: Sandbox) -> None:
    program = "a, b = map(float, input().split())\nprint(a / b)\n"
    result = sandbox.run(
        py(
            program,
            IOTest("float", "1 3", "0.333333", compare="float", rel_tol=1e-5),
            IOTest("exact_fail", "1 2", "0.50", compare="exact"),
            IOTest("whitespace", "4 2", "  2.0 \n", compare="whitespace"),
            IOTest("crash", "1 0", "x"),
        )
    )
    assert [t.verdict for t in result.tests] == [
        Verdict.PASSED,
        Verdict.WRONG_ANSWER,
        Verdict.PASSED,
        Verdict.RUNTIME_ERROR,
    ]
    assert result.tests[1].got == "0.5\n" and result.tests[1].input == "1 2"
    assert result.tests[3].error_type == "ZeroDivisionError"


def test_non_utf8_output_is_replaced_not_fatal(sandbox: Sandbox) -> None:
    result = sandbox.run(py("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end')"))
    assert result.verdict is Verdict.PASSED
    assert result.stdout == "ok \ufffd\ufffd end"


def test_output_over_limit_is_truncated_with_marker(sandbox: Sandbox) -> None:
    limits = Limits(max_output_bytes=1000)
    result = sandbox.run(py("import sys\nwhile True: sys.stdout.write('x' * 4096)", limits=limits))
    assert result.verdict is Verdict.OUTPUT_LIMIT
    assert result.stdout_truncated
    assert result.stdout.startswith("x" * 1000)
    assert result.stdout[1000:].startswith(TRUNCATION_MARKER.split("{")[0])


def test_cpp_compile_error_and_runs(sandbox: Sandbox) -> None:
    broken = sandbox.run(
        ExecutionRequest(language="cpp", program="int main() { return x; }", tests=(IOTest("a", "", ""),))
    )
    assert broken.verdict is Verdict.COMPILE_ERROR
    assert "error" in broken.compile_output and "x" in broken.compile_output
    assert broken.tests[0].verdict is Verdict.COMPILE_ERROR
    tests = (IOTest("ok", "1 2", "3"), IOTest("wrong", "5 5", "11"))
    result = sandbox.run(ExecutionRequest(language="cpp", program=CPP_SUM, tests=tests))
    assert [t.verdict for t in result.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER]
    assert result.tests[1].got == "10\n"
    plain = sandbox.run(ExecutionRequest(language="cpp", program=CPP_SUM, stdin="40 2"))
    assert plain.verdict is Verdict.PASSED and plain.stdout == "42\n"


def test_invalid_requests_raise_with_clear_messages(sandbox: Sandbox) -> None:
    with pytest.raises(
        InvalidRequestError, match="unknown language 'cobol'; known languages: bash, c, cpp, go"
    ):
        sandbox.run(ExecutionRequest(language="cobol", program="DISPLAY 'HI'."))
    with pytest.raises(InvalidRequestError, match="program is empty"):  # a plain run of "" is allowed
        ExecutionRequest(language="python", program="  ", tests=(CodeTest("t", "assert True"),))
    with pytest.raises(InvalidRequestError, match="limits.memory_mb"):
        Limits(memory_mb=1)
    with pytest.raises(InvalidRequestError, match="does not support"):
        sandbox.run(ExecutionRequest(language="cpp", program=CPP_SUM, tests=(CallTest("c", "main"),)))
    with pytest.raises(InvalidRequestError, match="JSON"):
        sandbox.run(py(ADD, CallTest("c", "add", (object(), 1))))
    with pytest.raises(InvalidRequestError, match="workers"):
        SandboxConfig(workers=0)
    with pytest.raises(InvalidRequestError, match="known backends"):
        SandboxConfig(backend="docker")


def test_batch_validates_everything_before_running(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[ExecutionRequest] = []
    monkeypatch.setattr(sandbox, "_execute", started.append)
    batch = [py("print(1)"), ExecutionRequest(language="cobol", program="x")]
    with pytest.raises(InvalidRequestError, match="cobol"):
        sandbox.run_batch(batch)
    with pytest.raises(InvalidRequestError, match="cobol"):
        asyncio.run(sandbox.arun_batch(batch))
    assert started == []


def test_batches_keep_input_order(sandbox: Sandbox) -> None:
    # Earlier requests sleep longer, so completion order is the reverse of input order.
    requests = [py(f"import time\ntime.sleep({0.05 * (4 - i)})\nprint({i})") for i in range(5)]
    results = asyncio.run(sandbox.arun_batch(requests))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(5)]
    assert [r.stdout for r in sandbox.run_batch(requests)] == [f"{i}\n" for i in range(5)]
    single = asyncio.run(sandbox.arun(py("print('async')")))
    assert single.stdout == "async\n"


def test_stop_on_first_failure_reports_the_prefix(sandbox: Sandbox) -> None:
    tests = [CallTest(f"t{i}", "add", (i, 0), expected=0 if i == 1 else i) for i in range(4)]
    result = sandbox.run(py(ADD, *tests, stop_on_first_failure=True))
    assert [t.verdict for t in result.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER]
    assert result.verdict is Verdict.WRONG_ANSWER


def test_files_are_importable_next_to_the_program(sandbox: Sandbox) -> None:
    files = {"pkg/__init__.py": "", "pkg/util.py": "def double(x):\n    return 2 * x\n"}
    program = "from pkg.util import double\n"
    result = sandbox.run(py(program, CodeTest("t", "assert double(4) == 8"), files=files))
    assert result.verdict is Verdict.PASSED


def test_environment_is_fixed_and_deterministic(sandbox: Sandbox) -> None:
    program = "import os\nprint(sorted(os.environ.items()))\nprint(hash('execrl'))\n"
    first, second = sandbox.run(py(program)), sandbox.run(py(program))
    assert first.stdout == second.stdout
    assert "('PYTHONHASHSEED', '0')" in first.stdout and "('TZ', 'UTC')" in first.stdout
    assert "('HOME', '/tmp')" in first.stdout


def test_dead_worker_gives_sandbox_error(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression guard: a worker dying mid-run is a SANDBOX_ERROR (kept out of rewards), not a failure."""
    real_loop = runner.Driver._loop

    def die_then_loop(self: runner.Driver, start: float, judge: object) -> None:
        self.worker.kill()  # as if the kernel or an operator killed the sandbox's pid 1
        real_loop(self, start, judge)

    monkeypatch.setattr(runner.Driver, "_loop", die_then_loop)
    # the test sleeps so the kill lands first (a job this short finished and passed before it, in a loaded run)
    result = sandbox.run(py(ADD, CodeTest("t", "import time\ntime.sleep(1)\nassert add(1, 1) == 2")))
    assert result.verdict is Verdict.SANDBOX_ERROR and result.is_sandbox_error
    assert result.sandbox_error and "died" in result.sandbox_error
    monkeypatch.undo()
    assert sandbox.run(py("print(1)")).passed


def test_parked_worker_that_died_is_replaced(sandbox: Sandbox) -> None:
    pool = sandbox._pool
    sandbox.run(py("print(1)"))
    with pool.cond:
        parked = [w for queue in pool.ready.values() for w in queue]
    for worker in parked:
        worker.kill()
    deadline = time.monotonic() + 5
    while any(w.alive() for w in parked) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert sandbox.run(py("print(1)")).passed


def test_zygote_death_is_survived(sandbox: Sandbox) -> None:
    """Regression guard: if the fork server dies (OOM killer, operator), the next run restarts it."""
    old = sandbox._pool.process
    old.kill()
    old.wait()
    results = [sandbox.run(py("print(3)")) for _ in range(3)]
    assert results[-1].passed and results[-1].stdout == "3\n"
    assert sandbox._pool.process is not old and sandbox._pool.process.poll() is None
