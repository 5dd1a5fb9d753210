"""Find the program in a model's answer (a pure function, tested on real SmolLM2-135M outputs).

Why its own module: extraction mistakes look exactly like a bad policy (bigcode-evaluation-harness #311,
#138: stop words and special tokens polluting code; evalplus #92: a sanitiser deleting correct code), so
the rules are explicit and pinned by tests on a corpus of real outputs
(``tests/fixtures/rewards/smollm2_outputs.jsonl``).

Rules, in order:
1. Chat-template leftovers: a leading ``<|im_start|>assistant`` header is removed; everything from the
   first end-of-turn token (``<|im_end|>``, ``</s>``, ``<|endoftext|>``, ``<|eot_id|>``, ``<|end|>``) or
   the start of a new turn (``<|im_start|>``) is dropped; ``<think>...</think>`` reasoning is skipped.
2. Markdown fences (```` ```python ````, ```` ```py ````, any case, or a bare ```` ``` ````): blocks tagged
   with another language (```` ```bash ````, ```` ```text ````) are ignored. Among the candidates the best is
   one that defines ``entry_point`` (when given), then compiles, then looks like a program (defines
   something, imports, or reads input: not a usage example such as ``print(add(2, 3))``), then is
   complete (closed); among blocks defining the entry point the last wins (the model's final answer),
   among the others the longest.
3. Truncated output (a fence still open at the end): the block's text is taken, a trailing incomplete
   line (no newline at the end) is dropped, and for Python up to ``MAX_TRIMMED_LINES`` more trailing
   lines are dropped until it compiles; if it never compiles it is returned as it was (the verifier then
   reports ``syntax_error``).
4. No fences: the text from the first line that starts code (``def``, ``class``, ``import``, ``from``,
   ``@``, ``#include``...) up to the longest prefix that compiles (trailing prose dropped); an answer that
   starts indented is a continuation of the prompt's code (a function body), trimmed the same way.

Limits: a solution split across several blocks (imports in one, the function in the next) yields only
one block; compiling code that follows the solution in unfenced output (``print(add(2, 3))``) is kept;
the compile check silences warnings with ``warnings.catch_warnings``, which is not thread-safe, so call
extraction from one thread at a time (``score_batch`` does).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Literal

# Everything after one of these is not part of the answer.
END_OF_TURN_MARKERS: tuple[str, ...] = ("<|im_end|>", "</s>", "<|endoftext|>", "<|eot_id|>", "<|end|>")
NEW_TURN_MARKERS: tuple[str, ...] = ("<|im_start|>", "<|start_header_id|>")
LEADING_HEADER_RE = re.compile(
    r"^\s*(?:<\|im_start\|>|<\|start_header_id\|>)\s*assistant\s*(?:<\|end_header_id\|>)?"
)
THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)
FENCE_RE = re.compile(r"^\s{0,8}(`{3,}|~{3,})\s*([\w+#.-]*)")
LANGUAGE_ALIASES: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "py", "python3", "py3", "ipython", "pycon"}),
    "cpp": frozenset({"cpp", "c++", "cc", "cxx", "hpp", "c"}),
}
CODE_START_RE: dict[str, re.Pattern[str]] = {
    "python": re.compile(r"^(def |async def |class |import |from \S+ import |@\w|if __name__)"),
    "cpp": re.compile(r"^(#include|using |int main|template\s*<|struct |class |namespace )"),
}
# A block that defines something or reads input is a program, not a usage example like "print(f(2))".
PROGRAM_LIKE_RE: dict[str, re.Pattern[str]] = {
    "python": re.compile(
        r"^(?:async def |def |class |import |from \S+ import )|input\(|sys\.stdin", re.MULTILINE
    ),
    "cpp": re.compile(r"int\s+main\s*\(|#include"),
}
MAX_TRIMMED_LINES = 5
CONTINUATION_STUB = "def _execrl_continuation():\n"  # lets an indented body compile on its own

Source = Literal["fenced", "unclosed_fence", "raw", "raw_continuation"]


@dataclass(frozen=True)
class ExtractedCode:
    """The program found in a completion and how it was found (for metrics and debugging)."""

    code: str
    source: Source
    language_tag: str  # the fence's info string, lower-cased ("" for a bare fence or raw code)
    blocks_found: int  # fenced blocks in the answer, any language
    truncated: bool  # taken from an unclosed fence, or trailing lines were trimmed


@dataclass(frozen=True)
class FencedBlock:
    """One markdown fenced block: its body, lower-cased info string, whether it was closed, its position."""

    text: str
    tag: str
    closed: bool
    index: int


def clean_completion(text: str) -> str:
    """Apply rule 1: drop a leading assistant header, cut at the first end-of-turn marker or the start of
    a new turn, and drop think blocks."""
    text = LEADING_HEADER_RE.sub("", text, count=1)
    cut = len(text)
    for marker in (*END_OF_TURN_MARKERS, *NEW_TURN_MARKERS):
        pos = text.find(marker)
        if pos != -1:
            cut = min(cut, pos)
    text = THINK_RE.sub("", text[:cut])
    if "<think>" in text:  # reasoning that never closed: no answer after it
        text = text[: text.index("<think>")]
    return text


def extract_code(text: str, language: str = "python", entry_point: str | None = None) -> ExtractedCode | None:
    """The program in ``text`` by the module's rules, or ``None`` when there is no code at all."""
    cleaned = clean_completion(text)
    blocks = fenced_blocks(cleaned)
    if blocks:
        aliases = LANGUAGE_ALIASES.get(language, frozenset({language}))
        candidates = [b for b in blocks if (b.tag == "" or b.tag in aliases) and b.text.strip()]
        if not candidates:
            return None
        best = (
            candidates[0]
            if len(candidates) == 1
            else max(candidates, key=lambda b: _rank(b, language, entry_point))
        )
        code, trimmed = (best.text, False) if best.closed else _trim_truncated(best.text, language)
        return ExtractedCode(
            code=_strip_blank_edges(code),
            source="fenced" if best.closed else "unclosed_fence",
            language_tag=best.tag,
            blocks_found=len(blocks),
            truncated=not best.closed or trimmed,
        )
    return _extract_raw(cleaned, language)


