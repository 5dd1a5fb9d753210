"""Function-task templates and how one template instance becomes a ``Task``.

A template is a parametric problem: its signature, docstring, reference body and buggy body are
``string.Template`` texts over a parameter grid (``$t`` in code becomes ``repr(t)``, in prose ``str(t)``;
keys ending in ``_src`` are pasted into code verbatim). Each grid point is a genuinely different task: the
threshold, base, direction or step set changes the answer, not just the name.

Expected values are computed by executing the reference implementation at build time, so the reference is
the single source of truth. The buggy variant is executed on the same inputs; if no hidden input catches
it, a wider pool of inputs is searched for one that does. If none is found the build raises: a wrong
solution that passes is a broken task, and a broken task must not ship.

Audit tests (``Task.audit_tests``, held back from reward and prompt): ``AUDIT_TESTS`` more inputs drawn
from a stream of their own (``"<seed>:<task id>:audit"``), distinct from the visible and hidden ones. They
are extra draws rather than hidden tests moved aside, so the reward tests of every task are exactly what
they were before the audit split existed. A template whose input space is too small to give a new input
gets fewer (or no audit split; ``execrl tasks check`` lists those).
"""

from __future__ import annotations

import copy
import random
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from string import Template
from typing import Any

from execrl.sandbox.types import CallTest
from execrl.tasks.schema import CodeSpec, Split, Task, TaskMetadata
from execrl.tasks.suites._common import fence, json_value, task_id

Params = Mapping[str, Any]
ArgsGen = Callable[[random.Random, Params], tuple[Any, ...]]
EdgeGen = Callable[[Params], tuple[tuple[Any, ...], ...]]

HIDDEN_RANDOM_TESTS = 7
MIN_HIDDEN_TESTS = 5
SEARCH_INPUTS = 200  # extra random inputs tried when no hidden test catches the wrong body
AUDIT_TESTS = 4


def _no_edges(params: Params) -> tuple[tuple[Any, ...], ...]:
    return ()


@dataclass(frozen=True)
class FunctionTemplate:
    """One parametric function problem; see the module docstring for the substitution rules."""

    name: str  # template name, used in task ids
    family: str  # metadata.family
    difficulty: int
    signature: str  # "(nums: list[int]) -> int"
    doc: str  # one or two sentences, the task statement
    body: str  # reference body (not indented)
    wrong: str  # plausible buggy body
    gen: ArgsGen  # one random argument tuple
    grid: tuple[Params, ...] = ({},)
    edges: EdgeGen = _no_edges  # argument tuples worth always testing (empty lists, zero, ...)
    entry: str = ""  # entry point; defaults to ``name``; may use $params


@dataclass(frozen=True)
class Rendered:
    entry_point: str
    signature_line: str
    doc: str
    reference: str
    wrong: str
    prompt_code: str = field(default="")


def _code_subst(text: str, params: Params) -> str:
    mapping = {k: (v if k.endswith("_src") else repr(v)) for k, v in params.items()}
    return Template(text).substitute(mapping)


def _text_subst(text: str, params: Params) -> str:
    return Template(text).substitute({k: str(v) for k, v in params.items()})


def render(template: FunctionTemplate, params: Params) -> Rendered:
    entry = _text_subst(template.entry or template.name, params)
    signature_line = f"def {entry}{template.signature}:"
    doc = _text_subst(template.doc, params)

    def function(body: str) -> str:
        code = textwrap.indent(textwrap.dedent(_code_subst(body, params)).strip("\n"), "    ")
        return f"{signature_line}\n{code}\n"

    return Rendered(entry, signature_line, doc, function(template.body), function(template.wrong))


