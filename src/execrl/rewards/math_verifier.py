"""The "math" verifier: find the final answer in a completion and compare it exactly with ``MathSpec.answer``.

Comparison is exact on rationals (``fractions.Fraction``): "3/4", "0.75", "\\frac{3}{4}", "\\boxed{3/4}"
and "$0.75" are all 3/4, and no float tolerance hides a wrong answer. Decisions, each pinned by a test:

- Thousands separators "1,250" (groups of three) are accepted; "1,25" is ambiguous (a European decimal
  comma?) and does not parse.
- Currency signs, LaTeX math delimiters, ``\\text{...}`` wrappers and trailing units or words are dropped:
  "$12.50", "12 apples", "\\text{12 cm}" read 12.50, 12, 12.
- Mixed numbers "1 3/4" are 7/4.
- Percent: "75%" matches an expected 75 (the percent as a unit) or 0.75 (the percent as /100), and an
  expected "75%" accepts 75 or 0.75; both readings are common in word problems, and they never collide
  with a wrong answer except for an answer that is off by exactly a factor of 100.
- Rounded decimals: an answer written with d >= 2 decimal places matches an expected value that has no
  exact d-place form when it is within half a unit of the last place (1/3 accepts "0.33" and "0.333",
  not "0.3" and not "0.34"). An expected value that has an exact d-place form must be given exactly
  (3/4 rejects "0.70").

Final-answer extraction, first rule that applies: the last ``\\boxed{...}``; the last "#### X" line (GSM8K);
the last "answer is X" / "answer: X"; else the last number in the text. A ``\\boxed{`` left open (cut off
by the token limit) is no answer rather than a stray number. Within the boxed/####/answer
segment the first number is taken ("The answer is 3/4, i.e. 0.75" is 3/4). Limits: symbolic answers
(sqrt(2), pi, intervals, expressions) are out of scope: they do not parse and score ``no_answer_found``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from execrl.rewards.registry import register_verifier
from execrl.rewards.types import RewardConfig, Score
from execrl.tasks.schema import MathSpec, Task

MIN_ROUNDED_DECIMAL_PLACES = 2
_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?![.,]?\d)|[-+]?\.\d+(?![.,]?\d)"
NUMBER_RE = re.compile(
    rf"(?P<whole>{_NUM})\s+(?P<mnum>\d+)\s*/\s*(?P<mden>\d+)(?![.,]?\d)"  # mixed number "1 3/4"
    rf"|(?P<num>{_NUM})\s*/\s*(?P<den>{_NUM})"  # fraction "3/4", "-1.5/2"
    rf"|(?P<plain>{_NUM})"
)
PERCENT_RE = re.compile(r"\s*(?:\\?%|percent\b)")
ANSWER_IS_RE = re.compile(r"answer\s*(?:is|:|=)\s*:?", re.IGNORECASE)
HASHES_RE = re.compile(r"^\s*####\s*(.*)$", re.MULTILINE)
FRAC_RE = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
TEXT_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")
LATEX_NOISE_RE = re.compile(r"\\\$|\$|\\[()\[\]]|\\left|\\right|\\[,!;: ]|\{,\}|\^\s*\{?\\circ\}?|°")


@dataclass(frozen=True)
class ParsedNumber:
    value: Fraction
    percent: bool
    decimal_places: int  # digits after the point as written (0 for integers and fractions)
    text: str  # the matched text, for messages


def normalise(text: str) -> str:
    """Rewrite LaTeX and currency into plain arithmetic text (``\\frac{3}{4}`` -> ``3/4``)."""
    text = text.replace("\u2212", "-")  # Unicode minus
    text = TEXT_RE.sub(r" \1 ", text)
    text = FRAC_RE.sub(lambda m: f"{m.group(1).strip()}/{m.group(2).strip()}", text)
    text = text.replace("\\%", "%")
    return LATEX_NOISE_RE.sub("", text)


def _to_fraction(token: str) -> Fraction:
    return Fraction(token.replace(",", "").lstrip("+"))


def _places(token: str) -> int:
    mantissa = re.split(r"[eE]", token)[0]
    return len(mantissa.split(".", 1)[1]) if "." in mantissa else 0


def parse_number(text: str, *, last: bool = False, whole: bool = False) -> ParsedNumber | None:
    """The first (or ``last``) number in ``text`` after ``normalise``; ``None`` if there is none.

    ``whole=True`` (for references) requires the text to be just the number, with an optional percent.
    """
    text = normalise(text).strip()
    matches = list(NUMBER_RE.finditer(text))
    if not matches:
        return None
    match = matches[-1] if last else matches[0]
    percent_match = PERCENT_RE.match(text, match.end())
    percent = percent_match is not None
    if whole and (match.start() != 0 or (percent_match.end() if percent_match else match.end()) != len(text)):
        return None
    if match.group("whole") is not None:
        integer_part = _to_fraction(match.group("whole"))
        part = Fraction(int(match.group("mnum")), int(match.group("mden")))
        value, places = integer_part - part if integer_part < 0 else integer_part + part, 0
    elif match.group("num") is not None:
        den = _to_fraction(match.group("den"))
        if den == 0:
            return None
        value, places = _to_fraction(match.group("num")) / den, 0
    else:
        value, places = _to_fraction(match.group("plain")), _places(match.group("plain"))
    return ParsedNumber(value, percent, places, match.group(0).strip())


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), with nested braces balanced."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    if not starts:
        return None
    start, depth = starts[-1], 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return None  # unbalanced: the answer was cut off


def final_answer(completion: str) -> ParsedNumber | None:
    """The model's final answer by the rules in the module docstring."""
    boxed = last_boxed(completion)
    if boxed is not None:
        return parse_number(boxed)
    if re.search(r"\\(?:boxed|fbox)\s*\{", completion):
        return None  # a boxed answer cut off by the token limit: no answer, not the last stray number
    hashes = HASHES_RE.findall(completion)
    if hashes:
        return parse_number(hashes[-1])
    answer_is = list(ANSWER_IS_RE.finditer(completion))
    if answer_is:
        segment = completion[answer_is[-1].end() :].split("\n", 1)[0]
        parsed = parse_number(segment)
        if parsed is not None:
            return parsed
    return parse_number(completion, last=True)


