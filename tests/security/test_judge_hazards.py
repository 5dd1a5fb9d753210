"""Judging hazards (issue 9, classes 1 and 2): bytes a candidate writes are parsed with bounds.

Guards against: a candidate's record or value that made the parent raise (class 1: the CLI died, a batch
lost every result) or crashed the harness (class 2: the run became ``sandbox_error``, which rewards mask
out, so a failing program escaped its negative reward).
"""

from __future__ import annotations

import pytest
from security_helpers import py

from execrl.rewards.batch import run_requests
from execrl.sandbox import (
    CallTest,
    CodeTest,
    ExecutionRequest,
    ExecutionResult,
    InvalidRequestError,
    Sandbox,
    Verdict,
)

ONE = (CodeTest("t", "assert add(1, 2) == 3"),)
TWO = (CodeTest("t", "assert add(1, 2) == 3"), CodeTest("u", "assert add(2, 2) == 4"))
LOADED = b'{"kind": "loaded"}\n'


def forge(payload: bytes, *tests: object) -> ExecutionRequest:
    """A wrong program that writes ``payload`` to every descriptor it has (one is its record pipe)."""
    program = (
        "import os\ndef add(a, b):\n    return a - b\n"
        f"for fd in range(3, 20):\n    try:\n        os.write(fd, {payload!r})\n"
        "    except OSError:\n        pass\nos._exit(0)\n"
    )
    return py(program, *tests)


MALFORMED = {
    "deep line": b"[" * 100_000 + b"\n",
    "status of the wrong type": LOADED + b'{"i": 0, "status": [1]}\n',
    "status an object": LOADED + b'{"i": 0, "status": {}}\n',
    "index a float": LOADED + b'{"i": 0.0, "status": "error"}\n',
    "huge integer time": LOADED + b'{"i": 0, "status": "error", "cpu_s": 1' + b"0" * 400 + b"}\n",
    "time of the wrong type": LOADED + b'{"i": 0, "status": "error", "wall_s": "x", "message": [1]}\n',
    "integer past the str limit": LOADED + b'{"i": 1' + b"0" * 5000 + b', "status": "ok"}\n',
    "not utf-8": LOADED + b'{"i": 0, "status": "\xff\xfe"}\n',
}


def test_malformed_records_are_the_candidates_runtime_error(sandbox: Sandbox) -> None:
    """Class 1 (one test: the parent reads the records) and class 2 (two tests: the harness does)."""
    for name, payload in MALFORMED.items():
        for tests in (ONE, TWO):
            result = sandbox.run(forge(payload, *tests))
            verdicts = [t.verdict for t in result.tests]
            assert verdicts == [Verdict.RUNTIME_ERROR] * len(tests), (name, len(tests), result)


def test_a_deeply_nested_value_is_a_wrong_answer_not_a_crash(sandbox: Sandbox) -> None:
    """A forged ``value`` record whose JSON nests 100,000 deep (the parent's json decoder recursed)."""
    payload = LOADED + b'{"i": 0, "status": "value", "value": "' + b"[" * 100_000 + b'"}\n'
    result = sandbox.run(forge(payload, CallTest("t", "add", (1, 2), expected=3)))
    assert result.tests[0].verdict is Verdict.WRONG_ANSWER
    nested = "def add(a, b):\n    x = []\n    for _ in range(150):\n        x = [x]\n    return x\n"
    result = sandbox.run(py(nested, CallTest("t", "add", (1, 2), expected=3)))
    assert result.tests[0].verdict is Verdict.WRONG_ANSWER


def test_a_forged_program_error_cannot_carry_a_passing_status(sandbox: Sandbox) -> None:
    """A ``program_error`` record with ``"status": "ok"`` overrode the harness's ``error`` status of
    every remaining test, which then passed."""
    result = sandbox.run(forge(b'{"kind": "program_error", "status": "ok"}\n', *TWO))
    assert not result.passed
    assert [t.verdict for t in result.tests] == [Verdict.RUNTIME_ERROR] * 2


def test_one_malformed_request_does_not_cost_a_batch_its_results(sandbox: Sandbox) -> None:
    good = py("def add(a, b):\n    return a + b\n", *TWO)
    bad = [forge(payload, *tests) for payload in MALFORMED.values() for tests in (ONE, TWO)]
    results = sandbox.run_batch([good, *bad, good])
    assert len(results) == len(bad) + 2
    assert results[0].passed and results[-1].passed
    assert all(r.verdict is Verdict.RUNTIME_ERROR for r in results[1:-1])
    scored = run_requests(sandbox, [good, bad[0], bad[1], good])
    assert [r.verdict for r in scored if isinstance(r, ExecutionResult)] == [
        Verdict.PASSED,
        Verdict.RUNTIME_ERROR,
        Verdict.RUNTIME_ERROR,
        Verdict.PASSED,
    ]


def test_a_request_the_parent_could_not_judge_is_refused_before_it_runs(sandbox: Sandbox) -> None:
    """Arguments or expected values nested past the recursion limit (or not JSON) raised
    ``RecursionError``/``TypeError`` while the job was built or the value judged; now the request is
    invalid, named, and nothing runs."""
    nested: list[object] = []
    for _ in range(5000):
        nested = [nested]
    program = "def add(a, b):\n    return a + b\n"
    for test in (
        CallTest("args", "add", (nested, 1), expected=1),
        CallTest("expected", "add", (1, 2), expected=nested),
        CallTest("object", "add", (1, 2), expected=object()),
    ):
        with pytest.raises(InvalidRequestError, match="JSON"):
            sandbox.run(py(program, test))
