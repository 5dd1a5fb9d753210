"""Assert-style tests judged by the parent: the common ``assert`` shapes become probes (issue 9, class 3).

Why: a ``CodeTest`` runs its asserts inside the candidate's process, so a wrong program written against
the harness could report them as passed (write the harness's ``ok`` record itself, or return objects
whose ``__eq__`` lies). HumanEval, MBPP and the repository suite are written in that style, so that
reward hack reached training and evaluation.

What changes: before the job goes to the sandbox, the parent parses the test (``ast``) and replaces each
recognised assert by ``__execrl_probe__(X)``, where ``X`` is the expression whose value the assert
checks; the expected value, the comparison and the tolerance stay in the parent (``Expectation``). The
sandbox reports the probed values (``child.encode_value``: JSON with tuples, sets and dicts tagged, so
``(1, 2)`` and ``[1, 2]`` stay different as in Python); the parent decodes them with bounds and judges
each with Python's own ``==``/``is``/``in``, ``abs(x - y) < tol`` or ``math.isclose``. Every probe looks
the same in the sandbox, so the candidate cannot even tell ``assert f(x)`` from ``assert not f(x)``.

Recognised, at the top level of the test module and at the top level of a function the module calls
exactly once (HumanEval's ``def check(candidate)`` + ``check(f)``; a repository test function):
``assert X == L`` / ``!=`` / ``is`` / ``is not`` / ``in`` / ``not in`` (either side ``L``), ``assert
abs(X - L) < T`` / ``<=`` (and ``math.fabs``, either order), ``assert math.isclose(X, L, rel_tol=T,
abs_tol=T)``, ``assert X`` and ``assert not X`` for a call ``X``; ``assert A and B`` as ``assert A`` + ``assert B``;
``for v in <constant>:`` loops of such asserts, unrolled. ``L`` and ``T`` are constants folded by the
parent (``literals.fold``: literals, arithmetic, ``tuple([...])``...), ``X`` anything else.
``assert <true constant>`` is dropped (it cannot fail).

Limits, stated plainly:
* The rest (asserts in loops or branches, comparisons of two computed values, helper functions that
  raise) still runs in the sandbox and is reported by it: that part of a test remains forgeable by a
  program written against the harness. ``AssertPlan.form`` says which tests are fully judged.
* A probe's expression runs in the sandbox, so a test helper around the candidate's result
  (``assert len(f(x)) == 3``) can be influenced by the object the candidate returns; it still never sees
  the expected value.
* A failed probe no longer stops the test: later probes still run (the sandbox does not know it failed),
  so a wrong program may end in ``time_limit`` where the original assert stopped at ``wrong_answer``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from execrl.sandbox.judge import literals
from execrl.sandbox.zygote import records
from execrl.sandbox.zygote.child import PROBE

Form = Literal["judged", "mixed", "in_sandbox"]
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda got, expected: got in expected,
    ast.NotIn: lambda got, expected: got not in expected,
}
_SYMBOLS = {"Eq": "==", "NotEq": "!=", "Is": "is", "IsNot": "is not", "In": "in", "NotIn": "not in"}
_SWAPPED = {ast.Eq: ast.Eq, ast.NotEq: ast.NotEq, ast.Is: ast.Is, ast.IsNot: ast.IsNot}
_BELOW = {ast.Lt: "lt", ast.LtE: "le"}
_ABOVE = {ast.Gt: "lt", ast.GtE: "le"}


@dataclass(frozen=True)
class Expectation:
    """What one probed value must satisfy; judged by the parent only (``check``)."""

    kind: Literal["compare", "truthy", "falsy", "abs", "isclose"]
    source: str  # the probed expression, for messages
    expected: Any = None
    op: str = "Eq"  # compare: the ast operator's name; abs: "lt" or "le"
    tol: float = 0.0
    rel_tol: float = 1e-9
    abs_tol: float = 0.0
    message: str | None = None  # the assert's own message when it is a constant

    def describe(self) -> str:
        if self.kind == "compare":
            return f"{_SYMBOLS[self.op]} {self.expected!r}"
        if self.kind in ("truthy", "falsy"):
            return self.kind
        if self.kind == "abs":
            return f"within {self.tol!r} of {self.expected!r}"
        return f"isclose to {self.expected!r} (rel_tol={self.rel_tol}, abs_tol={self.abs_tol})"


@dataclass(frozen=True)
class AssertPlan:
    """A ``CodeTest`` split: ``code`` runs in the sandbox, ``expectations`` stay with the parent.

    ``residual``: assert/raise statements left in ``code`` (judged inside the sandbox, hence forgeable).
    """

    code: str
    expectations: tuple[Expectation, ...] = ()
    residual: int = 0

    @property
    def form(self) -> Form:
        if not self.expectations:
            return "in_sandbox"
        return "judged" if self.residual == 0 else "mixed"


def _literal(node: ast.expr) -> tuple[bool, Any]:
    return literals.fold(node)


def _number(node: ast.expr) -> float | None:
    ok, value = _literal(node)
    ok = ok and isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else None


def _is_call(node: ast.expr, names: tuple[str, ...]) -> bool:
    """``name(...)`` or ``module.name(...)`` for one of ``names``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in names
    return isinstance(func, ast.Attribute) and func.attr in names and isinstance(func.value, ast.Name)


