"""Feedback formats on hand-built visible-test scores (exact expected text), and the assert rewriting."""

from __future__ import annotations

import pytest

from execrl.refine.feedback import REPAIR_INSTRUCTION, render_feedback
from execrl.rewards import Score
from execrl.sandbox.types import ExecutionResult, Verdict
from execrl.sandbox.types import TestResult as Outcome

PASSED = Outcome(name="example_0", verdict=Verdict.PASSED)
WRONG = Outcome(
    name="example_1",
    verdict=Verdict.WRONG_ANSWER,
    error_type="AssertionError",
    error_message="input: f(2)\nexpected: 4\ngot: 3",
)
CRASH = Outcome(
    name="example_2",
    verdict=Verdict.RUNTIME_ERROR,
    error_type="ZeroDivisionError",
    error_message="division by zero",
    traceback_tail='  File "main.py", line 2, in f\nZeroDivisionError: division by zero',
)
SLOW = Outcome(name="example_3", verdict=Verdict.TIME_LIMIT)


def _score(*tests: Outcome) -> Score:
    result = ExecutionResult(verdict=Verdict.WRONG_ANSWER, tests=tests)
    return Score.failure("wrong_answer: x", pass_fraction=0.25, execution=result)


def test_details_lists_input_expected_got_and_traceback() -> None:
    text = render_feedback(_score(PASSED, WRONG, CRASH, SLOW), "details", max_failures=2)
    assert text == (
        "Your code failed 3 of 4 tests:\n"
        "- example_1:\n"
        "    input: f(2)\n"
        "    expected: 4\n"
        "    got: 3\n"
        "- example_2:\n"
        "    error: ZeroDivisionError: division by zero\n"
        "    traceback (last lines):\n"
        '        File "main.py", line 2, in f\n'
        "      ZeroDivisionError: division by zero\n"
        "(and 1 more failing tests not shown)\n\n" + REPAIR_INSTRUCTION
    )


def test_names_and_pass_fail_formats() -> None:
    score = _score(PASSED, WRONG, SLOW)
    assert render_feedback(score, "names") == (
        f"These tests failed: example_1, example_3. 1 passed.\n\n{REPAIR_INSTRUCTION}"
    )
    assert render_feedback(score, "pass_fail") == f"Your code failed the tests.\n\n{REPAIR_INSTRUCTION}"


def test_truncation_and_no_code() -> None:
    long = Outcome(
        name="t", verdict=Verdict.WRONG_ANSWER, error_type="AssertionError", error_message="x" * 500
    )
    text = render_feedback(_score(long), "details", max_chars=50)
    assert "    " + "x" * 47 + "...\n" in text and "x" * 48 not in text
    no_code = Score.failure("no_code_found")
    assert render_feedback(no_code, "details").startswith("No code block was found in your answer.")
    syntax = Score.failure("syntax_error: line 3: invalid syntax")
    assert render_feedback(syntax, "details").startswith("Your code does not compile: line 3: invalid syntax")


def test_refuses_passed_scores_and_unknown_formats() -> None:
    with pytest.raises(ValueError, match="passed"):
        render_feedback(Score.success(), "details")
    with pytest.raises(ValueError, match="unknown feedback format"):
        render_feedback(_score(WRONG), "verbose")  # type: ignore[arg-type]
