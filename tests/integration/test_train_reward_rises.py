"""Acceptance of the trainer: GRPO through the sandbox and the reward registry makes the reward rise.

A tiny random model, the toy domain of ``toy_domain.py`` (reward = share of words starting with a capital
A-F, computed by a checker program run in the sandbox): the mean reward must start below 0.2 and end above
0.8. A broken advantage sign, loss aggregation or optimizer wiring keeps it flat or drives it down.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_domain import toy_overrides

from execrl.config import load_config
from execrl.recipes.grpo import train


@pytest.mark.slow
def test_grpo_reward_rises_on_toy_domain(tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path) -> None:
    config = load_config(
        None,
        [
            *toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path),
            "run.total_steps=14",
            "eval.enabled=false",
        ],
    )
    outcome = train(config, progress=False)
    rows = [json.loads(line) for line in (outcome.run_dir / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward/mean"] for r in rows if "reward/mean" in r]
    assert len(rewards) == 14
    assert rewards[0] < 0.2, rewards
    assert sum(rewards[-3:]) / 3 > 0.8, rewards
    assert [r["reward/invalid_rate"] for r in rows if "reward/mean" in r] == [0.0] * 14
    # The rollout's log-probs agree with the trainer's recomputation (padding/position bugs show here).
    assert max(r["rollout/logprob_max_abs_diff"] for r in rows if "rollout/logprob_max_abs_diff" in r) < 1e-3
