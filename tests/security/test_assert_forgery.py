"""Assert-style tests cannot be forged (issue 9, class 3).

Guards against: a wrong program written against the harness that writes the harness's ``ok`` record
itself (or returns an object whose ``__eq__`` always says yes) and was judged ``passed`` on an
assert-style test, the form of HumanEval, MBPP and the repository suite. The recognised asserts are now
probes judged by the parent (``execrl.sandbox.judge.asserts``), whose expected values never enter the sandbox.
"""

from __future__ import annotations

import json

from security_helpers import py

from execrl.sandbox import CodeTest, ExecutionRequest, Sandbox, Verdict

WRONG = "def add(a, b):\n    return a - b\n"
CHECK = (
    "METADATA = {'author': 'x'}\n\n"
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n"
    "    assert abs(candidate(0.5, 0.25) - 0.75) < 1e-6\n"
    "    assert candidate(2, 2) == 4, 'two and two'\n"
    "    assert candidate(10, 20) != 987654\n\n"
    "check(add)\n"
)


def forging(records: bytes, *tests: CodeTest) -> ExecutionRequest:
    """A wrong program that writes ``records`` on every descriptor (one is its record pipe) and exits."""
    program = WRONG + (
        f"import os\nfor fd in range(3, 20):\n    try:\n        os.write(fd, {records!r})\n"
        "    except OSError:\n        pass\nos._exit(0)\n"
    )
    return py(program, *tests)


def test_a_forged_ok_record_does_not_pass_an_assert_test(sandbox: Sandbox) -> None:
    one = b'{"kind": "loaded"}\n{"i": 0, "status": "ok"}\n'
    result = sandbox.run(forging(one, CodeTest("check", CHECK)))
    assert result.tests[0].verdict is Verdict.WRONG_ANSWER
    two = b'{"kind": "loaded"}\n{"i": 0, "status": "ok"}\n{"i": 1, "status": "ok"}\n'
    result = sandbox.run(forging(two, CodeTest("a", "assert add(1, 2) == 3"), CodeTest("b", CHECK)))
    assert [t.verdict for t in result.tests] == [Verdict.WRONG_ANSWER, Verdict.WRONG_ANSWER]


def test_forged_probe_values_do_not_pass_without_the_right_answers(sandbox: Sandbox) -> None:
    """The sandbox never sees 3, 0.75 or 4: guessed values fail, and so does a count that does not match."""
    for values in (
        "[1, 1, 1, 1]",
        "[true, true, true, true]",
        "[3]",
        "[3, 0.75, 4, 5, 6]",
        "[[[]]]",
        '[{"u": "x"}]',
    ):
        probed = {"i": 0, "status": "probed", "value": values}
        record = b'{"kind": "loaded"}\n' + json.dumps(probed).encode() + b"\n"
        result = sandbox.run(forging(record, CodeTest("check", CHECK)))
        assert result.tests[0].verdict is Verdict.WRONG_ANSWER, values


def test_the_expected_values_never_enter_the_sandbox(sandbox: Sandbox) -> None:
    """The program reads its own test's code from the harness's frames: no expected value is there."""
    spy = (
        "import gc, sys\n"
        "def add(a, b):\n"
        "    frames, f = [], sys._getframe()\n"
        "    while f is not None:\n"
        "        frames.append(repr(f.f_locals) + repr(f.f_code.co_consts))\n"
        "        f = f.f_back\n"
        "    strings = [o for o in gc.get_objects() if isinstance(o, (str, dict, list))]\n"
        "    seen = ''.join(frames) + repr(strings)\n"
        "    marks = (' and '.join(['two', 'two']), ''.join(['9876', '54']))  # built: no constant to find\n"
        "    return 'LEAK' if any(m in seen for m in marks) else a + b\n"
    )
    result = sandbox.run(py(spy, CodeTest("check", CHECK)))
    assert result.passed, result.tests


def test_an_always_equal_object_does_not_pass(sandbox: Sandbox) -> None:
    program = (
        "class Eq:\n    def __eq__(self, other):\n        return True\n"
        "    def __sub__(self, other):\n        return 0\n"
        "def add(a, b):\n    return Eq()\n"
    )
    result = sandbox.run(py(program, CodeTest("check", CHECK), CodeTest("plain", "assert add(1, 2) == 3")))
    assert [t.verdict for t in result.tests] == [Verdict.WRONG_ANSWER, Verdict.WRONG_ANSWER]


def test_tuples_and_lists_keep_pythons_equality(sandbox: Sandbox) -> None:
    """Values cross as tagged JSON: ``[0, 1] == (0, 1)`` is False in Python, and stays so."""
    tests = (CodeTest("tuple", "assert f() == (0, 1)"), CodeTest("list", "assert f() == [0, 1]"))
    as_list = sandbox.run(py("def f():\n    return [0, 1]\n", *tests))
    assert [t.verdict for t in as_list.tests] == [Verdict.WRONG_ANSWER, Verdict.PASSED]
    as_tuple = sandbox.run(py("def f():\n    return (0, 1)\n", *tests))
    assert [t.verdict for t in as_tuple.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER]
