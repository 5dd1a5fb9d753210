"""Soak: 500 executions with hostile programs mixed in leave no process, mount, cgroup or temp file.

Uses the benchmark's own soak and leftover counter (``execrl.bench._soak``, ``execrl.bench._leftovers``),
so ``execrl bench sandbox --soak`` and this test measure the same thing.
"""

from __future__ import annotations

import pytest

from execrl.bench import _soak
from execrl.bench._contenders import load_jobs


@pytest.mark.slow
def test_soak_500_executions_leaves_nothing_behind() -> None:
    jobs = load_jobs(20)
    # a hostile program every 50 executions: 10 in all, every kind at least twice
    report = _soak.run_soak(jobs, executions=500, workers=2, hostile_every=50)
    assert report.leftovers == {"processes": 0, "mounts": 0, "cgroups": 0, "temp_files": 0}
    assert report.sandbox_errors == 0
    hostile = [_soak.HOSTILE[(i // 50) % 4][0] for i in range(49, 500, 50)]
    assert hostile.count("busy_loop") == 3 and hostile.count("memory_hog") == 2
    assert report.verdicts["time_limit"] == 3
    assert report.verdicts["memory_limit"] == 2
    normal = [jobs[i % len(jobs)] for i in range(500) if i % 50 != 49]
    canonical = sum(job.kind == "canonical" for job in normal)
    # orphan and file_writer programs exit 0; every canonical passes, every mutant fails
    assert report.verdicts["passed"] == canonical + hostile.count("orphan") + hostile.count("file_writer")
    assert sum(report.verdicts.values()) == 500
