import math

import pytest

from execrl.telemetry.alarms import AlarmRule
from execrl.telemetry.plots import panel_metrics, rolling_mean
from execrl.telemetry.records import MetricRow
from execrl.telemetry.report import compare_runs, summarize_metrics, validate_eval_results, write_report
from execrl.telemetry.run import RunTelemetry

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EVAL = {
    "suite": "toy",
    "n_tasks": 3,
    "confidence": 0.95,
    "models": {
        "base": {
            "pass@1": {"value": 0.25, "ci_low": 0.1, "ci_high": 0.4},
            "reward": {"value": 0.3, "ci_low": 0.2, "ci_high": 0.4},
        },
        "trained": {"pass@1": {"value": 0.5, "ci_low": 0.3, "ci_high": 0.7}},
    },
    "delta": {"pass@1": {"value": 0.25, "ci_low": 0.05, "ci_high": 0.45}},
}


def make_run(run_dir, steps=6):
    rules = [AlarmRule("nan", "nonfinite", "loss/*")]
    with RunTelemetry(run_dir, rules=rules, tensorboard=False) as tel:
        for step in range(steps):
            tel.log(
                step,
                {
                    "reward/mean": 0.1 * step,
                    "loss/total": math.nan if step == 2 else 1.0 - 0.1 * step,
                    "entropy/mean": 1.0,
                },
            )


def test_rolling_mean_skips_nonfinite():
    # window 2: [1], [1,3], (nan kept out) [1,3], [3,5]
    assert rolling_mean([1.0, 3.0, math.nan, 5.0], 2) == [1.0, 2.0, 2.0, 4.0]
    assert math.isnan(rolling_mean([math.nan], 3)[0])


def test_panel_assignment_puts_headline_first():
    panels = dict(
        (p.title, m)
        for p, m in panel_metrics(["reward/code/mean", "reward/mean", "loss/policy", "kl/ref_mean"])
    )
    assert panels["Reward"] == ["reward/mean", "reward/code/mean"]
    assert panels["KL divergence"] == ["kl/ref_mean"]
    assert "Sandbox" not in panels and panels["Entropy"] == []  # optional panels only when logged


def test_summary_final_best_by_direction():
    rows = [
        MetricRow(0, 0.0, {"reward/mean": 0.2, "loss/total": 2.0, "kl/ref_mean": 0.1}),
        MetricRow(1, 1.0, {"reward/mean": 0.6, "loss/total": math.nan, "kl/ref_mean": 0.3}),
        MetricRow(2, 2.0, {"reward/mean": 0.4, "loss/total": 1.0, "alarm/x": 1.0}),
    ]
    by_name = {s.name: s for s in summarize_metrics(rows)}
    assert (by_name["reward/mean"].final, by_name["reward/mean"].best, by_name["reward/mean"].best_step) == (
        0.4,
        0.6,
        1,
    )
    assert (by_name["loss/total"].best, by_name["loss/total"].best_step) == (
        1.0,
        2,
    )  # lower is better, NaN ignored
    assert by_name["kl/ref_mean"].best is None  # no direction for KL
    assert "alarm/x" not in by_name


def test_write_report_with_eval(tmp_path):
    make_run(tmp_path)
    md_path = write_report(tmp_path, EVAL)
    md = md_path.read_text()
    assert md_path == tmp_path / "report.md"
    assert "| pass@1 | 25.0% [10.0, 40.0] | 50.0% [30.0, 70.0] | +25.0 pp [+5.0, +45.0] |" in md
    assert "| reward | 0.3 [0.2, 0.4] | – | – |" in md
    assert "| 2 | nan | log | nan: loss/total = nan is not finite (step 2) |" in md
    assert "| reward/mean | 0.5 | 0.5 | 5 | 6 |" in md
    html = (tmp_path / "report.html").read_text()
    assert '<img src="plots/passk_toy.png"' in html and "<b>toy</b>" in html
    for name in ("passk_toy.png", "training_curves.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:8] == PNG_MAGIC


def test_write_report_per_suite_map_and_without_eval(tmp_path):
    make_run(tmp_path)
    write_report(tmp_path, {"a": EVAL, "b": {**EVAL, "delta": None}})
    assert (tmp_path / "plots" / "passk_a.png").exists() and (tmp_path / "plots" / "passk_b.png").exists()
    md = write_report(tmp_path, None).read_text()
    assert "Evaluation" not in md and "Training curves" in md


def test_a_run_with_an_engine_of_its_own_reports_sync_and_mismatch_per_step(tmp_path):
    """rollout.engine=vllm: the report shows each step's sync time and the engine-vs-trainer mismatch."""
    with RunTelemetry(tmp_path, rules=[], tensorboard=False) as tel:
        for step in range(2):
            tel.log(
                step,
                {"reward/mean": 0.1, "sync/s": 0.25 + step, "sync/verify_s": 0.125, "sync/bytes": 269e6,
                 "sync/probe_max_abs_diff": 0.2, "rollout/logprob_max_abs_diff": 0.45,
                 "rollout/logprob_mean_abs_diff": 0.025},
            )  # fmt: skip
    md = write_report(tmp_path, None).read_text()
    assert "## Weight sync and engine mismatch" in md
    assert "| 1 | 1.25 | 0.125 | 269 | 0.2 | 0.45 | 0.025 | – |" in md
    make_run(tmp_path / "hf")
    assert "Weight sync" not in write_report(tmp_path / "hf", None).read_text()


def test_bad_eval_results_name_the_path():
    bad = {"models": {"base": {"pass@1": {"value": 0.1, "ci_low": 0.0}}}}
    with pytest.raises(
        ValueError, match=r"eval_results\['models'\]\['base'\]\['pass@1'\] needs numbers for \['ci_high'\]"
    ):
        validate_eval_results(bad)
    with pytest.raises(ValueError, match=r"\['models'\] must map"):
        validate_eval_results({"models": {}})


def test_compare_runs(tmp_path):
    make_run(tmp_path / "a", steps=6)
    make_run(tmp_path / "b", steps=4)
    md = compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "cmp").read_text()
    assert "| reward/mean | 0.5 | 0.3 | 0.5 | 0.3 |" in md
    assert (tmp_path / "cmp" / "plots" / "compare_curves.png").read_bytes()[:8] == PNG_MAGIC
    assert (tmp_path / "cmp" / "compare.html").exists()
