"""Comparison modes and truncation: pure functions, hand-computed expectations."""

from __future__ import annotations

import pytest

from execrl.sandbox.judge.compare import outputs_equal, values_equal
from execrl.sandbox.types import TRUNCATION_MARKER, truncate


def eq(got: object, expected: object) -> bool:
    return values_equal(got, expected, rel_tol=1e-6, abs_tol=1e-9)


def test_values_tuple_equals_list_recursively() -> None:
    assert eq([1, [2, 3]], (1, (2, 3)))
    assert not eq([1, 2], [1, 2, 3])


def test_values_float_tolerance() -> None:
    assert eq(0.1 + 0.2, 0.3)
    assert eq(1.0000001, 1.0)  # rel diff 1e-7 < 1e-6
    assert not eq(1.00001, 1.0)  # rel diff 1e-5
    assert eq(3, 3.0)
    assert eq(float("nan"), float("nan"))


def test_values_bool_is_not_int() -> None:
    assert not eq(1, True)
    assert not eq(True, 1)
    assert eq(False, False)


def test_values_dicts_and_strings() -> None:
    assert eq({"a": [1.0]}, {"a": [1]})
    assert not eq({"a": 1}, {"a": 1, "b": 2})
    assert not eq("1", 1)
    assert eq(None, None)


def test_output_exact_mode() -> None:
    assert outputs_equal("1 2\r\n", "1 2", mode="exact")
    assert not outputs_equal("1  2\n", "1 2\n", mode="exact")


def test_output_whitespace_mode() -> None:
    assert outputs_equal(" 1\n2 \n\n", "1 2", mode="whitespace")
    assert not outputs_equal("1 2 3", "1 2", mode="whitespace")


def test_output_float_mode() -> None:
    assert outputs_equal("0.3333333\nabc", "0.33333333 abc", mode="float", rel_tol=1e-6)
    assert not outputs_equal("0.34", "0.33", mode="float")
    assert not outputs_equal("abc", "abd", mode="float")


def test_output_unknown_mode_names_the_choices() -> None:
    with pytest.raises(ValueError, match="'exact', 'whitespace' or 'float'"):
        outputs_equal("a", "a", mode="fuzzy")


def test_truncate_counts_cut_bytes() -> None:
    text, cut = truncate("abcdef", 4)
    assert cut
    assert text == "abcd" + TRUNCATION_MARKER.format(n=2)
    assert truncate("abc", 4) == ("abc", False)
    # A multi-byte character cut in half is dropped, never half-decoded.
    text, _ = truncate("ééé", 3)  # 6 bytes, keep 3 -> one full "é" (2 bytes)
    assert text.startswith("é") and not text.startswith("éé")
