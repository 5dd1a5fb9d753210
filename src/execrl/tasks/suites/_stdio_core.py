"""Stdin/stdout problem templates and how one instance becomes a ``Task``.

Like the function templates, a problem is a ``string.Template`` over a parameter grid, with a Python
reference program and a plausible buggy program. Expected outputs come from running the reference in
process at build time (``sys.stdin`` swapped for the test input, stdout captured), which keeps the build
fast (no subprocess per test) and makes the reference the single source of truth. C++ variants reuse a
Python problem's inputs and expected outputs; that they agree is checked by the tests, which compile them.

Audit tests (held back from reward and prompt): ``AUDIT_TESTS`` more inputs from a stream of their own
(``"<seed>:<task id>:audit"``), distinct from the visible and hidden ones, so every task's reward tests are
exactly what they were before the audit split existed (see ``_fn_core`` for the same choice).
"""

from __future__ import annotations

import contextlib
import io
import random
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from string import Template
from typing import Any

from execrl.sandbox.types import CompareMode, IOTest
from execrl.tasks.schema import CodeSpec, Split, Task, TaskMetadata
from execrl.tasks.suites._common import fence, task_id

Params = Mapping[str, Any]
InputGen = Callable[[random.Random, Params], str]
HIDDEN_TESTS = 7
SEARCH_INPUTS = 200
AUDIT_TESTS = 4


@dataclass(frozen=True)
class StdioProblem:
    """``statement`` describes the task, ``input_format``/``output_format`` the streams; all are templates."""

    name: str
    family: str
    difficulty: int
    statement: str
    input_format: str
    output_format: str
    reference: str  # Python program
    wrong: str  # Python program with a plausible bug
    gen: InputGen
    grid: tuple[Params, ...] = ({},)
    compare: CompareMode = "whitespace"
    edges: tuple[str, ...] = ()


@dataclass(frozen=True)
class CppVariant:
    """A C++ reference and buggy program for one grid point of a Python problem."""

    problem: str
    grid_index: int
    reference: str
    wrong: str


def _subst(text: str, params: Params, *, code: bool) -> str:
    mapping = {k: (v if (k.endswith("_src") or not code) else repr(v)) for k, v in params.items()}
    return Template(textwrap.dedent(text).strip("\n")).substitute({k: str(v) for k, v in mapping.items()})


class _Exit(Exception):
    """Raised in place of ``SystemExit`` so a reference calling ``exit()`` ends only its own run."""


def run_program(code: str, stdin: str, where: str) -> str:
    """Run generator-authored Python ``code`` in process with ``stdin``; return what it printed."""
    out = io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, where, "exec"), {"__name__": "__main__"})  # noqa: S102 - our reference code
    finally:
        sys.stdin = saved
    return out.getvalue()


def _tokens_equal(got: str, expected: str, compare: CompareMode) -> bool:
    if compare == "exact":
        return got == expected
    a, b = got.split(), expected.split()
    if compare == "whitespace" or len(a) != len(b):
        return a == b
    for x, y in zip(a, b, strict=True):
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            if x != y:
                return False
            continue
        if abs(fx - fy) > 1e-9 + 1e-6 * abs(fy):
            return False
    return True


def _wrong_fails(wrong: str, stdin: str, expected: str, compare: CompareMode, where: str) -> bool:
    try:
        got = run_program(wrong, stdin, where)
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, EOFError, RecursionError):
        return True
    return not _tokens_equal(got, expected, compare)


def _inputs(problem: StdioProblem, params: Params, rng: random.Random, count: int) -> list[str]:
    out: list[str] = []
    for _ in range(count * 20):
        text = problem.gen(rng, params)
        if text not in out:
            out.append(text)
        if len(out) == count:
            break
    return out


