"""``execrl bench sandbox --warm-start`` (``bench/_warm.py``): a tiny run writes every load, both
sides and the share of warm starts; bad counts are refused before anything starts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from execrl.bench.sandbox import add_arguments, run


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--warm-start", *argv])


def test_a_small_warm_start_bench_reports_every_load(tmp_path: Path) -> None:
    out = tmp_path / "warm.json"
    args = _args("--warm-executions", "12", "--rounds", "1", "--concurrency", "1", "--json", str(out))
    assert run(args) == 0
    report = json.loads(out.read_text())
    assert set(report["loads"]) == {"bash@1", "python@1", "bash2:python1@1"}
    for name, row in report["loads"].items():
        assert row["warm_exec_per_s"] > 0 and row["cold_exec_per_s"] > 0, name
        assert row["ratio"] == row["warm_exec_per_s"] / row["cold_exec_per_s"]
    assert report["loads"]["python@1"]["warm_share"] == 0.0  # Python never starts warm
    assert report["loads"]["bash@1"]["warm_share"] > 0.5


def test_a_zero_count_is_refused(capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(_args("--warm-executions", "0")) == 2
    assert "--warm-executions must be >= 1" in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")
