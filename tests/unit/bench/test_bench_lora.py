"""``execrl bench lora``'s verdicts from its sides' figures: the ratio, the memory goal, the loss check."""

from __future__ import annotations

import argparse

from execrl.bench import lora as bench_lora


def _side(step_s: float, rss_mb: float, loss_ok: bool | None = None) -> dict[str, object]:
    side: dict[str, object] = {"step_s": step_s, "peak_rss_mb": rss_mb, "trainable_params": 1,
                               "timing": {"generated_tokens_per_timed_step": 8.0}}  # fmt: skip
    if loss_ok is not None:
        side["loss_checks"] = [{"loss_type": "dapo", "loss_trl": 0.5, "loss_execrl": 0.5 if loss_ok else 0.6,
                                "loss_abs_diff": 0.0 if loss_ok else 0.1, "ok": loss_ok, "grad_norm_trl": 1.0,
                                "grad_norm_execrl": 1.0, "logprob_max_abs_diff": 0.0}]  # fmt: skip
    return side


def test_sides_are_full_then_execrl_then_trl_at_each_rank() -> None:
    assert bench_lora.side_names([16, 64]) == [
        "execrl-full", "execrl-lora-16", "execrl-lora-64", "trl-peft-16", "trl-peft-64"
    ]  # fmt: skip


def test_report_states_each_goal_and_the_loss_agreement() -> None:
    parser = argparse.ArgumentParser()
    bench_lora.add_arguments(parser)
    args = parser.parse_args(["--ranks", "16", "64"])
    sides = {
        "execrl-full": _side(10.0, 3000.0),
        "execrl-lora-16": _side(4.0, 1700.0),
        "execrl-lora-64": _side(5.0, 3100.0),
        "trl-peft-16": _side(12.0, 2700.0, loss_ok=True),
        "trl-peft-64": _side(6.0, 2800.0, loss_ok=False),
    }
    report = bench_lora._report(args, sides)
    r16, r64 = report["by_rank"]["16"], report["by_rank"]["64"]
    assert r16["ratio_vs_trl_peft"] == 3.0 and r16["goal_2x_trl_peft"] and r16["goal_peak_rss_below_full"]
    assert r64["ratio_vs_trl_peft"] == 1.2 and not r64["goal_2x_trl_peft"]
    assert not r64["goal_peak_rss_below_full"]  # 3100 MB >= full fine-tuning's 3000 MB
    assert r16["loss_agree"] and not r64["loss_agree"] and report["loss_agree"] is False
