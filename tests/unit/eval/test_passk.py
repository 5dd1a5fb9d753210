import math

import pytest

from execrl.eval.passk import TaskCounts, mean_pass_at_k, pass_at_k, pass_at_k_per_task


def test_pass_at_1_is_fraction_correct():
    # n=5, c=2, k=1: 1 - C(3,1)/C(5,1) = 1 - 3/5 = 0.4
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)


def test_pass_at_2_hand_computed():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)


def test_pass_at_5_of_10_hand_computed():
    # n=10, c=3, k=5: 1 - C(7,5)/C(10,5) = 1 - 21/252 = 11/12
    assert pass_at_k(10, 3, 5) == pytest.approx(11 / 12)


def test_all_correct_gives_one_and_none_correct_gives_zero():
    assert pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 5, 5) == 1.0
    assert pass_at_k(5, 0, 1) == 0.0
    assert pass_at_k(5, 0, 5) == 0.0


def test_every_subset_contains_a_correct_sample():
    # n - c = 3 < k = 4: any 4 of 5 samples include one of the 2 correct ones
    assert pass_at_k(5, 2, 4) == 1.0


def test_large_n_is_stable_where_binomials_overflow():
    # n=2000, c=1, k=1000: 1 - C(1999,1000)/C(2000,1000) = 1 - 1000/2000 = 0.5
    value = pass_at_k(2000, 1, 1000)
    assert math.isfinite(value)
    assert value == pytest.approx(0.5)


def test_k_larger_than_samples_raises_naming_k():
    with pytest.raises(ValueError, match="pass@6 needs at least k=6 samples"):
        pass_at_k(5, 1, 6)


def test_invalid_counts_raise():
    with pytest.raises(ValueError, match="correct must lie"):
        pass_at_k(5, 6, 1)
    with pytest.raises(ValueError, match="at least one sample"):
        pass_at_k(0, 0, 1)


def test_per_task_and_mean_accept_tuples_and_dataclasses():
    counts = [(5, 2), TaskCounts(samples=5, correct=0)]
    assert pass_at_k_per_task(counts, 1) == pytest.approx([0.4, 0.0])
    assert mean_pass_at_k(counts, 1) == pytest.approx(0.2)


def test_mean_over_no_tasks_raises():
    with pytest.raises(ValueError, match="empty"):
        mean_pass_at_k([], 1)
