"""``execrl bench sandbox-service`` end to end with tiny numbers: two real services, JSON written, verdicts
agree across the in-process pool and the services (the benchmark's own assertion)."""

from __future__ import annotations

import json
from pathlib import Path

from execrl.bench.sandbox_service import programs
from execrl.cli import main


def test_programs_alternate_right_and_wrong() -> None:
    requests = programs(3)
    assert [r.tests[0].args for r in requests] == [(0,), (1,), (2,)]
    assert [r.program.splitlines()[1].strip() for r in requests] == [
        "return x * 2",
        "return x * 2 + 1",
        "return x * 2",
    ]


def test_bench_runs_one_and_two_services_against_the_in_process_pool(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    argv = [
        "bench",
        "sandbox-service",
        "--executions",
        "6",
        "--rounds",
        "1",
        "--workers",
        "1",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    summary = json.loads(out.read_text())
    assert summary["verdicts_equal"] is True
    assert summary["passed"] == 3
    assert summary["services"] == 2
    for key in ("inprocess_exec_per_s", "service_1_exec_per_s", "service_n_exec_per_s"):
        assert summary[key] > 0
