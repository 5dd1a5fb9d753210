"""Plausible wrong programs by mutating one site of a correct one (mutation testing, DeMillo et al. 1978).

A task's ``wrong_solution`` exists to prove the verifier can tell right from wrong, so it should look like
a real model mistake: a flipped comparison, an off-by-one, a swapped operator, not ``return None``. Sites
are numbered in source order inside one function; ``mutants(source, fn)`` yields them lazily so a caller
can take the first that its tests kill.

Limit: a mutant can be *equivalent* (behave exactly like the original), e.g. ``<`` vs ``<=`` where the
values are never equal. Nothing here can know that without running tests; suites that ship a fixed
mutant choose it by index after checking it against their hidden tests (``execrl tasks check``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

_COMPARE_SWAP: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAP: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}


def _is_site(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        return type(node.ops[0]) in _COMPARE_SWAP
    if isinstance(node, ast.BinOp | ast.AugAssign):
        return type(node.op) in _BINOP_SWAP
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    return isinstance(node, ast.BoolOp)


def _sites(function: ast.AST) -> list[ast.AST]:
    """Mutation sites in source (depth-first) order, the docstring excluded."""
    out: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        if _is_site(node):
            out.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    body = getattr(function, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    for statement in body:
        visit(statement)
    return out


def _apply(node: ast.AST) -> None:
    if isinstance(node, ast.Compare):
        node.ops[0] = _COMPARE_SWAP[type(node.ops[0])]()
    elif isinstance(node, ast.BinOp | ast.AugAssign):
        node.op = _BINOP_SWAP[type(node.op)]()
    elif isinstance(node, ast.Constant) and isinstance(node.value, int):
        node.value = node.value + 1
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()


def _find_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def count_sites(source: str, function_name: str) -> int:
    """How many single-site mutants ``mutant`` can make of ``function_name`` in ``source``."""
    function = _find_function(ast.parse(source), function_name)
    return len(_sites(function)) if function is not None else 0


def mutant(source: str, function_name: str, index: int = 0) -> str:
    """``source`` with mutation site ``index`` of ``function_name`` changed, as unparsed source.

    With no sites at all (a one-line delegation) the function's first ``return X`` becomes
    ``return None``, the last resort that is still a syntactically valid, plausible-looking bug.
    """
    tree = ast.parse(source)
    function = _find_function(tree, function_name)
    if function is None:
        raise ValueError(f"no function {function_name!r} in the source to mutate")
    sites = _sites(function)
    if sites:
        _apply(sites[index % len(sites)])
        return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    for node in ast.walk(function):
        if isinstance(node, ast.Return):
            node.value = ast.Constant(value=None)
            return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    raise ValueError(f"function {function_name!r} has nothing to mutate")


def mutants(source: str, function_name: str) -> Iterator[str]:
    """Every single-site mutant of ``function_name``, in site order (each from a fresh copy)."""
    for index in range(max(count_sites(source, function_name), 1)):
        yield mutant(source, function_name, index)
