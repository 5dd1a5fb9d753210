"""Expected values of assert tests computed in the parent: literals plus constant arithmetic.

``asserts.plan`` needs the expected side of ``assert f(x) == E`` as a value the parent holds. Datasets
write ``E`` as more than a literal: ``2.0/3.0``, ``(3 + 5 + 7, 3 * 5 * 7)``, ``tuple([1, 2, 3])``,
``str(x)`` inside a ``for x in range(2, 8)`` loop (HumanEval 4, 8, 37, 44). ``fold`` evaluates exactly
such expressions without ``eval``: constants, containers, arithmetic and comparison operators, and a few
pure builtins (``FUNCTIONS``), each result bounded in size (``MAX_ITEMS``, ``MAX_POW``) so that a test
cannot make the parent compute something huge. Anything else is "not a constant" and the assert stays
in the sandbox. Names resolve only through ``names`` (a loop variable being unrolled).

Limits: a test that shadows a builtin (``def tuple(...)``) is folded with the real builtin.
"""

from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Callable
from typing import Any

MAX_ITEMS = 100_000
MAX_POW = 4096  # largest exponent folded (10 ** 4096 has 4097 digits)
MAX_UNROLL = 256  # loop iterations unrolled into probes
FUNCTIONS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (tuple, list, set, frozenset, str, int, float, bool, sorted, len, abs, min, max, sum, range)
}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}


class NotConstant(Exception):
    """The expression is not one ``fold`` evaluates."""


def _sized(value: Any) -> Any:
    if (
        isinstance(value, str | bytes | list | tuple | set | frozenset | dict | range)
        and len(value) > MAX_ITEMS
    ):
        raise NotConstant("too large")
    return value


def _binary(node: ast.BinOp, names: dict[str, Any]) -> Any:
    op = _BINARY.get(type(node.op))
    if op is None:
        raise NotConstant(type(node.op).__name__)
    left, right = _fold(node.left, names), _fold(node.right, names)
    if isinstance(node.op, ast.Pow) and (not isinstance(right, int | float) or abs(right) > MAX_POW):
        raise NotConstant("power too large")
    if isinstance(node.op, ast.Mult):
        for seq, count in ((left, right), (right, left)):
            if (
                isinstance(seq, str | list | tuple)
                and isinstance(count, int)
                and len(seq) * count > MAX_ITEMS
            ):
                raise NotConstant("too large")
    return op(left, right)


def _call(node: ast.Call, names: dict[str, Any]) -> Any:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
        raise NotConstant("call")
    args = [_fold(arg, names) for arg in node.args]
    return FUNCTIONS[node.func.id](*args)


def _fold(node: ast.expr, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = [_fold(item, names) for item in node.elts if not isinstance(item, ast.Starred)]
        if len(items) != len(node.elts):
            raise NotConstant("starred")
        kind: Callable[[list[Any]], Any] = {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)]
        return kind(items)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise NotConstant("** in a dict")
        return {_fold(k, names): _fold(v, names) for k, v in zip(node.keys, node.values, strict=True) if k}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_fold(node.operand, names))
    if isinstance(node, ast.BinOp):
        return _sized(_binary(node, names))
    if isinstance(node, ast.Call):
        return _sized(_call(node, names))
    raise NotConstant(type(node).__name__)


def fold(node: ast.expr, names: dict[str, Any] | None = None) -> tuple[bool, Any]:
    """``(True, value)`` if ``node`` is a constant expression (see the module docstring), else
    ``(False, None)``; never raises."""
    try:
        return True, _sized(_fold(node, names or {}))
    except (NotConstant, ArithmeticError, TypeError, ValueError, MemoryError, RecursionError):
        return False, None


class _Substitute(ast.NodeTransformer):
    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        self.value = value

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(self.value), node)
        return node


def unroll(loop: ast.For) -> list[ast.stmt] | None:
    """``for x in <constant range or list>: <asserts only>`` as the asserts with ``x`` replaced by each
    value (the loop variable must be a plain name and its values constants), or ``None``."""
    if loop.orelse or not isinstance(loop.target, ast.Name):
        return None
    if not all(isinstance(statement, ast.Assert) for statement in loop.body):
        return None
    ok, values = fold(loop.iter)
    if not ok or not isinstance(values, range | list | tuple) or len(values) > MAX_UNROLL:
        return None
    if not all(isinstance(v, int | float | str | bool) or v is None for v in values):
        return None
    out: list[ast.stmt] = []
    for value in values:
        for statement in loop.body:
            out.append(_Substitute(loop.target.id, value).visit(copy.deepcopy(statement)))
    return out
