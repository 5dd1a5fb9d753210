"""``execrl bench train --ranks 1,2`` end to end on the tiny model (issue 38): the batch comes from the one
rollout loop (``run_episodes`` -> ``episodes_to_batch``), the update runs in one process and over 2 gloo
ranks, and the JSON carries the issue's top-level keys: ``state_bytes_ratio_2_vs_1`` (the largest rank's
model state at 2 ranks over one process's: half, plus the value of an odd tensor's split) and
``loss_max_abs_diff`` (the same losses, float32 summation order aside)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_train_cli import EXECRL, _env


@pytest.mark.slow
def test_bench_train_ranks_writes_the_issue_keys(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ranks.json"
    run = subprocess.run(
        [*EXECRL, "bench", "train", "--ranks", "1,2", "--model-dir", str(tiny_model_dir), "--steps", "1",
         "--prompts", "2", "--samples", "2", "--max-new-tokens", "8", "--json", str(out)],
        env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(out.read_text())
    assert 0.45 < report["state_bytes_ratio_2_vs_1"] <= 0.55
    assert report["loss_max_abs_diff"] < 1e-6
    assert [(r["ranks"], r["strategy"]) for r in report["runs"]] == [(1, "single"), (2, "fsdp")]