def defines_name(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` at top level (``def``, ``async def``, ``class`` or assignment)."""
    pattern = rf"^(?:async\s+def|def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*(?::[^=]*)?=(?!=)"
    return re.search(pattern, code, flags=re.MULTILINE) is not None


def python_syntax_error(code: str) -> SyntaxError | ValueError | None:
    """Why ``code`` does not compile as Python, or ``None``.

    Warnings are silenced during the compile: with ``-W error`` (pytest's ``filterwarnings = error``) an
    invalid escape such as ``"\\d"`` would otherwise turn into a SyntaxError here while the program runs
    fine in the sandbox, and without it every such sample would print a DeprecationWarning.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(code, "<candidate>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:  # ValueError: NUL bytes in the source
            return exc
    return None


def compiles(code: str, language: str = "python") -> bool:
    """Python: ``compile`` succeeds. Other languages: unknown here, so ``True`` (the sandbox compiles)."""
    return language != "python" or python_syntax_error(code) is None


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Split markdown fences line by line; a fence still open at the end gives an unclosed block."""
    blocks: list[FencedBlock] = []
    open_fence: str | None = None
    tag = ""
    body: list[str] = []
    for line in text.splitlines(keepends=True):
        match = FENCE_RE.match(line)
        if open_fence is None:
            if match:
                open_fence, tag, body = match.group(1), match.group(2).lower(), []
            continue
        if match and match.group(1)[0] == open_fence[0] and len(match.group(1)) >= len(open_fence):
            blocks.append(FencedBlock("".join(body), tag, closed=True, index=len(blocks)))
            open_fence = None
            if match.group(2):  # "```python" right after a block without a closing fence: a new block
                open_fence, tag, body = match.group(1), match.group(2).lower(), []
            continue
        body.append(line)
    if open_fence is not None:
        blocks.append(FencedBlock("".join(body), tag, closed=False, index=len(blocks)))
    return blocks


def _rank(
    block: FencedBlock, language: str, entry_point: str | None
) -> tuple[bool, bool, bool, bool, int, int]:
    """Sort key (rule 2): blocks defining the entry point rank by position (the model's final answer), the
    others by whether they look like a program rather than a usage example, then by length."""
    defines = entry_point is not None and defines_name(block.text, entry_point)
    text = block.text if block.closed else _trim_truncated(block.text, language)[0]
    program_like = PROGRAM_LIKE_RE.get(language, CODE_START_RE["python"]).search(block.text) is not None
    order = block.index if defines else len(block.text.strip())
    return (defines, compiles(text, language), program_like, block.closed, order, block.index)


def _trim_truncated(code: str, language: str) -> tuple[str, bool]:
    """Rule 3: drop an incomplete last line, then trailing lines until the code compiles (bounded)."""
    lines = code.splitlines(keepends=True)
    trimmed = False
    if lines and not lines[-1].endswith("\n"):
        lines, trimmed = lines[:-1], True
    if language != "python" or compiles("".join(lines), language):
        return "".join(lines), trimmed
    for drop in range(1, min(MAX_TRIMMED_LINES, len(lines) - 1) + 1):
        candidate = "".join(lines[:-drop])
        if candidate.strip() and compiles(candidate, language):
            return candidate, True
    return "".join(lines), trimmed


def _extract_raw(text: str, language: str) -> ExtractedCode | None:
    """Rule 4: unfenced code."""
    lines = text.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    if lines[first][:1] in (" ", "\t"):  # an indented body: the continuation of the prompt's code
        code, trimmed = _longest_compiling_prefix(lines[first:], language, prefix=CONTINUATION_STUB)
        return ExtractedCode(_strip_blank_edges(code), "raw_continuation", "", 0, truncated=trimmed)
    pattern = CODE_START_RE.get(language)
    start = next((i for i in range(first, len(lines)) if pattern and pattern.match(lines[i])), None)
    if start is None:
        return None
    code, trimmed = _longest_compiling_prefix(lines[start:], language, prefix="")
    return ExtractedCode(_strip_blank_edges(code), "raw", "", 0, truncated=trimmed)


def _longest_compiling_prefix(lines: list[str], language: str, *, prefix: str) -> tuple[str, bool]:
    """The longest run of leading ``lines`` that compiles after ``prefix`` (all of them if none does).

    Jumps to just before the reported error line instead of dropping one line at a time, so long prose
    after the code costs a few compiles, not one per line.
    """
    if language != "python":
        return "".join(lines), False
    offset = prefix.count("\n")
    end = len(lines)
    while end > 0:
        error = python_syntax_error(prefix + "".join(lines[:end]))
        if error is None:
            return "".join(lines[:end]), any(line.strip() for line in lines[end:])
        line = (error.lineno or 0) - offset if isinstance(error, SyntaxError) else 0
        end = line - 1 if 1 <= line <= end else end - 1
    return "".join(lines), False


def _strip_blank_edges(code: str) -> str:
    """Drop blank lines at both ends but keep indentation (a continuation body must stay indented)."""
    lines = code.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + ("\n" if lines else "")