def choose_tests(
    problem: StdioProblem, params: Params, reference: str, wrong: str, rng: random.Random, where: str
) -> tuple[tuple[IOTest, ...], tuple[IOTest, ...]]:
    """(visible, hidden) tests; one hidden input is guaranteed to make the wrong program fail."""
    drawn = _inputs(problem, params, rng, 2 + HIDDEN_TESTS)
    visible = sorted(drawn[:3], key=len)[:2]
    hidden = [x for x in drawn if x not in visible] + list(problem.edges)
    if len(hidden) < 5:
        raise ValueError(f"{where}: only {len(hidden)} distinct hidden inputs; widen the input generator")
    expected = {x: run_program(reference, x, where) for x in hidden}
    if not any(_wrong_fails(wrong, x, expected[x], problem.compare, where) for x in hidden):
        catching = [
            x
            for x in _inputs(problem, params, rng, SEARCH_INPUTS)
            if _wrong_fails(wrong, x, run_program(reference, x, where), problem.compare, where)
        ]
        if not catching:
            raise ValueError(f"{where}: the wrong program passes every generated input; fix the problem")
        hidden[-1] = min(catching, key=len)

    def make(prefix: str, inputs: list[str]) -> tuple[IOTest, ...]:
        return tuple(
            IOTest(f"{prefix}_{i}", x, run_program(reference, x, where), compare=problem.compare)
            for i, x in enumerate(inputs, start=1)
        )

    return make("example", visible), make("hidden", hidden)


def audit_tests(
    problem: StdioProblem,
    params: Params,
    reference: str,
    taken: tuple[IOTest, ...],
    rng: random.Random,
    where: str,
) -> tuple[IOTest, ...]:
    """Up to ``AUDIT_TESTS`` new inputs (none shown or scored), expected outputs from the reference."""
    used = {t.stdin for t in taken}
    inputs = [x for x in _inputs(problem, params, rng, AUDIT_TESTS * 4) if x not in used][:AUDIT_TESTS]
    return tuple(
        IOTest(f"audit_{i}", x, run_program(reference, x, where), compare=problem.compare)
        for i, x in enumerate(inputs, start=1)
    )


def _prompt(problem: StdioProblem, params: Params, examples: tuple[IOTest, ...], language: str) -> str:
    shown = "\n\n".join(
        f"Example {i} input:\n{t.stdin.rstrip()}\nExample {i} output:\n{t.expected_stdout.rstrip()}"
        for i, t in enumerate(examples, start=1)
    )
    lang, block = ("C++17", "cpp") if language == "cpp" else ("Python", "python")
    return (
        f"{_subst(problem.statement, params, code=False)}\n\n"
        f"Input: {_subst(problem.input_format, params, code=False)}\n"
        f"Output: {_subst(problem.output_format, params, code=False)}\n\n{shown}\n\n"
        f"Write a complete {lang} program that reads standard input and writes the answer to standard output. "
        f"Reply with the program in a ```{block} code block."
    )


def build_stdio_task(
    problem: StdioProblem,
    index: int,
    params: Params,
    *,
    seed: int,
    split: Split,
    cpp: CppVariant | None = None,
) -> Task:
    """The task for grid point ``index`` (a C++ task when ``cpp`` is given, with the same tests)."""
    language = "cpp" if cpp else "python"
    tid = task_id("stdio", f"{problem.name}_cpp" if cpp else problem.name, index)
    reference = _subst(problem.reference, params, code=True)
    wrong = _subst(problem.wrong, params, code=True)
    rng = random.Random(f"{seed}:{tid}")
    visible, hidden = choose_tests(problem, params, reference, wrong, rng, tid)
    audit = audit_tests(
        problem, params, reference, (*visible, *hidden), random.Random(f"{seed}:{tid}:audit"), tid
    )
    if cpp:
        reference, wrong = textwrap.dedent(cpp.reference).strip(), textwrap.dedent(cpp.wrong).strip()
    return Task(
        id=tid,
        domain="code",
        prompt=_prompt(problem, params, visible, language),
        spec=CodeSpec(kind="stdio", language=language),
        metadata=TaskMetadata(family=problem.family, difficulty=problem.difficulty, split=split),
        visible_tests=visible,
        hidden_tests=hidden,
        reference_solution=fence(reference, language),
        wrong_solution=fence(wrong, language),
        audit_tests=audit,
    )
