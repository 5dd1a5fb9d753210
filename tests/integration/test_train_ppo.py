"""PPO with a learned value head (GAE) end to end: value loss logged, value head checkpointed, and the
base-vs-trained evaluation and report written at the end of the run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from toy_domain import toy_overrides

from execrl.config import load_config
from execrl.recipes.ppo import train


@pytest.mark.slow
def test_ppo_with_value_head_trains_and_checkpoints(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    config = load_config(
        None,
        [
            *toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path),
            "run.total_steps=3",
            "tasks.eval_tasks_per_suite=4",
            "algorithm.advantage_estimator=gae",
            "optim.ppo_epochs=2",
        ],
    )
    outcome = train(config, progress=False)
    rows = [json.loads(x) for x in (outcome.run_dir / "metrics.jsonl").read_text().splitlines()]
    values = [r["loss/value"] for r in rows if "loss/value" in r]
    assert len(values) == 3 and all(math.isfinite(v) and v >= 0 for v in values)
    assert (outcome.run_dir / "checkpoints" / "step_000002" / "value_head.safetensors").exists()
    comparison = json.loads((outcome.run_dir / "eval" / "comparison.json").read_text())
    (suite,) = comparison
    assert set(comparison[suite]["models"]) == {"base", "trained"}
    assert "pass@1" in comparison[suite]["delta"] and "reward" in comparison[suite]["delta"]
    report = (outcome.run_dir / "report.md").read_text()
    assert "pass@1" in report and (outcome.run_dir / "report.html").exists()
    assert list((outcome.run_dir / "plots").glob("*.png"))
