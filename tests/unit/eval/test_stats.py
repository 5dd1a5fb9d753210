import pytest

from execrl.eval.stats import Estimate, bootstrap_ci, paired_bootstrap_diff, passk_comparison


def test_constant_values_give_a_zero_width_interval():
    assert bootstrap_ci([0.3, 0.3, 0.3], resamples=200) == pytest.approx((0.3, 0.3, 0.3))


def test_two_task_interval_matches_exact_bootstrap_distribution():
    # Resampling 2 tasks from {0, 1}: the mean is 0 w.p. 1/4, 0.5 w.p. 1/2, 1 w.p. 1/4.
    # 95%: the 2.5th percentile is 0 and the 97.5th is 1.
    est = bootstrap_ci([0.0, 1.0], resamples=20000, confidence=0.95, seed=1)
    assert est == pytest.approx((0.5, 0.0, 1.0))
    # 40%: the 30th and 70th percentiles both fall inside the 0.5 mass (0.25 .. 0.75).
    est40 = bootstrap_ci([0.0, 1.0], resamples=20000, confidence=0.4, seed=1)
    assert est40 == pytest.approx((0.5, 0.5, 0.5))


def test_interval_contains_mean_and_is_seeded():
    values = [0.0, 0.2, 0.9, 1.0, 0.4, 0.6, 0.1]
    a = bootstrap_ci(values, resamples=500, seed=7)
    b = bootstrap_ci(values, resamples=500, seed=7)
    assert a == b
    assert a.ci_low <= a.value <= a.ci_high
    assert a.value == pytest.approx(sum(values) / len(values))
    assert a.ci_low < a.ci_high


def test_estimate_unpacks_and_serialises():
    value, low, high = Estimate(0.5, 0.25, 0.75)
    assert (value, low, high) == (0.5, 0.25, 0.75)
    assert Estimate(0.5, 0.25, 0.75).as_dict() == {"value": 0.5, "ci_low": 0.25, "ci_high": 0.75}


def test_paired_difference_cancels_task_difficulty():
    # Task difficulty varies wildly, but "after" is exactly 0.1 higher on every task: every paired
    # resample has mean difference 0.1, so the interval collapses to the point.
    before = [0.0, 0.9, 0.2, 0.5]
    after = [0.1, 1.0, 0.3, 0.6]
    assert paired_bootstrap_diff(before, after, resamples=300) == pytest.approx((0.1, 0.1, 0.1))


def test_paired_difference_of_identical_models_is_zero():
    values = [0.2, 0.8, 0.5]
    assert paired_bootstrap_diff(values, values, resamples=100) == (0.0, 0.0, 0.0)


def test_paired_length_mismatch_raises():
    with pytest.raises(ValueError, match="one value per task"):
        paired_bootstrap_diff([0.1], [0.1, 0.2])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"resamples": 0}, "resamples"), ({"confidence": 1.0}, "confidence")],
)
def test_bad_bootstrap_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_ci([0.1, 0.2], **kwargs)


def test_empty_values_raise():
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])


def test_passk_comparison_structure_and_values():
    base = [(4, 0), (4, 2), (4, 4)]  # pass@1 per task: 0, 0.5, 1 -> mean 0.5
    trained = [(4, 1), (4, 3), (4, 4)]  # 0.25, 0.75, 1 -> mean 2/3
    out = passk_comparison(suite="toy", base=base, trained=trained, ks=(1, 2), resamples=200)
    assert out["suite"] == "toy" and out["n_tasks"] == 3
    assert out["models"]["base"]["pass@1"]["value"] == pytest.approx(0.5)
    assert out["models"]["trained"]["pass@1"]["value"] == pytest.approx(2 / 3)
    # pass@2 with n=4: c=2 -> 1 - C(2,2)/C(4,2) = 5/6; c=1 -> 1 - C(3,2)/C(4,2) = 0.5
    assert out["models"]["base"]["pass@2"]["value"] == pytest.approx((0 + 5 / 6 + 1) / 3)
    delta = out["delta"]["pass@1"]
    assert delta["value"] == pytest.approx(2 / 3 - 0.5)
    assert delta["ci_low"] <= delta["value"] <= delta["ci_high"]


def test_passk_comparison_rejects_mismatched_tasks():
    with pytest.raises(ValueError, match="same tasks"):
        passk_comparison(suite="toy", base=[(2, 1)], trained=[(2, 1), (2, 0)])
