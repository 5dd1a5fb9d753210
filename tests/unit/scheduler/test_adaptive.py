"""Adaptive scheduler: learnability, floor, per-task memory, determinism and checkpointed state."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from execrl.scheduler import (
    AdaptiveScheduler,
    AdaptiveSettings,
    GroupOutcome,
    StaticScheduler,
    build_scheduler,
    domain_metrics,
    tempered_weights,
)
from execrl.seeding import stream_seed


@dataclass(frozen=True)
class T:
    id: str


def _suites() -> dict[str, list[T]]:
    return {"a": [T(f"a{i}") for i in range(6)], "b": [T(f"b{i}") for i in range(4)]}


def _group(task_id: str, passed: list[int]) -> GroupOutcome:
    return GroupOutcome(task_id, tuple(float(p) for p in passed), tuple(bool(p) for p in passed))


def test_learnability_is_p_times_one_minus_p_and_zero_for_equal_rewards() -> None:
    assert _group("x", [1, 0, 1, 0]).learnability == 0.25
    assert _group("x", [1, 0, 0, 0]).learnability == 0.1875  # p = 1/4: 1/4 * 3/4
    assert _group("x", [1, 1, 1, 1]).learnability == 0.0
    assert _group("x", [0, 0, 0, 0]).learnability == 0.0
    partial = GroupOutcome("x", (0.5, 0.2, 0.5, 0.5), (False,) * 4)  # rewards differ, no pass: (G-1)/G^2
    assert partial.learnability == 3 / 16


def test_domain_weights_mix_the_floor_with_the_learnability_share() -> None:
    sched = AdaptiveScheduler(_suites(), {"a": 1.0, "b": 1.0}, settings=AdaptiveSettings(floor=0.2))
    assert sched.domain_weights() == {"a": 0.5, "b": 0.5}  # both unseen: optimistic 0.25 each
    sched.observe(0, [_group("b0", [1, 1, 1, 1])])  # b's only group was all-equal: score 0
    weights = sched.domain_weights()
    assert weights["a"] == pytest.approx(0.2 * 0.5 + 0.8 * 1.0)
    assert weights["b"] == pytest.approx(0.2 * 0.5)  # the floor: b is still drawn a tenth of the time


def test_domain_score_is_an_exponential_moving_average() -> None:
    sched = AdaptiveScheduler(_suites(), {"a": 1.0, "b": 1.0}, settings=AdaptiveSettings(domain_ema=0.5))
    sched.observe(0, [_group("a0", [1, 0, 1, 0])])  # first group: the score is its value, 0.25
    sched.observe(1, [_group("a1", [1, 1, 1, 1])])  # 0.5 * 0.25 + 0.5 * 0
    assert sched.domain_score["a"] == 0.125


def test_a_solved_task_is_drawn_rarely() -> None:
    suites = {"a": [T(f"a{i}") for i in range(4)]}
    sched = AdaptiveScheduler(suites, {"a": 1.0})
    sched.observe(0, [_group("a1", [1, 0, 1, 0]), _group("a2", [1, 0, 0, 1]), _group("a3", [0, 1, 1, 0])])
    sched.observe(0, [_group("a0", [1, 1, 1, 1])])  # a0 solved
    drawn = [t.id for step in range(1, 201) for t in sched.tasks_for_step(step, 1)]
    # weights: a0 0.01 (+ staleness <= 0.01), the others 0.25 each -> a0 about 1-2.6% of draws
    assert drawn.count("a0") < 10
    assert min(drawn.count(f"a{i}") for i in (1, 2, 3)) > 45


def test_draws_are_a_function_of_state_seed_step_and_round() -> None:
    one = AdaptiveScheduler(_suites(), {"a": 1.0, "b": 2.0}, seed=5)
    two = AdaptiveScheduler(_suites(), {"a": 1.0, "b": 2.0}, seed=5)
    assert one.tasks_for_step(3, 5) == two.tasks_for_step(3, 5)
    assert one.tasks_for_step(3, 5, 1) != one.tasks_for_step(3, 5, 0) or one.tasks_for_step(3, 5, 2) != (
        one.tasks_for_step(3, 5, 0)
    )
    # within a step a domain's tasks are distinct while it has enough of them
    ids = [t.id for t in one.tasks_for_step(0, 4)]
    assert len(set(ids)) == len(ids)


def test_state_round_trips_and_a_restored_scheduler_draws_the_same() -> None:
    """Guards the resume path: a scheduler rebuilt from ``state_dict`` must draw exactly what the original
    does (a lost or reset state would change every later step of a resumed run)."""
    first = AdaptiveScheduler(_suites(), {"a": 1.0, "b": 1.0}, seed=2)
    for step in range(6):
        tasks = first.tasks_for_step(step, 3)
        first.observe(
            step, [_group(t.id, [step % 2, 1, 0, 1] if t.id < "b" else [1, 1, 1, 1]) for t in tasks]
        )
    restored = AdaptiveScheduler(_suites(), {"a": 1.0, "b": 1.0}, seed=2)
    restored.load_state_dict(first.state_dict())
    assert restored.state_dict() == first.state_dict()
    assert [restored.tasks_for_step(s, 3) for s in range(6, 12)] == [
        first.tasks_for_step(s, 3) for s in range(6, 12)
    ]
    with pytest.raises(ValueError, match="kind 'static'"):
        restored.load_state_dict({"kind": "static"})


def test_task_ids_must_be_unique_across_suites() -> None:
    with pytest.raises(ValueError, match="'x1' appears in suite"):
        AdaptiveScheduler({"a": [T("x1")], "b": [T("x1")]}, {"a": 1.0, "b": 1.0})


def test_observing_an_unknown_task_raises() -> None:
    sched = AdaptiveScheduler(_suites(), {"a": 1.0, "b": 1.0})
    with pytest.raises(ValueError, match="'zz' is in none"):
        sched.observe(0, [_group("zz", [1, 0])])


def test_size_temperature_scales_weights_by_size() -> None:
    suites = {"a": [T(f"a{i}") for i in range(16)], "b": [T("b0"), T("b1"), T("b2"), T("b3")]}
    assert tempered_weights(suites, {"a": 1.0, "b": 1.0}, 2.0) == {"a": 4.0, "b": 2.0}  # sqrt of sizes
    assert tempered_weights(suites, {"a": 1.0, "b": 3.0}, 0.0) == {"a": 1.0, "b": 3.0}


def test_static_scheduler_keeps_the_mixture_draws_and_bounds_rounds() -> None:
    sched = build_scheduler("static", _suites(), {"a": 1.0, "b": 1.0}, seed=1, rounds_per_step=2)
    assert isinstance(sched, StaticScheduler)
    assert sched.tasks_for_step(4, 3) == sched.tasks_for_step(4, 3)
    sched.tasks_for_step(4, 3, 1)
    with pytest.raises(ValueError, match="past the bound"):
        sched.tasks_for_step(4, 3, 2)


def test_domain_metrics_hand_computed() -> None:
    outcomes = [
        ("a", _group("a0", [1, 0, 1, 0])),
        ("a", _group("a1", [1, 1, 1, 1])),
        ("b", _group("b0", [0, 0])),
    ]
    m = domain_metrics(outcomes, {"a": 0.7, "b": 0.3})
    assert m["domain/a/pass_rate"] == 6 / 8 and m["domain/a/zero_variance_share"] == 0.5
    assert m["domain/a/samples"] == 8.0 and m["domain/b/samples"] == 2.0 and m["domain/b/pass_rate"] == 0.0
    assert m["domain/a/weight"] == 0.7 and m["rollout/zero_variance_share"] == 2 / 3


def test_rollout_seeds_of_step_and_round_do_not_collide() -> None:
    """Guards the old ``seed*1_000_003 + step*101 + round`` formula: step 0 round 101 equalled step 1
    round 0, so a long resampling step replayed the next step's samples."""
    seeds = {stream_seed(0, "rollout", step, round_) for step in range(50) for round_ in range(102)}
    assert len(seeds) == 50 * 102
    assert stream_seed(0, "rollout", 3, 1) == stream_seed(0, "rollout", 3, 1)
    assert stream_seed(0, "rollout", 3, 1) != stream_seed(0, "scheduler", 3, 1)
    assert stream_seed(-1, "rollout", 0, 0) >= 0


