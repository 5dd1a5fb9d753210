"""Demonstrations from what a suite already verifies: SFT rows built from its references (issue 39).

``execrl tasks transcripts SUITE --split train --out rows.jsonl`` writes one chat row per task with a
reference, in the row format ``execrl sft`` reads (``messages``, ``tools``, and ``metadata`` with the task
id):

* a task with ``SessionSpec.reference_cells`` (the ``tools`` suite): each cell is a real ``python`` call,
  run in a fork of the task's session template (its files and setup cells) in a real sandbox session as an
  episode runs it (``env.open_session_template``), with the tool's real answer (``builtin.cell_text``, what the
  ``python`` tool returns) as the ``tool`` message; then the final answer, "The answer is <what the last
  cell printed>.". The calls are OpenAI ``tool_calls``: ``execrl sft`` writes them in its
  ``tools.call_format`` when it renders the row;
* a task with a ``reference_solution`` only (the code suites, math, structured): the reference as the
  assistant's answer (it is written as a model answers, in the format the reward's extractor reads: a
  fenced code block for code).

Every transcript's final answer is then scored like a training episode's (``env.judge_answers``: the
reward path on the hidden tests, in fresh jails); only the ones that pass are kept, the others are counted
and named. Only train splits are written (the CLI refuses others and HumanEval is eval-only).

Limits: tool answers are not cut to ``tools.max_tool_output_tokens`` (the ``tools`` suite's answers are
one number; a longer answer stays whole, so its row shows more than an episode would); one reference per
task.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from execrl.rewards.batch import SyncRunner
from execrl.tasks.schema import Task, prompt_for_chat
from execrl.tools.builtin import cell_text
from execrl.tools.env import ToolConfig, judge_answers, open_session_template
from execrl.tools.registry import get_tool

__all__ = ["ToolConfig", "Transcripts", "reference_row", "row_text", "transcripts"]


@dataclass(frozen=True)
class Transcripts:
    rows: tuple[dict[str, Any], ...]  # the passing transcripts, in task order
    failed: tuple[str, ...] = ()  # "task id: reason" of each reference whose final answer did not pass
    without_reference: tuple[str, ...] = field(default=())  # task ids with neither cells nor a solution


def transcripts(tasks: Sequence[Task], runner: SyncRunner, *, suite: str, config: ToolConfig) -> Transcripts:
    """A transcript per task with a reference, each final answer judged on the hidden tests."""
    built: list[tuple[Task, dict[str, Any], str]] = []
    missing = []
    for task in tasks:
        row = reference_row(task, runner, suite=suite, config=config)
        if row is None:
            missing.append(task.id)
        else:
            built.append((task, row, row["messages"][-1]["content"]))
    verdicts = judge_answers([t for t, _, _ in built], [a for _, _, a in built], [0] * len(built),
                             runner=runner, config=config)  # fmt: skip
    kept = tuple(row for (_, row, _), v in zip(built, verdicts, strict=True) if v.passed)
    failed = tuple(
        f"{t.id}: {v.reason}" for (t, _, _), v in zip(built, verdicts, strict=True) if not v.passed
    )
    return Transcripts(kept, failed, tuple(missing))


def reference_row(task: Task, runner: SyncRunner, *, suite: str, config: ToolConfig) -> dict[str, Any] | None:
    """The task's reference as an SFT row (``None`` without a reference)."""
    prompt = prompt_for_chat(task.prompt)
    messages: list[dict[str, Any]] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    )
    metadata = {"task_id": task.id, "suite": suite, "source": "reference"}
    if task.session is not None and task.session.reference_cells:
        turns = _tool_turns(task, task.session.reference_cells, runner, config)
        tools = [get_tool(name).declaration() for name in task.session.tools]
        return {"messages": [*messages, *turns], "tools": tools, "metadata": metadata}
    if task.reference_solution:
        return {"messages": [*messages, {"role": "assistant", "content": task.reference_solution}],
                "metadata": metadata}  # fmt: skip
    return None


def _tool_turns(
    task: Task, cells: Sequence[str], runner: SyncRunner, config: ToolConfig
) -> list[dict[str, Any]]:
    """The reference ``cells`` as python calls in a fork of the task's session, their real answers, then
    the final answer from what the last cell printed."""
    template = open_session_template(runner, task, config)
    [session] = template.fork(1)
    turns: list[dict[str, Any]] = []
    try:
        for k, cell in enumerate(cells):
            result = session.run(cell)
            call = {"id": f"call_{k}", "type": "function",
                    "function": {"name": "python", "arguments": json.dumps({"code": cell})}}  # fmt: skip
            turns += [{"role": "assistant", "content": None, "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": f"call_{k}", "content": cell_text(result)}]  # fmt: skip
    finally:
        session.close()
        template.close()
    final = (
        f"The answer is {result.stdout.strip()}." if result.passed else f"The tool failed: {result.message}"
    )
    return [*turns, {"role": "assistant", "content": final}]


def row_text(row: dict[str, Any]) -> str:
    """Everything a row shows the model (for the n-gram overlap check): every message's text and call."""
    parts = []
    for message in row["messages"]:
        parts.append(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            parts.append(str(call["function"].get("arguments", "")))
    return "\n".join(parts)
