"""``execrl tasks transcripts``: SFT rows from a suite's references, the tool calls run for real in sandbox
sessions, every written final answer passing its task's hidden tests through the reward path."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.rewards import RewardConfig, score_batch
from execrl.rollout.models import default_tokenizer
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.tasks import load_suite
from execrl.tasks.schema import SessionSpec
from execrl.tools import ToolConfig
from execrl.tools.render import render_conversation
from execrl.tools.transcripts import transcripts


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as box:
        yield box


def test_tools_transcripts_call_the_tool_for_real_and_pass_their_hidden_tests(sandbox: Sandbox) -> None:
    tasks = load_suite("tools", "train")[::20]  # every template, data files included
    done = transcripts(tasks, sandbox, suite="tools", config=ToolConfig())
    assert len(done.rows) == len(tasks) and not done.failed and not done.without_reference
    by_id = {t.id: t for t in tasks}
    answers = [row["messages"][-1]["content"] for row in done.rows]
    scores = score_batch([by_id[r["metadata"]["task_id"]] for r in done.rows], answers, sandbox=sandbox,
                         config=RewardConfig(use_hidden_tests=True))  # fmt: skip
    assert all(s.passed for s in scores)
    tokenizer = default_tokenizer()
    for row in done.rows:
        task = by_id[row["metadata"]["task_id"]]
        [call, output, final] = row["messages"][1:]
        assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {
            "code": task.session.reference_cells[0]
        }
        assert output == {
            "role": "tool",
            "tool_call_id": "call_0",
            "content": task.spec.answer,
        }  # what it printed
        assert final["content"] == f"The answer is {task.spec.answer}."
        for call_format in ("hermes", "python_block"):  # both conventions render it as an episode
            rendered = render_conversation(
                tokenizer, row["messages"], tools=row["tools"], call_format=call_format
            )
            assert rendered.tool_calls == 1 and rendered.assistant_turns == 2


def test_a_reference_that_fails_its_hidden_tests_is_named_and_not_kept(sandbox: Sandbox) -> None:
    [task] = load_suite("tools", "train")[:1]
    broken = dataclasses.replace(task, session=SessionSpec(tools=("python",), reference_cells=("print(-1)",)))
    done = transcripts([broken], sandbox, suite="tools", config=ToolConfig())
    assert done.rows == () and done.failed == (f"{task.id}: wrong_answer",)


def test_code_suite_rows_are_the_reference_answers(sandbox: Sandbox) -> None:
    tasks = load_suite("functions", "train")[:3]
    done = transcripts(tasks, sandbox, suite="functions", config=ToolConfig())
    assert [r["messages"][-1]["content"] for r in done.rows] == [t.reference_solution for t in tasks]
    assert all("tools" not in r for r in done.rows)


def test_cli_writes_train_rows_reports_overlap_and_refuses_test_splits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["tasks", "transcripts", "tools", "--split", "train", "--limit", "3", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 3
    printed = capsys.readouterr().out
    assert "3 transcripts written" in printed and "overlap with humaneval" in printed and "clean" in printed
    for args in (["tools", "--split", "test"], ["humaneval"]):
        refused = tmp_path / "refused.jsonl"
        assert main(["tasks", "transcripts", *args, "--out", str(refused)]) == 2
        assert not refused.exists()
        assert capsys.readouterr().err.startswith("error: ")
