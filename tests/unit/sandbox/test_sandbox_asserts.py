"""Assert rewriting (``execrl.sandbox.judge.asserts``): which shapes become probes, and how probes are judged.

Guards against issue 9's class 3 (assert tests forged from inside the sandbox) and against the rewrite
changing what a test means (Python's ``==``, tuple vs list, tolerances, ``assert not``).
"""

from __future__ import annotations

import json

from execrl.sandbox.judge import asserts
from execrl.sandbox.zygote.child import encode_value


def test_common_shapes_become_probes_without_their_expected_values() -> None:
    code = (
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    assert 5 == candidate(2)\n"
        "    assert abs(candidate(3) - 2.0/3.0) < 1e-6\n"
        "    assert math.isclose(candidate(4), 0.125, rel_tol=1e-3)\n"
        "    assert candidate(5)\n"
        "    assert not candidate(6)\n"
        "    assert candidate(7) is None\n"
        "    assert candidate(8) == (3 + 5, 3 * 5), 'sum and product'\n"
        "    assert True, 'cannot fail'\n"
        "    for x in range(2, 4):\n"
        "        assert candidate(x, x + 1) == str(x)\n"
        "check(f)\n"
    )
    plan = asserts.plan(code)
    assert plan.form == "judged" and plan.residual == 0
    kinds = [(e.kind, e.expected) for e in plan.expectations]
    assert kinds == [
        ("compare", 2),
        ("compare", 5),
        ("abs", 2.0 / 3.0),
        ("isclose", 0.125),
        ("truthy", None),
        ("falsy", None),
        ("compare", None),
        ("compare", (8, 15)),
        ("compare", "2"),
        ("compare", "3"),
    ]
    assert plan.expectations[7].message == "sum and product"
    for secret in ("0.125", "(8, 15)", "sum and product", "'2'", "'3'", "1e-06", "is None"):
        assert secret not in plan.code, secret
    assert plan.code.count(asserts.PROBE) == 10


def test_other_shapes_stay_in_the_sandbox_and_are_counted() -> None:
    loop = "import random\nfor _ in range(3):\n    x = random.random()\n    assert f(x) == x\n"
    assert asserts.plan(loop).form == "in_sandbox"
    mixed = "assert f(1) == 2\nassert f(2) == f(3)\n"
    plan = asserts.plan(mixed)
    assert (plan.form, len(plan.expectations), plan.residual) == ("mixed", 1, 1)
    twice = "def check(c):\n    assert c(1) == 2\ncheck(f)\ncheck(f)\n"  # probes would run twice
    assert asserts.plan(twice).form == "in_sandbox"
    assert asserts.plan("def broken(:\n").form == "in_sandbox"


def test_probes_judge_with_pythons_semantics() -> None:
    def judged(code: str, value: object) -> bool:
        (expectation,) = asserts.plan(code).expectations
        values = asserts.decode_values(json.dumps([encode_value(value)]), 1)
        assert values is not None
        return asserts.check(expectation, values[0])

    assert judged("assert f() == (0, 1)", (0, 1)) and not judged("assert f() == (0, 1)", [0, 1])
    assert judged("assert f() == True", 1) and not judged("assert f() is True", 1)
    assert judged("assert f() == {1: 'a'}", {1: "a"}) and not judged("assert f() == {1: 'a'}", {"1": "a"})
    assert judged("assert f() == {1, 2}", {2, 1}) and not judged("assert f() == {1, 2}", [1, 2])
    assert judged("assert abs(f() - 0.5) < 1e-6", 0.5000001) and not judged(
        "assert abs(f() - 0.5) < 1e-6", "x"
    )
    assert not judged("assert f() == 3.0", 3.0000001)  # == stays exact
    assert judged("assert not f()", []) and not judged("assert f()", [])
    assert not judged("assert f() == float('nan')", float("nan"))  # nan != nan, as in Python
    assert not judged("assert f() == 1", object())  # unserializable is equal to nothing


def test_malformed_probe_values_are_rejected_without_raising() -> None:
    for text in ("", "[", "{}", "[1, 2]", '[{"t": 1}]', '[{"zz": []}]', '[{"d": [[[1], 2]]}]', "[" * 5000):
        assert asserts.decode_values(text, 1) is None, text[:20]
    assert asserts.decode_values('[{"d": [[1, {"t": [2]}]]}]', 1) == [{1: (2,)}]


def test_hostile_test_code_never_raises_in_the_parent() -> None:
    """Test code nested past ``ast``'s recursion limits (a 20,000-term sum) runs unrewritten instead of
    raising ``RecursionError`` while the request is being built."""
    chain = "+".join(["1"] * 20_000)
    for code in (f"assert f(1) == 2\nx = {chain}\n", f"assert f(1) == {chain}\n", "(" * 300 + ")" * 300):
        plan = asserts.plan(code)
        assert plan.form == "in_sandbox" and plan.code == code


def test_values_keep_their_python_equality_across_the_boundary() -> None:
    """Honest answers of other types than the literal still pass when Python's ``==`` says so: a
    ``Counter`` equals a dict, a named tuple a tuple, bytes and complex numbers cross; a lone object
    cannot."""
    from collections import Counter, namedtuple

    point = namedtuple("point", "x y")
    cases = [
        (Counter("aab"), {"a": 2, "b": 1}, True),
        (point(1, 2), (1, 2), True),
        (b"\x00\xff", b"\x00\xff", True),
        (bytearray(b"ab"), b"ab", True),
        (1 + 2j, 1 + 2j, True),
        ([1, (2, frozenset({3}))], [1, (2, frozenset({3}))], True),
        (object(), None, False),
    ]
    for value, expected, equal in cases:
        values = asserts.decode_values(json.dumps([encode_value(value)]), 1)
        assert values is not None and (values[0] == expected) is equal, value
