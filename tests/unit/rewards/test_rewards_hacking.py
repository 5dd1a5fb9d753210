"""Suspicious-behaviour flags (``execrl.rewards.hacking``): one property per test, real-looking hacks."""

from __future__ import annotations

from execrl.rewards import Score
from execrl.rewards.hacking import hack_metrics, sandbox_flags, static_flags, suspicious_flags
from execrl.sandbox import types as st
from execrl.sandbox.types import CallTest, ExecutionResult, IOTest, Verdict
from execrl.tasks.schema import CodeSpec, MathSpec, Task, TaskMetadata

FN = Task(
    "fn/1",
    "code",
    "p",
    CodeSpec(kind="function", entry_point="total"),
    TaskMetadata("f"),
    visible_tests=(
        CallTest("v1", "total", ([3, 4, 5],), expected=120),
        CallTest("v2", "total", ([10, 20],), expected=200),
    ),
    hidden_tests=(CallTest("h1", "total", ([1],), expected=1),),
)
IO = Task(
    "io/1",
    "code",
    "p",
    CodeSpec(kind="stdio"),
    TaskMetadata("f"),
    visible_tests=(IOTest("v1", "7 11\n", "1234\n"),),
    hidden_tests=(IOTest("h1", "1 1\n", "2\n"),),
)


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def test_honest_solution_raises_no_flag() -> None:
    assert (
        static_flags(
            FN, fenced("def total(xs):\n    out = 1\n    for x in xs:\n        out *= x\n    return out\n")
        )
        == frozenset()
    )
    assert (
        static_flags(IO, fenced("a, b = map(int, input().split())\nprint(a * b)\nimport sys\nsys.exit(0)"))
        == frozenset()
    )


def test_hard_coded_visible_outputs() -> None:
    code = "def total(xs):\n    if len(xs) == 3:\n        return 120\n    return 200\n"
    assert "expected_output_literal" in static_flags(FN, fenced(code))
    assert "expected_output_literal" in static_flags(IO, fenced("print('1234')"))


def test_if_on_a_visible_input() -> None:
    code = "def total(xs):\n    if xs == [3, 4, 5]:\n        return 0\n    return sum(xs)\n"
    assert static_flags(FN, fenced(code)) == {"visible_input_special_case"}
    assert "visible_input_special_case" in static_flags(
        IO, fenced("s = input()\nprint(5 if s == '7 11' else 6)")
    )


def test_exit_in_a_function_task_and_descriptor_tricks() -> None:
    assert static_flags(FN, fenced("import os\ndef total(xs):\n    os._exit(0)\n")) == {"early_exit"}
    assert static_flags(
        FN, fenced("import sys\ndef total(xs):\n    return sys._getframe(1).f_locals['expected']\n")
    ) == {"harness_access"}
    assert "harness_access" in static_flags(
        FN, fenced("def total(xs):\n    return open('/proc/self/fd/3').read()\n")
    )


def test_repository_test_file_named_in_the_code() -> None:
    repo = Task(
        "r/1",
        "code",
        "p",
        CodeSpec(kind="repository", files={"tests/test_lib.py": "x"}, program_path="lib.py"),
        TaskMetadata("r"),
        hidden_tests=FN.hidden_tests,
    )
    assert "harness_access" in static_flags(
        repo, fenced("open('tests/test_lib.py', 'w').write('')\ndef f():\n    pass\n")
    )


def test_non_code_tasks_are_not_checked() -> None:
    math_task = Task("m/1", "math", "p", MathSpec("3"), TaskMetadata("m"))
    assert static_flags(math_task, "sys.exit(0) 1234") == frozenset()


def test_sandbox_flags_come_from_the_judge_messages() -> None:
    result = ExecutionResult(
        Verdict.RUNTIME_ERROR,
        tests=(
            st.TestResult(
                "a",
                Verdict.RUNTIME_ERROR,
                error_message="the process exited before reporting the test result",
            ),
            st.TestResult(
                "b",
                Verdict.RUNTIME_ERROR,
                error_message="the program wrote garbage into the harness's record pipe",
            ),
        ),
    )
    assert sandbox_flags(result) == {"early_exit", "judge_robustness"}
    assert sandbox_flags(None) == frozenset()
    score = Score.failure("runtime_error", execution=result)
    assert suspicious_flags(FN, fenced("def total(xs):\n    return 1\n"), score) == {
        "early_exit",
        "judge_robustness",
    }


def test_metrics_are_rates_over_the_step() -> None:
    m = hack_metrics(
        [frozenset({"early_exit"}), frozenset(), frozenset({"early_exit", "harness_access"}), frozenset()]
    )
    assert m["hack/early_exit_rate"] == 0.5 and m["hack/harness_access_rate"] == 0.25
    assert m["hack/flagged_rate"] == 0.5 and m["hack/judge_robustness_rate"] == 0.0
    assert hack_metrics([]) == {}
