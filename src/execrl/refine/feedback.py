"""What the model is told after a failed attempt: feedback built from the **visible** tests only.

Formats (selectable, ``--feedback``):

- ``pass_fail``: one line, passed or failed (Self-Debugging's "Simple" feedback);
- ``names``: which visible tests failed, by name;
- ``details`` (default): per failing test its input / expected / got, or the exception and the last
  traceback lines, each field truncated to ``max_chars`` and at most ``max_failures`` failures shown, then
  how many passed. This is the format RLEF trains on (Gehring et al. 2024, "RLEF", arXiv 2410.02089) and
  the one LDB/Reflexion/AlphaCodium converge to; bare pass/fail is much weaker (research/eval_refine.md §6).

Why only visible tests: the final program is scored on the hidden tests, which must never enter a prompt
(a leak would turn the loop into test-fitting). :func:`render_feedback` takes a ``Score`` computed with
``RewardConfig(use_hidden_tests=False)``; the loop never calls it with a hidden-test score.
"""

from __future__ import annotations

from typing import Literal

from execrl.rewards import Score
from execrl.sandbox.types import TestResult, Verdict

__all__ = ["FEEDBACK_FORMATS", "FeedbackFormat", "render_feedback", "repair_instruction"]

FeedbackFormat = Literal["pass_fail", "names", "details"]
FEEDBACK_FORMATS: tuple[FeedbackFormat, ...] = ("pass_fail", "names", "details")

REPAIR_INSTRUCTION = (
    "Fix the function. Reply with the whole corrected function in a single ```python code block."
)

_NO_RUN = {
    "no_code_found": "No code block was found in your answer.",
    "syntax_error": "Your code does not compile",
}


def repair_instruction() -> str:
    return REPAIR_INSTRUCTION


def _cut(text: str | None, max_chars: int) -> str:
    text = (text or "").rstrip()
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def _failure_lines(test: TestResult, max_chars: int) -> list[str]:
    if test.verdict is Verdict.TIME_LIMIT:
        return [f"- {test.name}: timed out"]
    if test.verdict is Verdict.MEMORY_LIMIT:
        return [f"- {test.name}: exceeded the memory limit"]
    lines = [f"- {test.name}:"]
    if test.input:
        lines.append(f"    input: {_cut(test.input, max_chars)}")
    if test.expected is not None or test.got is not None:
        lines.append(f"    expected: {_cut(test.expected, max_chars)}")
        lines.append(f"    got: {_cut(test.got, max_chars)}")
    if test.error_type == "AssertionError" and test.error_message:  # a visible example's own report
        lines.extend(f"    {line}" for line in _cut(test.error_message, max_chars).splitlines())
    elif test.error_type:
        lines.append(f"    error: {test.error_type}: {_cut(test.error_message, max_chars)}")
        if test.traceback_tail:
            tail = _cut(test.traceback_tail, max_chars).replace("\n", "\n      ")
            lines.append(f"    traceback (last lines):\n      {tail}")
    if len(lines) == 1:
        lines[0] += f" {test.verdict.value}"
    return lines


def render_feedback(score: Score, fmt: FeedbackFormat, *, max_failures: int = 3, max_chars: int = 300) -> str:
    """The feedback message for a visible-test ``score`` that did not pass (see the module docstring)."""
    if fmt not in FEEDBACK_FORMATS:
        raise ValueError(f"unknown feedback format {fmt!r}; choose one of {FEEDBACK_FORMATS}")
    if score.passed:
        raise ValueError("render_feedback is for failed attempts; this score passed")
    if fmt == "pass_fail":
        return f"Your code failed the tests.\n\n{REPAIR_INSTRUCTION}"
    execution = score.execution
    code = score.reason_code
    if execution is None or not execution.tests:  # nothing ran test by test: say why, in one line
        head = _NO_RUN.get(code, f"Your code failed: {code}")
        detail = score.reason.split(":", 1)[1].strip() if ":" in score.reason and fmt == "details" else ""
        return f"{head}{': ' + _cut(detail, max_chars) if detail else '.'}\n\n{REPAIR_INSTRUCTION}"
    failed = [t for t in execution.tests if t.verdict is not Verdict.PASSED]
    passed = len(execution.tests) - len(failed)
    if fmt == "names":
        names = ", ".join(t.name for t in failed)
        return f"These tests failed: {names}. {passed} passed.\n\n{REPAIR_INSTRUCTION}"
    lines = [f"Your code failed {len(failed)} of {len(execution.tests)} tests:"]
    for test in failed[:max_failures]:
        lines.extend(_failure_lines(test, max_chars))
    if len(failed) > max_failures:
        lines.append(f"(and {len(failed) - max_failures} more failing tests not shown)")
    return "\n".join(lines) + f"\n\n{REPAIR_INSTRUCTION}"
