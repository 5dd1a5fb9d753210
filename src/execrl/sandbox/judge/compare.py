"""Comparing what a program produced with what a test expected (runs in the parent, never in the jail).

Values (``CallTest``): floats and ints compare with ``math.isclose(rel_tol, abs_tol)``, lists and tuples
compare element-wise and equal each other (JSON has no tuples), dict keys must match exactly, ``bool``
only equals ``bool`` (``True == 1`` in Python, but a function returning 1 for a predicate is a wrong
answer), NaN equals NaN.

Outputs (``IOTest``): ``exact`` compares the text after normalising line endings and dropping trailing
newlines at the very end; ``whitespace`` compares the whitespace-separated tokens; ``float`` is like
``whitespace`` but tokens that both parse as numbers compare with the tolerances.
"""

from __future__ import annotations

import math
from typing import Any


def values_equal(got: Any, expected: Any, *, rel_tol: float, abs_tol: float) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(expected, bool) and got == expected
    if isinstance(expected, int | float) and isinstance(got, int | float):
        if isinstance(expected, int) and isinstance(got, int):
            return got == expected
        if math.isnan(expected) or math.isnan(got):
            return math.isnan(expected) and math.isnan(got)
        return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(expected, list | tuple) and isinstance(got, list | tuple):
        return len(got) == len(expected) and all(
            values_equal(g, e, rel_tol=rel_tol, abs_tol=abs_tol) for g, e in zip(got, expected, strict=True)
        )
    if isinstance(expected, dict) and isinstance(got, dict):
        return got.keys() == expected.keys() and all(
            values_equal(got[k], expected[k], rel_tol=rel_tol, abs_tol=abs_tol) for k in expected
        )
    return type(got) is type(expected) and bool(got == expected)


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _tokens_equal(got: str, expected: str, rel_tol: float, abs_tol: float) -> bool:
    if got == expected:
        return True
    g, e = _number(got), _number(expected)
    if g is None or e is None:
        return False
    if math.isnan(g) or math.isnan(e):
        return math.isnan(g) and math.isnan(e)
    return math.isclose(g, e, rel_tol=rel_tol, abs_tol=abs_tol)


def outputs_equal(
    got: str, expected: str, *, mode: str, rel_tol: float = 1e-6, abs_tol: float = 1e-9
) -> bool:
    if mode == "exact":
        return got.replace("\r\n", "\n").rstrip("\n") == expected.replace("\r\n", "\n").rstrip("\n")
    got_tokens, expected_tokens = got.split(), expected.split()
    if mode == "whitespace":
        return got_tokens == expected_tokens
    if mode == "float":
        return len(got_tokens) == len(expected_tokens) and all(
            _tokens_equal(g, e, rel_tol, abs_tol) for g, e in zip(got_tokens, expected_tokens, strict=True)
        )
    raise ValueError(f"unknown compare mode {mode!r}; use 'exact', 'whitespace' or 'float'")
