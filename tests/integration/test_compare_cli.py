"""``execrl compare RUN_A RUN_B`` on two small synthetic runs: a table naming both and an overlay plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _run(path: Path, rewards: list[float]) -> Path:
    path.mkdir(parents=True)
    lines = [
        json.dumps({"step": i, "time_s": float(i), "reward/mean": r, "loss/policy": -r / 10})
        for i, r in enumerate(rewards)
    ]
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_compare_writes_table_and_plot(tmp_path: Path) -> None:
    a = _run(tmp_path / "run-a", [0.1, 0.2, 0.3])
    b = _run(tmp_path / "run-b", [0.1, 0.4, 0.7])
    out = tmp_path / "cmp"
    done = subprocess.run(
        [sys.executable, "-m", "execrl.cli", "compare", str(a), str(b), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    table = (out / "compare.md").read_text()
    assert "run-a" in table and "run-b" in table and "reward/mean" in table
    assert "0.7" in table  # run-b's final reward
    assert (out / "plots" / "compare_curves.png").stat().st_size > 5000