def _abs_shape(node: ast.expr) -> tuple[ast.expr, Any] | None:
    """``abs(X - L)`` or ``abs(L - X)`` -> (X, L)."""
    if not isinstance(node, ast.Call) or not _is_call(node, ("abs", "fabs")) or node.keywords:
        return None
    if len(node.args) != 1:
        return None
    inner = node.args[0]
    if not isinstance(inner, ast.BinOp) or not isinstance(inner.op, ast.Sub):
        return None
    for probed, other in ((inner.left, inner.right), (inner.right, inner.left)):
        ok, value = _literal(other)
        if ok and not _literal(probed)[0] and isinstance(value, int | float):
            return probed, value
    return None


def _compare(test: ast.Compare) -> tuple[ast.expr, Expectation] | None:
    if len(test.ops) != 1:
        return None
    op, left, right = test.ops[0], test.left, test.comparators[0]
    kind = type(op)
    if kind in _BELOW or kind in _ABOVE:
        shape, bound = (left, right) if kind in _BELOW else (right, left)
        abs_shape, tol = _abs_shape(shape), _number(bound)
        if abs_shape is None or tol is None:
            return None
        way = _BELOW.get(kind) or _ABOVE[kind]
        probed, value = abs_shape
        return probed, Expectation("abs", ast.unparse(probed), value, op=way, tol=tol)
    if kind not in _COMPARE:
        return None
    sides = [(left, right)] + ([(right, left)] if kind in _SWAPPED else [])
    for probed, other in sides:
        ok, value = _literal(other)
        if ok and not _literal(probed)[0]:
            if kind in (ast.Is, ast.IsNot) and value not in (None, True, False):
                return None
            return probed, Expectation("compare", ast.unparse(probed), value, op=kind.__name__)
    return None


def _isclose(test: ast.Call) -> tuple[ast.expr, Expectation] | None:
    if len(test.args) != 2:
        return None
    tols = {"rel_tol": 1e-9, "abs_tol": 0.0}
    for keyword in test.keywords:
        value = _number(keyword.value)
        if keyword.arg not in tols or value is None:
            return None
        tols[keyword.arg] = value
    for probed, other in ((test.args[0], test.args[1]), (test.args[1], test.args[0])):
        ok, value = _literal(other)
        if ok and not _literal(probed)[0] and isinstance(value, int | float):
            source = ast.unparse(probed)
            return probed, Expectation(
                "isclose", source, value, rel_tol=tols["rel_tol"], abs_tol=tols["abs_tol"]
            )
    return None


def recognise(test: ast.expr) -> tuple[ast.expr, Expectation] | None:
    """The probed expression and its expectation for an assert's test, or ``None`` (left as it is)."""
    if isinstance(test, ast.Compare):
        return _compare(test)
    if _is_call(test, ("isclose",)):
        assert isinstance(test, ast.Call)
        return _isclose(test)
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    probed = test.operand if isinstance(test, ast.UnaryOp) and negated else test
    if isinstance(probed, ast.Call) and isinstance(probed.func, ast.Name | ast.Attribute):
        return probed, Expectation("falsy" if negated else "truthy", ast.unparse(probed))
    return None


class _Rewriter:
    def __init__(self) -> None:
        self.expectations: list[Expectation] = []

    def body(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in statements:
            unrolled = literals.unroll(statement) if isinstance(statement, ast.For) else None
            if unrolled is not None and all(_judgeable(s) for s in unrolled):
                out.extend(self.body(unrolled))
                continue
            parts = _split_and(statement)
            if len(parts) > 1 and all(_judgeable(s) for s in parts):
                out.extend(self.body(parts))
                continue
            if not isinstance(statement, ast.Assert):
                out.append(statement)
                continue
            ok, value = _literal(statement.test)
            if ok and value:
                continue  # ``assert True, "..."``: cannot fail
            found = recognise(statement.test)
            if found is None:
                out.append(statement)
                continue
            probed, expectation = found
            if statement.msg is not None:
                ok, message = _literal(statement.msg)
                if ok and isinstance(message, str):
                    expectation = dataclasses.replace(expectation, message=message)
            self.expectations.append(expectation)
            call = ast.Call(ast.Name(PROBE, ast.Load()), [probed], [])
            out.append(ast.copy_location(ast.Expr(call), statement))
        return out


def _split_and(statement: ast.stmt) -> list[ast.stmt]:
    """``assert a and b`` as ``assert a`` then ``assert b`` (each may then become a probe)."""
    if not isinstance(statement, ast.Assert) or not isinstance(statement.test, ast.BoolOp):
        return [statement]
    if not isinstance(statement.test.op, ast.And):
        return [statement]
    parts = [
        ast.copy_location(ast.Assert(value, statement.msg), statement) for value in statement.test.values
    ]
    return [piece for part in parts for piece in _split_and(part)]


def _judgeable(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.Assert):
        return False
    ok, value = _literal(statement.test)
    return bool(ok and value) or recognise(statement.test) is not None


def _called_once(module: ast.Module) -> set[str]:
    """Top-level functions called exactly once, by a top-level ``name(...)`` statement, and named nowhere
    else (so each of their top-level statements runs at most once, in order)."""
    defined = {
        node.name: node
        for node in module.body
        if isinstance(node, ast.FunctionDef) and not node.decorator_list
    }
    loads: dict[str, int] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Name) and node.id in defined:
            loads[node.id] = loads.get(node.id, 0) + 1
    called = [
        node.value.func.id
        for node in module.body
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id in defined
    ]
    generators = {
        name
        for name, node in defined.items()
        if any(isinstance(n, ast.Yield | ast.YieldFrom | ast.Global | ast.Nonlocal) for n in ast.walk(node))
    }
    return {name for name in set(called) if called.count(name) == 1 and loads[name] == 1} - generators


