"""DAPO overlong shaping and filtering (``execrl.rewards.overlong``) against hand-computed values."""

from __future__ import annotations

import pytest

from execrl.rewards.overlong import overlong_keep, overlong_penalties, overlong_penalty


def test_soft_punishment_by_hand() -> None:
    # Cap 100, buffer 20: free up to 80 tokens, then linear to -1 at 100 (DAPO eq. 13).
    got = overlong_penalties([0, 80, 81, 90, 100], max_new_tokens=100, buffer_tokens=20)
    assert got == pytest.approx([0.0, 0.0, -1 / 20, -10 / 20, -1.0])
    assert overlong_penalty(101, max_new_tokens=100, buffer_tokens=20) == -1.0
    assert overlong_penalty(90, max_new_tokens=100, buffer_tokens=20, penalty_factor=0.5) == pytest.approx(
        -0.25
    )


def test_buffer_zero_is_off_and_bad_values_raise() -> None:
    assert overlong_penalty(100, max_new_tokens=100, buffer_tokens=0) == 0.0
    with pytest.raises(ValueError, match="overlong_buffer_tokens"):
        overlong_penalty(10, max_new_tokens=16, buffer_tokens=32)
    with pytest.raises(ValueError, match="length >= 0"):
        overlong_penalty(-1, max_new_tokens=16, buffer_tokens=4)


def test_filtering_masks_only_truncated_completions() -> None:
    assert overlong_keep(["stop", "length", "eos", "length"]) == [True, False, True, False]
