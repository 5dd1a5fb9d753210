"""``format_trace`` (``execrl refine show``): a long visible-test reason is clipped visibly, a short one kept."""

from __future__ import annotations

from execrl.refine.trace import REASON_CHARS, format_trace


def _row(reason: str) -> dict[str, object]:
    return {
        "task_id": "HumanEval/0",
        "condition": "refine",
        "turn": 1,
        "visible_passed": False,
        "visible_reason": reason,
        "hidden_passed": False,
        "completion_tokens": 7,
        "code": "def f():\n    return 1",
        "final": True,
    }


def test_a_long_reason_ends_in_an_ellipsis_inside_its_parentheses() -> None:
    reason = "wrong_answer: example_0: AssertionError: has_close_elements([1.0, 2.0, 3.0], 0.5) " + "x" * 100
    line = format_trace([_row(reason)]).splitlines()[1]
    shown = reason[: REASON_CHARS - 3] + "..."
    assert line == f"--- turn 1: visible FAIL ({shown}), hidden fail, 7 tokens  <- final"


def test_a_short_reason_is_shown_whole() -> None:
    line = format_trace([_row("syntax_error: line 3: unmatched ')'")]).splitlines()[1]
    assert line.startswith("--- turn 1: visible FAIL (syntax_error: line 3: unmatched ')'), hidden fail")
