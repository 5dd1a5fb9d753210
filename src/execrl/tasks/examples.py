"""Turn the worked examples in a docstring into visible tests.

HumanEval states its examples in several styles; only 76/164 prompts use doctest ``>>>``. This parser
understands the ones that are common and unambiguous:

- doctest: ``>>> f(1, 2)`` followed by the expected value on the next line;
- one line: ``f(x) == y``, ``f(x) ➞ y``, ``f(x) => y``, ``f(x) ==> y``, ``f(x) -> y``, ``f(x) returns y``,
  ``f(x) # returns y``, ``f(x) should return y`` (also bulleted with ``*``);
- two lines: ``Input: arr = [4, 2, 3]`` then ``Output: [2, 1]`` (keyword names must be parameters).

An example is kept only when every argument and the expected value are Python literals (``true`` and
``false`` are read as booleans), so prose like ``f("5 apples", 19) -> 19 - 5 - 6 = 8`` is skipped rather
than guessed. Parsing cannot tell a wrong example from a right one: HumanEval has a few docstrings whose
examples contradict the tests, which the suite excludes by id after checking them against the canonical
solution.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

_SEPARATORS = ("==>", "==", "=>", "➞", "->", "→", "# returns", "should return", "returns", "# =>", "=")
_INPUT = re.compile(r"^\s*(?:\*\s*)?input\s*:\s*(?P<args>.+?)\s*$", re.IGNORECASE)
_OUTPUT = re.compile(r"^\s*(?:\*\s*)?output\s*:\s*(?P<value>.+?)\s*$", re.IGNORECASE)
_FOR_ARGS = re.compile(
    r"^\s*for\s+(?P<args>\w+\s*=.+?),?\s+the\s+(?:output|result)\s+should\s+be\s+(?P<value>.+?)\s*$", re.I
)


@dataclass(frozen=True)
class DocExample:
    """One example: ``call`` is Python source calling the function, ``expected`` the value it returns."""

    call: str
    expected: object

    def assertion(self) -> str:
        """An ``assert`` statement checking the example (floats compare with a 1e-6 tolerance)."""
        if isinstance(self.expected, float) and math.isfinite(self.expected):
            return f"assert abs({self.call} - {self.expected!r}) < 1e-6, {self.call!r}"
        return f"assert {self.call} == {self.expected!r}, {self.call!r}"


def _literal(source: str) -> tuple[bool, object]:
    text = source.strip().rstrip(".,;").strip()
    text = {"true": "True", "false": "False", "none": "None"}.get(text, text)
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def _call_end(text: str, start: int) -> int:
    """Index just past the parenthesis closing the one at ``start`` (quotes respected), or -1."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _literal_call(call: str, entry_point: str, params: tuple[str, ...]) -> bool:
    """True if ``call`` is ``entry_point(<literals>, name=<literal>)`` with known keyword names."""
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError:
        return False
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point):
        return False
    values = [*node.args, *(k.value for k in node.keywords)]
    if any(k.arg not in params for k in node.keywords):
        return False
    for value in values:
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError):
            return False
    return True


def _one_line(line: str, entry_point: str, params: tuple[str, ...]) -> DocExample | None:
    text = line.strip().lstrip("*").strip()
    if text.lower().startswith("for " + entry_point + "("):
        text = text[4:]
    if not text.startswith(entry_point + "("):
        return None
    end = _call_end(text, len(entry_point))
    if end < 0:
        return None
    call, rest = text[:end], text[end:].strip()
    for sep in _SEPARATORS:
        if rest.lower().startswith(sep):
            ok, value = _literal(rest[len(sep) :])
            if ok and _literal_call(call, entry_point, params):
                return DocExample(call, value)
            return None
    return None


def _doctest(lines: list[str], i: int, entry_point: str, params: tuple[str, ...]) -> DocExample | None:
    text = lines[i].strip()
    if not text.startswith(">>> "):
        return None
    call = text[4:].strip()
    inline = _one_line(call, entry_point, params)
    if inline is not None:
        return inline
    following = [ln.strip() for ln in lines[i + 1 : i + 3]]
    if not following or not following[0] or following[0].startswith(">>>"):
        return None
    ok, value = _literal(following[0])
    if ok and _literal_call(call, entry_point, params):
        return DocExample(call, value)
    return None


def _input_output(lines: list[str], i: int, entry_point: str, params: tuple[str, ...]) -> DocExample | None:
    prose = _FOR_ARGS.match(lines[i])
    if prose is not None:
        call = f"{entry_point}({prose.group('args')})"
        ok, value = _literal(prose.group("value"))
        return DocExample(call, value) if ok and _literal_call(call, entry_point, params) else None
    match = _INPUT.match(lines[i])
    if match is None or i + 1 >= len(lines):
        return None
    out = _OUTPUT.match(lines[i + 1])
    if out is None:
        return None
    call = f"{entry_point}({match.group('args').rstrip('.')})"
    ok, value = _literal(out.group("value"))
    if ok and _literal_call(call, entry_point, params):
        return DocExample(call, value)
    return None


def function_params(source: str, entry_point: str) -> tuple[str, ...]:
    """Parameter names of ``def entry_point`` in ``source`` (a prompt whose body may be missing)."""
    match = re.search(rf"def\s+{re.escape(entry_point)}\s*\((?P<params>[^)]*)\)", source)
    if match is None:
        return ()
    names = []
    for part in match.group("params").split(","):
        name = part.split(":")[0].split("=")[0].strip().lstrip("*")
        if name.isidentifier():
            names.append(name)
    return tuple(names)


def parse_examples(source: str, entry_point: str) -> list[DocExample]:
    """Every example of ``entry_point`` found in ``source`` (deduplicated, in order of appearance)."""
    params = function_params(source, entry_point)
    lines = source.splitlines()
    found: dict[str, DocExample] = {}
    for i, line in enumerate(lines):
        example = (
            _doctest(lines, i, entry_point, params)
            or _one_line(line, entry_point, params)
            or _input_output(lines, i, entry_point, params)
        )
        if example is not None and example.call not in found:
            found[example.call] = example
    return list(found.values())
