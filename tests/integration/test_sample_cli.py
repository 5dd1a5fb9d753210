"""``execrl sample`` as a user runs it, on the tiny model and the toy domain: rows and counts written, every
kept row's final answer passes its task's hidden tests through the reward path, and the rows are read by
``execrl sft``'s reader; bad input is one ``error:`` line naming what to fix, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_domain import toy_overrides

from execrl.cli import main
from execrl.recipes.sft_data import read_rows
from execrl.rewards import RewardConfig, score_batch
from execrl.rollout.models import default_tokenizer
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.tasks import load_tasks


def test_sample_writes_passing_rows_and_counts(
    caps_or_eos_model: Path, toy_tasks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.jsonl"
    args = ["sample", "--samples-per-task", "8", "--limit", "8", "--out", str(out),
            *toy_overrides(caps_or_eos_model, toy_tasks_file, tmp_path), "rollout.max_new_tokens=6"]  # fmt: skip
    assert main(args) == 0
    counts = json.loads((tmp_path / "rows.counts.json").read_text())
    assert counts["samples"] == 64 and len(counts["tasks"]) == 8
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == counts["rows"] == sum(c["kept"] for c in counts["tasks"].values())
    assert counts["samples"] > counts["passed"] >= len(rows) > 0  # some pass, some not
    printed = capsys.readouterr().out
    assert f"{len(rows)} rows written" in printed and "overlap with humaneval" in printed
    by_id = {t.id: t for t in load_tasks(str(toy_tasks_file))}
    with Sandbox(SandboxConfig(workers=2)) as box:
        scores = score_batch([by_id[r["metadata"]["task_id"]] for r in rows],
                             [r["messages"][-1]["content"] for r in rows], sandbox=box,
                             config=RewardConfig(use_hidden_tests=True))  # fmt: skip
    assert all(s.passed for s in scores)
    if rows:
        read = read_rows([str(out)], default_tokenizer(), call_format="hermes", max_tokens=4096)
        assert len(read.conversations) == len(rows) and not read.bad


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--split", "test"], "--split test"),
        (["nosuch.key=1"], "nosuch"),
        (["--base-url", "http://127.0.0.1:9/v1"], "--served-model"),
    ],
)
def test_bad_input_is_one_error_line_and_nothing_written(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["sample", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert not out.exists()
