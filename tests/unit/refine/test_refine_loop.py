"""The refine loop with a scripted backend and the real sandbox: stopping, feedback content, conditions,
matched budgets, and the guarantee that no hidden test text ever reaches a prompt."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from execrl.refine import (
    GenerationParams,
    RefineConfig,
    Reply,
    evaluate_refine,
    first_attempts,
    read_trace,
    run_refine,
)
from execrl.refine.backends import Conversation
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.sandbox.types import CodeTest
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata

HIDDEN_MARKER = "SECRET_HIDDEN_CASE_9137"
WRONG = "```python\ndef double(x):\n    return x + 1\n```"
RIGHT = "```python\ndef double(x):\n    return 2 * x\n```"


def _task(i: int, *, visible: bool = True) -> Task:
    hidden = CodeTest(
        name="hidden", code=f"# {HIDDEN_MARKER}\nassert double(21) == 42\nassert double(-3) == -6\n"
    )
    return Task(
        id=f"t{i}",
        domain="code",
        prompt=f"Problem {i}: write double(x) returning twice x.",
        spec=CodeSpec(kind="function", entry_point="double"),
        metadata=TaskMetadata(family="toy", split="test"),
        visible_tests=(CodeTest(name="example_0", code="assert double(2) == 4, 'double(2)'"),)
        if visible
        else (),
        hidden_tests=(hidden,),
    )


class Scripted:
    """Answers wrong until it has seen feedback that quotes 'got: 3' (i.e. the real feedback), then right;
    fresh prompts (no feedback) are always answered wrong. Records every conversation it was sent."""

    name = "scripted"

    def __init__(self) -> None:
        self.seen: list[list[dict[str, str]]] = []

    def complete(self, conversations: Sequence[Conversation], params: GenerationParams) -> list[Reply]:
        out = []
        for conv in conversations:
            self.seen.append(list(conv))
            fixed = any("got: 3" in m["content"] for m in conv if m["role"] == "user")
            out.append(Reply(RIGHT if fixed else WRONG, 10, 5, "stop"))
        return out


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as box:
        yield box


def test_loop_conditions_budget_and_no_hidden_leak(sandbox: Sandbox, tmp_path: Path) -> None:
    tasks = [_task(0), _task(1), _task(2, visible=False)]
    backend = Scripted()
    trace = tmp_path / "trace.jsonl"
    summary = evaluate_refine(tasks, backend, sandbox, RefineConfig(rounds=3), trace_path=trace)
    cond = summary["conditions"]
    # Real feedback quotes the got value -> fixed at round 2 on the two problems with visible tests.
    assert [round(e["value"], 4) for e in cond["refine"]["hidden_pass_by_round"]] == [0.0, 0.6667, 0.6667]
    # Random feedback is another problem's: it also says "got: 3" here (same bug), so it fixes too;
    # resampling never sees feedback and stays wrong for all 3 generations.
    assert [e["value"] for e in cond["resample"]["hidden_pass_by_round"]] == [0.0, 0.0, 0.0]
    assert cond["resample"]["usage"]["generations_per_problem"] == pytest.approx(7 / 3)  # 3 + 3 + 1
    assert cond["refine"]["usage"]["generations_per_problem"] == pytest.approx(5 / 3)  # 2 + 2 + 1
    assert cond["refine"]["fix_rate_by_error"] == {"wrong_answer": {"tried": 2, "fixed": 2, "rate": 1.0}}
    assert cond["resample"]["identical_resubmission_rate"] == 1.0
    assert summary["deltas"]["refine_minus_resample"][1]["value"] == pytest.approx(2 / 3)
    assert summary["problems_without_visible_tests"] == 1
    # No hidden test text in anything the model was sent, nor in any prompt recorded in the trace.
    rows = list(read_trace(trace))
    assert {r["condition"] for r in rows} == {"refine", "random_feedback", "resample"}
    prompts = [m["content"] for r in rows for m in r["messages"]] + [
        m["content"] for conv in backend.seen for m in conv
    ]
    hidden_lines = [line for t in tasks for h in t.hidden_tests for line in h.code.splitlines()]
    assert any("got: 3" in p for p in prompts), "feedback never reached a prompt: the leak check is vacuous"
    for text in prompts:
        assert HIDDEN_MARKER not in text
        assert not any(line.strip() in text for line in hidden_lines if line.strip())


def test_random_feedback_comes_from_another_problem(sandbox: Sandbox) -> None:
    """The control shows each problem the feedback of a different problem of the same turn."""
    tasks = [
        dataclasses.replace(
            _task(i), visible_tests=(CodeTest(name="example_0", code=f"assert double({i}) == {2 * i}"),)
        )
        for i in (5, 6, 7)
    ]
    backend = Scripted()
    config = RefineConfig(rounds=2)
    first = first_attempts(tasks, backend, sandbox, config)
    own = run_refine(tasks, backend, sandbox, config, first=first)
    control = run_refine(tasks, backend, sandbox, config, first=first, source="random")
    assert len(own) == len(tasks)
    for i, (mine, other) in enumerate(zip(own, control, strict=True)):
        assert f"input: double({i + 5})" in (mine.attempts[0].feedback or "")
        assert f"input: double({i + 5})" not in (other.attempts[0].feedback or "")
        assert "input: double(" in (other.attempts[0].feedback or "")
    assert sorted(r.attempts[0].feedback or "" for r in own) == sorted(
        r.attempts[0].feedback or "" for r in control
    )
