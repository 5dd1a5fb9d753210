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

What the candidate wrote is untrusted text in the next prompt (issue 24, class 3):

- **special tokens**: the program's output (``got``, error messages, tracebacks) and the test names pass
  through :func:`strip_special_tokens` with the tokenizer's special-token texts: a program that printed
  ``<|im_end|>\\n<|im_start|>system`` forged a system turn, since the chat template's text is tokenised
  with special tokens parsed. Without a tokenizer (a remote endpoint) the common chat-template markers
  (:data:`CHAT_MARKERS`: ChatML, Llama 3, Mistral, Phi, Gemma) are removed instead;
- **length**: the feedback before the instruction is cut to ``max_tokens`` tokens (the tokenizer's, or
  4 characters per token without one: an estimate, a server's tokenizer may count more) with a marker
  saying how much was cut; a long test name or many failing tests once put 10k-60k characters into the
  next prompt, past the model's context.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, Literal

from execrl.rewards import Score
from execrl.sandbox.types import TestResult, Verdict

__all__ = [
    "CHAT_MARKERS",
    "FEEDBACK_FORMATS",
    "FeedbackFormat",
    "bound_tokens",
    "render_feedback",
    "repair_instruction",
    "special_token_texts",
    "strip_special_tokens",
]

FeedbackFormat = Literal["pass_fail", "names", "details"]
FEEDBACK_FORMATS: tuple[FeedbackFormat, ...] = ("pass_fail", "names", "details")

REPAIR_INSTRUCTION = (
    "Fix the function. Reply with the whole corrected function in a single ```python code block."
)

CHAT_MARKERS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "[INST]",
    "[/INST]",
    "<s>",
    "</s>",
)
REMOVED = "[special token removed]"
CHARS_PER_TOKEN = 4  # the bound without a tokenizer
DEFAULT_MAX_TOKENS = 512

_NO_RUN = {
    "no_code_found": "No code block was found in your answer.",
    "syntax_error": "Your code does not compile",
}


def repair_instruction() -> str:
    return REPAIR_INSTRUCTION


def special_token_texts(tokenizer: Any | None) -> tuple[str, ...]:
    """The texts a chat template's tokenisation turns into special tokens (``CHAT_MARKERS`` without one)."""
    if tokenizer is None:
        return CHAT_MARKERS
    texts = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    for added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(added, "special", False):
            texts.add(str(added.content))
    return tuple(sorted((t for t in texts if t), key=len, reverse=True))


@functools.lru_cache(maxsize=16)
def _special_pattern(texts: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in texts))


def strip_special_tokens(text: str, texts: Sequence[str]) -> str:
    """``text`` with every occurrence of ``texts`` replaced by a visible placeholder, until none is left
    (removing one must not join its neighbours into another)."""
    if not texts:
        return text
    pattern = _special_pattern(tuple(texts))
    while True:
        cleaned = pattern.sub(REMOVED, text)
        if cleaned == text:
            return cleaned
        text = cleaned


def bound_tokens(text: str, max_tokens: int, tokenizer: Any | None) -> str:
    """``text`` cut to its first ``max_tokens`` tokens, with a marker saying how many were cut."""
    if tokenizer is None:
        limit = max_tokens * CHARS_PER_TOKEN
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[feedback cut: {len(text) - limit} of {len(text)} characters not shown]"
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) <= max_tokens:
        return text
    kept = str(tokenizer.decode(ids[:max_tokens])).rstrip("\ufffd")
    return kept + f"\n[feedback cut: {len(ids) - max_tokens} of {len(ids)} tokens not shown]"


def _cut(text: str | None, max_chars: int) -> str:
    text = (text or "").rstrip()
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def _failure_lines(test: TestResult, max_chars: int) -> list[str]:
    name = _cut(test.name, max_chars)
    if test.verdict is Verdict.TIME_LIMIT:
        return [f"- {name}: timed out"]
    if test.verdict is Verdict.MEMORY_LIMIT:
        return [f"- {name}: exceeded the memory limit"]
    lines = [f"- {name}:"]
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


def render_feedback(
    score: Score,
    fmt: FeedbackFormat,
    *,
    max_failures: int = 3,
    max_chars: int = 300,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    tokenizer: Any | None = None,
) -> str:
    """The feedback message for a visible-test ``score`` that did not pass (see the module docstring):
    special-token text removed (``tokenizer``'s, else :data:`CHAT_MARKERS`), then cut to ``max_tokens``."""
    if fmt not in FEEDBACK_FORMATS:
        raise ValueError(f"unknown feedback format {fmt!r}; choose one of {FEEDBACK_FORMATS}")
    if score.passed:
        raise ValueError("render_feedback is for failed attempts; this score passed")
    if fmt == "pass_fail":
        return f"Your code failed the tests.\n\n{REPAIR_INSTRUCTION}"
    body = strip_special_tokens(_body(score, fmt, max_failures, max_chars), special_token_texts(tokenizer))
    return f"{bound_tokens(body, max_tokens, tokenizer)}\n\n{REPAIR_INSTRUCTION}"


def _body(score: Score, fmt: FeedbackFormat, max_failures: int, max_chars: int) -> str:
    execution = score.execution
    code = score.reason_code
    if execution is None or not execution.tests:  # nothing ran test by test: say why, in one line
        head = _NO_RUN.get(code, f"Your code failed: {code}")
        detail = score.reason.split(":", 1)[1].strip() if ":" in score.reason and fmt == "details" else ""
        return f"{head}{': ' + _cut(detail, max_chars) if detail else '.'}"
    failed = [t for t in execution.tests if t.verdict is not Verdict.PASSED]
    passed = len(execution.tests) - len(failed)
    if fmt == "names":
        names = ", ".join(_cut(t.name, max_chars) for t in failed)
        return f"These tests failed: {names}. {passed} passed."
    lines = [f"Your code failed {len(failed)} of {len(execution.tests)} tests:"]
    for test in failed[:max_failures]:
        lines.extend(_failure_lines(test, max_chars))
    if len(failed) > max_failures:
        lines.append(f"(and {len(failed) - max_failures} more failing tests not shown)")
    return "\n".join(lines)
