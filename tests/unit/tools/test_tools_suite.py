"""The ``tools`` suite and task sessions: the spec survives JSONL, bad specs are named, and the check
proves each task's reference cells solve it through the tool (a broken cell fails the check)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from execrl.rewards import check_scorer
from execrl.sandbox import default_sandbox
from execrl.tasks import load_suite, load_tasks, save_tasks
from execrl.tasks.check import check_tasks, tool_reference_answers
from execrl.tasks.serialize import parse_task, task_to_dict


def test_session_spec_round_trips_through_jsonl(tmp_path: Path) -> None:
    tasks = load_suite("tools", "test")
    path = tmp_path / "tools.jsonl"
    save_tasks(tasks, str(path))
    assert load_tasks(str(path)) == tasks
    assert any(t.session is not None and t.session.files for t in tasks)


def test_bad_session_fields_are_named() -> None:
    row = task_to_dict(load_suite("tools", "test")[0])
    row["session"] = {"tools": ["python", "python"], "runtime": "ruby", "files": {"../x": "1"}, "setup": [3]}
    task, problems = parse_task(json.loads(json.dumps(row)))
    assert task is None
    assert [where for where, _ in problems] == ["session.setup[0]"]
    row["session"]["setup"] = []
    _, problems = parse_task(row)
    fields = {where.split(".")[1].split("[")[0] for where, _ in problems}
    assert {"tools", "runtime"} <= fields and any("../x" in why or "x" in where for where, why in problems)


def test_reference_cells_are_proven_through_the_tool() -> None:
    tasks = [load_suite("tools", "test")[i] for i in (0, -1)]  # an exact computation and a CSV question
    broken = dataclasses.replace(
        tasks[0], id="broken",
        session=dataclasses.replace(tasks[0].session, reference_cells=("print(1)",)),  # type: ignore[arg-type]
    )  # fmt: skip
    answers = tool_reference_answers([*tasks, broken], default_sandbox())
    report = check_tasks([*tasks, broken], scorer=check_scorer, tool_answers=answers)
    assert [c.tool for c in report.tasks[:2]] == ["ok", "ok"]
    assert report.tasks[2].tool.startswith("failed:") and not report.ok