def load_function(code: str, entry_point: str, where: str) -> Callable[..., Any]:
    """Execute generator-authored code (never model output) and return its entry point."""
    namespace: dict[str, Any] = {"__name__": "execrl_suite_reference"}
    exec(compile(code, where, "exec"), namespace)  # noqa: S102 - our own reference code, at build time
    fn = namespace.get(entry_point)
    if not callable(fn):
        raise ValueError(f"{where}: code does not define {entry_point}()")
    return fn  # type: ignore[no-any-return]


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
    """(ok, result) of calling a wrong variant, which is allowed to crash (that also fails the task)."""
    try:
        return True, fn(*copy.deepcopy(args))
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError) as err:
        return False, err


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        return abs(a - b) <= 1e-9 + 1e-6 * abs(b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(type(a) is type(b) and a == b)


def _draw_inputs(
    template: FunctionTemplate, params: Params, rng: random.Random, count: int
) -> list[tuple[Any, ...]]:
    seen: set[str] = set()
    out: list[tuple[Any, ...]] = []
    for _ in range(count * 20):
        args = template.gen(rng, params)
        key = repr(args)
        if key not in seen:
            seen.add(key)
            out.append(args)
        if len(out) == count:
            break
    return out


def _choose_tests(
    template: FunctionTemplate, params: Params, rendered: Rendered, rng: random.Random, where: str
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], Callable[..., Any]]:
    """(visible args, hidden args, reference fn); guarantees one hidden input that the wrong body fails."""
    ref = load_function(rendered.reference, rendered.entry_point, where)
    wrong = load_function(rendered.wrong, rendered.entry_point, where + ":wrong")
    drawn = _draw_inputs(template, params, rng, 2 + HIDDEN_RANDOM_TESTS)
    visible = sorted(drawn[:3], key=lambda a: len(repr(a)))[:2]
    hidden = [a for a in drawn if a not in visible] + list(template.edges(params))

    def catches(args: tuple[Any, ...]) -> bool:
        ok, got = _call(wrong, args)
        return not ok or not _same(json_value(got, where), json_value(ref(*copy.deepcopy(args)), where))

    if not any(catches(a) for a in hidden):
        extra = _draw_inputs(template, params, rng, SEARCH_INPUTS)
        catching = [a for a in extra if catches(a)]
        if not catching:
            raise ValueError(f"{where}: the wrong solution passes every generated input; fix the template")
        hidden[-1] = min(catching, key=lambda a: len(repr(a)))
    if len(hidden) < MIN_HIDDEN_TESTS:
        raise ValueError(f"{where}: only {len(hidden)} distinct hidden inputs; widen the input generator")
    return visible, hidden, ref


def _call_tests(
    prefix: str, entry: str, fn: Callable[..., Any], arg_list: list[tuple[Any, ...]], where: str
) -> tuple[CallTest, ...]:
    tests = []
    for i, args in enumerate(arg_list, start=1):
        expected = json_value(fn(*copy.deepcopy(args)), where)
        stored_args = tuple(json_value(a, where) for a in args)
        tests.append(CallTest(name=f"{prefix}_{i}", entry_point=entry, args=stored_args, expected=expected))
    return tuple(tests)


def _call_text(test: CallTest) -> str:
    return f"{test.entry_point}({', '.join(repr(a) for a in test.args)})"


def _prompt(rendered: Rendered, examples: tuple[CallTest, ...]) -> tuple[str, str]:
    """(plain-text prompt, prompt_code = signature + docstring with doctest examples)."""
    shown = "\n".join(f"{_call_text(t)} == {t.expected!r}" for t in examples)
    doctests = "\n".join(f"    >>> {_call_text(t)}\n    {t.expected!r}" for t in examples)
    doc_lines = textwrap.fill(rendered.doc, width=100, initial_indent="    ", subsequent_indent="    ")
    prompt_code = f'{rendered.signature_line}\n    """{doc_lines.strip()}\n\n{doctests}\n    """\n'
    prompt = (
        f"Write a Python function `{rendered.signature_line[4:-1]}`.\n"
        f"{rendered.doc}\n\n"
        f"Examples:\n{shown}\n\n"
        "Reply with the complete function in a ```python code block."
    )
    return prompt, prompt_code


def build_function_task(
    template: FunctionTemplate, index: int, params: Params, *, seed: int, split: Split
) -> Task:
    """The task for grid point ``index`` of ``template``, with its tests computed from the reference."""
    tid = task_id("functions", template.name, index)
    rendered = render(template, params)
    rng = random.Random(f"{seed}:{tid}")
    visible_args, hidden_args, ref = _choose_tests(template, params, rendered, rng, tid)
    visible = _call_tests("example", rendered.entry_point, ref, visible_args, tid)
    hidden = _call_tests("hidden", rendered.entry_point, ref, hidden_args, tid)
    prompt, prompt_code = _prompt(rendered, visible)
    shown_or_scored = {repr(a) for a in (*visible_args, *hidden_args)}
    audit_draws = _draw_inputs(template, params, random.Random(f"{seed}:{tid}:audit"), AUDIT_TESTS * 4)
    audit_args = [a for a in audit_draws if repr(a) not in shown_or_scored][:AUDIT_TESTS]
    return Task(
        id=tid,
        domain="code",
        prompt=prompt,
        spec=CodeSpec(kind="function", entry_point=rendered.entry_point, prompt_code=prompt_code),
        metadata=TaskMetadata(family=template.family, difficulty=template.difficulty, split=split),
        visible_tests=visible,
        hidden_tests=hidden,
        reference_solution=fence(rendered.reference),
        wrong_solution=fence(rendered.wrong),
        audit_tests=_call_tests("audit", rendered.entry_point, ref, audit_args, tid),
    )
