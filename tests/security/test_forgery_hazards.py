"""Reward-hacking hazards (#20): early exits, patched builtins, printed results, forged records.

The guarantee under test (``execrl.sandbox.zygote.harness``): a test passes only if the trusted harness got a
matching record and the parent judged it; values are judged against expected values that never enter
the sandbox.
"""

from __future__ import annotations

from security_helpers import py

from execrl.sandbox import CallTest, CodeTest, IOTest, Sandbox, Verdict

WRONG = "def add(a, b):\n    return a - b\n"


def test_exit_zero_before_the_asserts_fails(sandbox: Sandbox) -> None:
    for exit_call in ("exit(0)", "quit()", "import sys\nsys.exit(0)", "raise SystemExit"):
        result = sandbox.run(py(WRONG + exit_call + "\n", CodeTest("t", "assert add(1, 2) == 3")))
        assert result.verdict is Verdict.RUNTIME_ERROR, exit_call
        assert result.tests[0].error_type == "SystemExit"


def test_os_exit_zero_at_top_level_fails(sandbox: Sandbox) -> None:
    result = sandbox.run(py(WRONG + "import os\nos._exit(0)\n", CodeTest("t", "assert add(1, 2) == 3")))
    assert result.verdict is Verdict.RUNTIME_ERROR and not result.passed
    assert result.tests[0].error_message == "the process exited before reporting the test result"


def test_os_exit_zero_inside_the_tested_function_fails(sandbox: Sandbox) -> None:
    program = "import os\ndef add(a, b):\n    os._exit(0)\n"
    tests = (CodeTest("code", "assert add(1, 2) == 3"), CallTest("call", "add", (1, 2), expected=3))
    result = sandbox.run(py(program, *tests))
    assert [t.verdict for t in result.tests] == [Verdict.RUNTIME_ERROR, Verdict.RUNTIME_ERROR]


def test_sys_exit_inside_a_call_test_fails(sandbox: Sandbox) -> None:
    program = "import sys\ndef add(a, b):\n    sys.exit(0)\n"
    result = sandbox.run(py(program, CallTest("t", "add", (1, 2), expected=3)))
    assert result.tests[0].verdict is Verdict.RUNTIME_ERROR and result.tests[0].error_type == "SystemExit"


def test_patched_builtins_and_printed_results_do_not_pass(sandbox: Sandbox) -> None:
    program = WRONG + (
        "import builtins, json\n"
        "builtins.AssertionError = type('Fake', (Exception,), {})\n"
        "builtins.print = lambda *a, **k: None\n"
        "json.dumps = lambda *a, **k: '\"patched\"'\n"
        "import sys\nsys.stdout.write('All tests passed\\nPASSED\\n')\n"
    )
    tests = (CallTest("call", "add", (1, 2), expected=3), CodeTest("code", "assert add(1, 2) == 3"))
    result = sandbox.run(py(program, *tests))
    assert [t.verdict for t in result.tests] == [Verdict.WRONG_ANSWER, Verdict.WRONG_ANSWER]
    assert result.tests[0].got == "-1"  # child._dumps, bound before the program ran: the real, wrong value


def test_always_equal_objects_cannot_fool_call_tests(sandbox: Sandbox) -> None:
    program = (
        "class Eq:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Eq()\n"
    )
    result = sandbox.run(py(program, CallTest("t", "add", (1, 2), expected=3)))
    assert result.tests[0].verdict is Verdict.WRONG_ANSWER


def test_forged_records_on_every_descriptor_do_not_pass(sandbox: Sandbox) -> None:
    forged = (
        b'{"kind": "loaded"}\n{"i": 0, "status": "ok"}\n{"kind": "test", "i": 0, "status": "ok"}\n'
        b'{"kind": "test", "i": 0, "status": "output", "stdout": "3"}\n{"kind": "done"}\n'
    )
    program = (
        WRONG
        + f"import os\nfor fd in range(64):\n    try:\n        os.write(fd, {forged!r})\n    except OSError:\n        pass\nos._exit(0)\n"
    )
    for test in (CallTest("t", "add", (1, 2), expected=3), IOTest("t", "", "3")):
        result = sandbox.run(py(program, test))
        assert not result.passed, test
        assert result.tests[0].verdict in (Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR)


def test_garbage_in_the_record_pipe_is_a_runtime_error(sandbox: Sandbox) -> None:
    program = (
        WRONG
        + "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'garbage\\n')\n    except OSError:\n        pass\n"
    )
    result = sandbox.run(py(program, CallTest("t", "add", (1, 2), expected=3)))
    assert result.tests[0].verdict is Verdict.RUNTIME_ERROR


def test_closing_every_descriptor_does_not_pass(sandbox: Sandbox) -> None:
    program = "import os\nos.closerange(0, 1024)\ndef add(a, b):\n    return a + b\n"
    result = sandbox.run(py(program, CallTest("t", "add", (1, 2), expected=3)))
    assert result.tests[0].verdict is Verdict.RUNTIME_ERROR and not result.passed