def test_metric_labels_are_safe_and_distinct() -> None:
    from execrl.scheduler.outcomes import metric_labels

    labels = metric_labels(["functions", "/data/x/math.jsonl", "/other/math.jsonl", "a b"])
    assert labels["functions"] == "functions" and labels["a b"] == "a_b"
    assert sorted([labels["/data/x/math.jsonl"], labels["/other/math.jsonl"]]) == ["math", "math-2"]


def test_max_resample_rounds_is_bounded() -> None:
    from execrl.config import ConfigError, load_config

    assert load_config(None, ["algorithm.max_resample_rounds=100"]).algorithm.max_resample_rounds == 100
    with pytest.raises(ConfigError, match="max_resample_rounds"):
        load_config(None, ["algorithm.max_resample_rounds=101"])


def test_domain_report_sums_samples_and_weights_over_steps(tmp_path) -> None:
    from execrl.scheduler.report import summarize_domains, write_domain_report
    from execrl.telemetry.records import MetricRow, encode_line

    rows = [
        MetricRow(0, 0.0, {"domain/a/samples": 8.0, "domain/a/pass_rate": 0.5, "domain/a/zero_variance_share": 0.0,
                           "domain/a/weight": 0.6, "domain/b/weight": 0.4}),
        MetricRow(1, 1.0, {"domain/a/samples": 4.0, "domain/a/pass_rate": 1.0, "domain/a/zero_variance_share": 1.0,
                           "domain/a/weight": 0.7, "domain/b/weight": 0.3}),
    ]  # fmt: skip
    a, b = summarize_domains(rows)
    assert (a.label, a.samples, a.pass_rate, a.zero_variance_share) == ("a", 12.0, 8 / 12, 0.5)
    assert (a.first_weight, a.last_weight, b.last_weight, b.samples) == (0.6, 0.7, 0.3, 0.0)
    (tmp_path / "metrics.jsonl").write_text(
        "".join(encode_line(r.step, r.time_s, r.metrics) + "\n" for r in rows)
    )
    text = write_domain_report(tmp_path).read_text()
    assert "| a | 12 | 0.667 | 0.500 | 0.600 -> 0.700 |" in text
    assert (tmp_path / "plots" / "domain_weights.png").stat().st_size > 0
