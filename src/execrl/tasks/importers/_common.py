"""Pieces shared by the importers: prompts, fences, test builders and JSON-in-a-string fields."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from execrl.inputs import json_value
from execrl.sandbox.types import CodeTest, IOTest
from execrl.tasks.audit_split import AUDIT_FRACTION, hold_back_audit
from execrl.tasks.schema import Task
from execrl.tasks.serialize import FieldReader, Problem, identifier_problem, task_problems
from execrl.tasks.storage import PathLike, convert_file

STDIO_INSTRUCTION = (
    "\n\nWrite a complete Python 3 program that reads the input from standard input and prints the answer "
    "to standard output. Reply with the program in a single ```python code block."
)
FUNCTION_INSTRUCTION = "\n\nReply with the complete Python code in a single ```python code block."

RowConverter = Callable[[FieldReader], Task | None]


def fence(code: str, language: str = "python") -> str:
    """Code as a model would answer it: one fenced block (``\\r\\n`` normalised)."""
    return f"```{language}\n{code.replace(chr(13) + chr(10), chr(10)).rstrip()}\n```"


def as_text(value: Any) -> str:
    """A test input/output given as a string or as a list of lines (APPS does both)."""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value) + ("\n" if value else "")
    return str(value)


def io_tests(prefix: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> list[IOTest]:
    return [
        IOTest(name=f"{prefix}_{i}", stdin=as_text(stdin), expected_stdout=as_text(stdout))
        for i, (stdin, stdout) in enumerate(zip(inputs, outputs, strict=True))
    ]


def call_test(
    name: str, candidate: str, args: Sequence[Any], expected: Any, *, wrapped_ok: bool = False
) -> CodeTest:
    """A ``CodeTest`` calling ``candidate(*args)`` and comparing with ``expected`` through JSON.

    Arguments are embedded as JSON text (never as code), and the result goes through a JSON round trip
    so tuples compare equal to lists. ``wrapped_ok`` accepts ``[result] == expected``, APPS's convention
    for call-based outputs. The expected value is written as a Python literal in an ``assert ... ==``
    (or ``in`` for ``wrapped_ok``) so that the sandbox rewrites it into a probe judged by the parent
    (``execrl.sandbox.judge.asserts``; issue 9): it never enters the sandbox. Values with no Python literal
    (``Infinity``, ``NaN``) keep the older form, compared inside the sandbox.
    """
    got = f"_json.loads(_json.dumps({candidate}(*_args)))"
    head = f"import json as _json\n_args = _json.loads({json.dumps(list(args))!r})\n"
    wanted = json.loads(json.dumps(expected))
    choices = (
        [wanted, wanted[0]] if wrapped_ok and isinstance(wanted, list) and len(wanted) == 1 else [wanted]
    )
    try:
        literals = [repr(choice) for choice in choices if ast.literal_eval(repr(choice)) == choice]
    except (ValueError, SyntaxError):  # inf and nan have no literal
        literals = []
    if len(literals) == len(choices):
        check = f"{got} == {literals[0]}" if len(literals) == 1 else f"{got} in [{', '.join(literals)}]"
        return CodeTest(name=name, code=f"{head}assert {check}\n")
    alt = " or [_got] == _expected" if wrapped_ok else ""
    code = (
        f"{head}_expected = _json.loads({json.dumps(expected)!r})\n_got = {got}\n"
        f"assert _got == _expected{alt}, f'expected {{_expected!r}}, got {{_got!r}}'\n"
    )
    return CodeTest(name=name, code=code)


def function_name(row: FieldReader, path: str, value: Any) -> str | None:
    """``value`` when it is a Python identifier (it is pasted into test code), else None and a problem.

    A row's function name is data, and data pasted into code is code: ``f(0) or True and f`` as a name
    would make every test pass whatever the completion returns (issue 14, class 3).
    """
    why = identifier_problem(value)
    if why is not None:
        row.problems.append((path, why))
        return None
    return str(value)


def candidate_expr(function_name: str, starter_code: str) -> str:
    """How tests reach the function: a LeetCode ``class Solution`` method or a plain function."""
    return f"Solution().{function_name}" if "class Solution" in starter_code else function_name


def json_field(row: FieldReader, key: str, kind: str, *, default: Any = ...) -> Any:
    """A field that may hold JSON text (APPS, LiveCodeBench) or the decoded value itself."""
    value = row.get(key, "any", default=default)
    if isinstance(value, str) and kind != "str":
        if not value.strip():
            if default is ...:
                row.problems.append((row.where(key), "empty"))
            return None if default is ... else default
        try:
            value = json_value(value)  # bounded depth: JSON text inside a string is untrusted too
        except ValueError as exc:
            row.problems.append(
                (row.where(key), f"invalid JSON text: {str(exc).removeprefix('invalid JSON: ')}")
            )
            return None
    if value is not None and value is not default and kind == "object" and not isinstance(value, Mapping):
        row.problems.append((row.where(key), f"expected object, got {type(value).__name__}"))
        return None
    if value is not None and value is not default and kind == "list" and not isinstance(value, list):
        row.problems.append((row.where(key), f"expected list, got {type(value).__name__}"))
        return None
    return value


def difficulty_from(row: FieldReader, key: str, mapping: Mapping[Any, int], *, default: int) -> int:
    value = row.get(key, "any", default=None)
    if value is None:
        return default
    if value not in mapping:
        row.problems.append((row.where(key), f"unknown difficulty {value!r}; known: {list(mapping)}"))
        return default
    return mapping[value]


def import_rows(
    url: PathLike, convert: RowConverter, *, audit_fraction: float = AUDIT_FRACTION
) -> list[Task]:
    """Convert every row of ``url``; bad rows raise ``TaskValidationError`` with file:line: field.

    Tasks with enough hidden tests get an audit split of ``audit_fraction`` of them (``hold_back_audit``).
    """

    def one(value: Any) -> tuple[list[Task], list[Problem]]:
        problems: list[Problem] = []
        if not isinstance(value, Mapping):
            return [], [("", f"expected a JSON object, got {type(value).__name__}")]
        task = convert(FieldReader(value, "", problems))
        if problems or task is None:
            return [], problems or [("", "row could not be converted")]
        task = hold_back_audit(task, fraction=audit_fraction)
        problems = task_problems(task)
        return ([] if problems else [task]), problems

    return list(convert_file(url, one).tasks)
