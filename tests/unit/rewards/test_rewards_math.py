"""Math answer equivalence: a hand-written table of (expected, answer, verdict)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest

from execrl.rewards import RewardConfig, final_answer, get_verifier, parse_number
from execrl.tasks.schema import Task

CASES = [
    # fractions, decimals, mixed forms
    ("3/4", "The answer is 3/4.", True),
    ("3/4", "The answer is 0.75", True),
    ("0.75", "So we get 3/4", True),
    ("3/4", "The answer is 0.7", False),
    ("3/4", "The answer is 0.70", False),  # 3/4 has an exact 2-place form: 0.70 is wrong
    ("7/4", "#### 1 3/4", True),  # mixed number
    ("-7/4", "answer: -1 3/4", True),
    ("6/8", "answer: 3/4", True),
    ("2", "answer: 4/2", True),
    ("5", "answer: 5.0", True),
    ("5", "answer: 5.00001", False),
    # thousands separators, currency, units
    ("1250", "The total is 1,250 dollars.", True),
    ("1,250", "The answer is 1250", True),
    ("1,250", "The answer is 1,25", False),  # ambiguous decimal comma: not a number
    ("12.5", "The answer is $12.50.", True),
    ("12", "The answer is 12 apples.", True),
    ("12", "answer is \\text{12 cm}", True),
    ("1000000", "#### 1,000,000", True),
    ("-3", "The answer is \u22123", True),  # Unicode minus
    # percent: as a unit or as /100
    ("0.75", "The answer is 75%", True),
    ("75", "The answer is 75%", True),
    ("75%", "The answer is 0.75", True),
    ("75%", "The answer is 75", True),
    ("75%", "The answer is 75 percent", True),
    ("0.75", "The answer is 7.5%", False),
    # LaTeX
    ("3/4", "$\\frac{3}{4}$", True),
    ("3/4", "The answer is \\boxed{\\dfrac{3}{4}}.", True),
    ("3/4", "\\boxed{\\frac{6}{8}} and more text 5", True),
    ("-1/2", "\\boxed{-\\frac{1}{2}}", True),
    ("12", "\\boxed{12} is wrong, so the final is \\boxed{13}", False),  # the last box wins
    ("12", "\\(x = 12\\)", True),
    # rounded decimals for non-terminating fractions (>= 2 places, within half a unit)
    ("1/3", "The answer is 0.33", True),
    ("1/3", "The answer is 0.333", True),
    ("1/3", "The answer is 0.3", False),
    ("1/3", "The answer is 0.34", False),
    ("2/3", "The answer is 0.67", True),
    ("2/3", "The answer is 0.66", False),
    # where the answer is: ####, 'answer is', last number
    ("42", "Step 1: 40 + 2 = 42.\n#### 42", True),
    ("42", "First 40, then 2 more: 42", True),  # last number
    ("42", "I think it's 42 but maybe 41", False),  # last number is 41
    ("42", "The answer is 42, not 41.", True),  # first number after 'answer is'
    ("3", "#### 3\nThe answer is 4", True),  # #### beats 'answer is'
]


@pytest.mark.parametrize(("expected", "answer", "correct"), CASES)
def test_math_equivalence_table(
    make_math_task: Callable[[str], Task], expected: str, answer: str, correct: bool
) -> None:
    score = get_verifier("math").prepare(make_math_task(expected), answer, RewardConfig())
    assert score.passed is correct, score.reason
    assert score.reward == (1.0 if correct else 0.0)
    assert score.valid


def test_wrong_answer_reason_names_expected_and_got(make_math_task: Callable[[str], Task]) -> None:
    score = get_verifier("math").prepare(make_math_task("3/4"), "The answer is 0.7", RewardConfig())
    assert score.reason == "wrong_answer: expected 3/4, got 0.7"
    assert score.reason_code == "wrong_answer"


def test_no_number_is_no_answer_found(make_math_task: Callable[[str], Task]) -> None:
    score = get_verifier("math").prepare(make_math_task("3"), "I don't know.<|im_end|>", RewardConfig())
    assert (score.reason, score.reward, score.valid) == ("no_answer_found", 0.0, True)


@pytest.mark.parametrize(
    ("text", "value", "percent", "places"),
    [
        ("1,250.5", Fraction(2501, 2), False, 1),
        ("-.5", Fraction(-1, 2), False, 1),
        ("1e3", Fraction(1000), False, 0),
        ("2 1/2", Fraction(5, 2), False, 0),
        ("40%", Fraction(40), True, 0),
        ("\\frac{-3}{6}", Fraction(-1, 2), False, 0),
    ],
)
def test_parse_number(text: str, value: Fraction, percent: bool, places: int) -> None:
    parsed = parse_number(text)
    assert parsed is not None
    assert (parsed.value, parsed.percent, parsed.decimal_places) == (value, percent, places)


def test_division_by_zero_is_not_a_number() -> None:
    assert parse_number("1/0") is None


def test_a_cut_off_box_is_no_answer_not_a_stray_number() -> None:
    assert final_answer("so 7 \\boxed{\\frac{3}{4") is None
    assert final_answer("so 7 \\boxed{\\frac{3}{4}}").value == Fraction(3, 4)  # type: ignore[union-attr]


@pytest.mark.parametrize("reference", ["sqrt(2)", "3/4 or 0.75", "x = 3", ""])
def test_references_must_be_a_bare_number(make_math_task: Callable[[str], Task], reference: str) -> None:
    with pytest.raises(ValueError, match="is not a number"):
        get_verifier("math").prepare(make_math_task(reference), "1", RewardConfig())
