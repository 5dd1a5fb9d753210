"""The inline path (``testgroups.runs_inline``): a single Python function/assert test runs in pid 1 itself.

The parent then validates the records and takes the death of the process from the zygote's exit status;
several tests keep the forked child, so a death in one test does not take the next with it.
"""

from __future__ import annotations

from execrl.sandbox import CallTest, CodeTest, ExecutionRequest, IOTest, Limits, Sandbox, Verdict
from execrl.sandbox.zygote.testgroups import GroupState, runs_inline

LIMITS = Limits(timeout_s=10.0, cpu_time_s=2.0, memory_mb=128, max_processes=16)


def py(program: str, *tests: CodeTest | CallTest | IOTest) -> ExecutionRequest:
    return ExecutionRequest(language="python", program=program, tests=tests, limits=LIMITS)


def test_only_one_python_function_or_assert_test_runs_inline() -> None:
    assert runs_inline(True, "python", ["code"]) and runs_inline(True, "python", ["call"])
    assert not runs_inline(False, "python", ["code"])  # the unisolated backend keeps its child
    assert not runs_inline(True, "binary", ["call"])
    assert not runs_inline(True, "python", ["io"])
    assert not runs_inline(True, "python", ["call", "call"])
    assert not runs_inline(True, "python", [])


class _Collect:
    """Stands in for the harness: GroupState relays accepted test records through ``send``."""

    max_output = 1 << 16

    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []

    def send(self, record: dict[str, object]) -> None:
        self.sent.append(record)


def test_records_after_garbage_are_not_relayed_even_in_a_later_read() -> None:
    """Regression: garbage and the real records used to count separately when they arrived in two reads
    (the kill is not instant), so a program that wrote garbage could still be judged on its value."""
    relay = _Collect()
    group = GroupState(relay, [0])  # type: ignore[arg-type]
    assert not group.feed(b"garbage\n") and group.violation
    assert not group.feed(b'{"kind": "loaded"}\n{"i": 0, "status": "value", "value": "3"}\n')
    assert relay.sent == [] and group.pending == [0]
    clean = GroupState(relay, [0])  # type: ignore[arg-type]
    assert clean.feed(b'{"kind": "loaded"}\n') and clean.feed(b'{"i": 0, "status": "ok"}\n')
    assert [r["i"] for r in relay.sent] == [0] and clean.pending == []


def test_an_inline_death_gets_the_exit_status_the_zygote_saw(sandbox: Sandbox) -> None:
    exited = sandbox.run(py("import os\ndef f():\n    os._exit(3)\n", CallTest("t", "f", (), {}, 1)))
    assert exited.verdict is Verdict.RUNTIME_ERROR
    assert exited.tests[0].error_message == "exit code 3"
    crashed = sandbox.run(py("import ctypes\ndef f():\n    ctypes.string_at(0)\n", CodeTest("t", "f()")))
    assert crashed.verdict is Verdict.RUNTIME_ERROR
    assert crashed.tests[0].error_message == "killed by SIGSEGV"


def test_inline_output_and_values_arrive(sandbox: Sandbox) -> None:
    result = sandbox.run(
        py(
            "print('top')\ndef f(n):\n    print('in f')\n    return [n, n]\n",
            CallTest("t", "f", (2,), {}, [2, 2]),
        )
    )
    assert result.verdict is Verdict.PASSED
    assert result.stdout == "top\nin f\n"


def test_with_several_tests_a_death_does_not_take_the_next_test(sandbox: Sandbox) -> None:
    program = "import os\ndef f(n):\n    if n == 0:\n        os._exit(3)\n    return n\n"
    result = sandbox.run(py(program, CallTest("dies", "f", (0,), {}, 0), CallTest("lives", "f", (5,), {}, 5)))
    assert [t.verdict for t in result.tests] == [Verdict.RUNTIME_ERROR, Verdict.PASSED]
    assert result.tests[0].error_message == "exit code 3"