def equivalent(expected: ParsedNumber, got: ParsedNumber) -> bool:
    """Exact rational equality with the percent and rounded-decimal rules of the module docstring."""
    # Each reading is the expected value on the scale the answer was written in.
    readings = [expected.value]
    if got.percent and not expected.percent:
        readings.append(expected.value * 100)  # "75%" for an expected 0.75
    elif expected.percent and not got.percent:
        readings.append(expected.value / 100)  # "0.75" for an expected 75%
    places = got.decimal_places
    for want in readings:
        if want == got.value:
            return True
        rounded = places >= MIN_ROUNDED_DECIMAL_PLACES and (want * 10**places).denominator != 1
        if rounded and abs(want - got.value) <= Fraction(1, 2 * 10**places):
            return True
    return False


@register_verifier("math")
def score_math(task: Task, completion: str, config: RewardConfig) -> Score:
    """Exact rational comparison of the final answer (boxed, ####, 'answer is', last number)."""
    if not isinstance(task.spec, MathSpec):
        raise TypeError(
            f"task {task.id!r} has domain 'math' but a {type(task.spec).__name__}; expected MathSpec"
        )
    expected = parse_number(task.spec.answer, whole=True)
    if expected is None:
        raise ValueError(f"task {task.id!r}: MathSpec.answer {task.spec.answer!r} is not a number")
    got = final_answer(completion)
    if got is None:
        return Score.failure("no_answer_found")
    if equivalent(expected, got):
        return Score.success()
    return Score.failure(f"wrong_answer: expected {task.spec.answer}, got {got.text}")