CACHED_CODE_CHARS = 1 << 16  # longer test code is planned afresh each time (bounds the cache's memory)


def plan(code: str) -> AssertPlan:
    """The sandbox's code and the parent's expectations for one ``CodeTest`` (cached: the same test code
    is sent with every sample of a task)."""
    return _cached_plan(code) if len(code) <= CACHED_CODE_CHARS else _plan(code)


@functools.lru_cache(maxsize=4096)
def _cached_plan(code: str) -> AssertPlan:
    return _plan(code)


def _plan(code: str) -> AssertPlan:
    """Test code the rewrite cannot handle (not Python, or nested past the recursion limit of ``ast``'s
    own helpers) runs as it is: the sandbox reports its ``SyntaxError``, or judges it as before."""
    try:
        module = ast.parse(code)
        rewriter = _Rewriter()
        once = _called_once(module)
        for node in module.body:
            if isinstance(node, ast.FunctionDef) and node.name in once:
                node.body = rewriter.body(node.body) or [ast.Pass()]
        module.body = rewriter.body(module.body)
        residual = sum(isinstance(n, ast.Assert | ast.Raise) for n in ast.walk(module))
        if not rewriter.expectations:
            return AssertPlan(code, residual=residual)
        rewritten = ast.unparse(ast.fix_missing_locations(module))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return AssertPlan(code, residual=1)
    return AssertPlan(rewritten, tuple(rewriter.expectations), residual)


class Unserializable:
    """A probed value the sandbox could not encode; equal to nothing, fails every expectation."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} object: not a plain value>"


def _real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def decode_value(value: Any) -> Any:
    """A value in ``child.encode_value``'s tagged JSON as Python data; ``ValueError`` if malformed.

    Recursion is bounded by the caller's depth check (``records.loads``)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError("not a tagged value")
    ((tag, body),) = value.items()
    if tag == "u" and isinstance(body, str):
        return Unserializable(body)
    if tag == "b" and isinstance(body, str):
        try:
            return body.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError("bytes out of range") from None
    if tag == "c" and isinstance(body, list) and len(body) == 2 and all(_real(part) for part in body):
        return complex(body[0], body[1])
    if not isinstance(body, list):
        raise ValueError(f"tag {tag!r} needs a list")
    items = [decode_value(item) for item in body]
    try:
        if tag == "t":
            return tuple(items)
        if tag == "s":
            return set(items)
        if tag == "f":
            return frozenset(items)
        if tag == "d" and all(isinstance(pair, list) and len(pair) == 2 for pair in items):
            return {key: item for key, item in items}
    except TypeError as exc:  # an unhashable element or key
        raise ValueError(str(exc)) from None
    raise ValueError(f"unknown tag {tag!r}")


def decode_values(text: str, count: int) -> list[Any] | None:
    """``count`` probed values from their JSON text, or ``None`` for anything else (never raises)."""
    ok, raw = records.loads(text)
    if not ok or not isinstance(raw, list) or len(raw) != count:
        return None
    try:
        return [decode_value(item) for item in raw]
    except ValueError:
        return None


def check(expectation: Expectation, got: Any) -> bool:
    """Whether ``got`` (plain decoded data, no candidate objects) meets ``expectation``; never raises on
    such data (mismatched types are a failed check)."""
    if isinstance(got, Unserializable):
        return False
    expected = expectation.expected
    try:
        if expectation.kind == "compare":
            op = {cls.__name__: fn for cls, fn in _COMPARE.items()}[expectation.op]
            return bool(op(got, expected))
        if expectation.kind in ("truthy", "falsy"):
            return bool(got) is (expectation.kind == "truthy")
        if not isinstance(got, int | float):
            return False
        if expectation.kind == "abs":
            distance = abs(got - expected)
            return bool(distance < expectation.tol if expectation.op == "lt" else distance <= expectation.tol)
        return math.isclose(got, float(expected), rel_tol=expectation.rel_tol, abs_tol=expectation.abs_tol)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return False
