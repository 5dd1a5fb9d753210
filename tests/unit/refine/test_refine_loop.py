"""The refine evaluation (the one rollout loop with the refine environment) with a scripted endpoint and the
real sandbox: stopping, feedback content, conditions, shared first attempts, matched budgets, and the
guarantee that no hidden test text ever reaches a prompt."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from execrl.episodes.chat import ChatBackend, Endpoint
from execrl.episodes.types import Completion
from execrl.refine import RefineConfig, SharedFirstTurns, evaluate_refine, read_trace, run_condition
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


def answer(text: str) -> Completion:
    """An endpoint's answer as the chat backend makes it (10 prompt tokens, 5 completion tokens)."""
    message = {"role": "assistant", "content": text}
    return Completion(
        (), (), (), text, "stop", message=message, usage_prompt_tokens=10, usage_completion_tokens=5
    )


class Scripted(ChatBackend):
    """An OpenAI-compatible endpoint, scripted (the request body in, its answer out; no HTTP): wrong until
    it has seen feedback that quotes 'got: 3' (i.e. the real feedback), then right; fresh prompts (no
    feedback) are always answered wrong. Records every conversation it was sent. Problem i answers after
    ``10 * (i % 3)`` ms, so answers come back one by one, as from a real server."""

    def __init__(self) -> None:
        super().__init__(Endpoint("http://127.0.0.1:9/v1", "scripted"), concurrency=4)
        self.seen: list[list[dict[str, str]]] = []

    def _ask(self, body: dict[str, Any]) -> Completion:
        conv = body["messages"]
        self.seen.append(conv)
        problem = re.search(r"Problem (\d+)", conv[0]["content"])
        time.sleep(0.01 * (int(problem.group(1)) % 3) if problem else 0.0)
        fixed = any("got: 3" in m["content"] for m in conv if m["role"] == "user")
        return answer(RIGHT if fixed else WRONG)


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
    # Shared first attempts: the model answered 3 first attempts, 2 repairs per feedback condition and 2 x 2
    # fresh samples for resampling; the other conditions' first attempts were the refine condition's.
    assert len(backend.seen) == 3 + 2 + 2 + 4
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
    """The control shows each problem the feedback of a different problem of the same turn. Also guards the
    lock step of ``SharedFirstTurns``: the endpoint returns answers as they come, and an environment that
    answered them one by one would have no other problem's feedback to give (it then gives the own)."""
    tasks = [
        dataclasses.replace(
            _task(i), visible_tests=(CodeTest(name="example_0", code=f"assert double({i}) == {2 * i}"),)
        )
        for i in (5, 6, 7)
    ]
    backend = SharedFirstTurns(Scripted())
    config = RefineConfig(rounds=3)
    own = run_condition(tasks, backend, sandbox, config, condition="refine")
    control = run_condition(tasks, backend, sandbox, config, condition="random_feedback")
    assert backend.replayed == len(tasks)  # the control answered the same first attempts
    assert len(own) == len(tasks)
    for turn in (0, 1):  # turn 2's answers came back one by one (turn 1's were replayed together)
        for i, (mine, other) in enumerate(zip(own, control, strict=True)):
            assert f"input: double({i + 5})" in (mine.attempts[turn].feedback or "")
            assert f"input: double({i + 5})" not in (other.attempts[turn].feedback or "")
            assert "input: double(" in (other.attempts[turn].feedback or "")
        assert sorted(r.attempts[turn].feedback or "" for r in own) == sorted(
            r.attempts[turn].feedback or "" for r in control
        )
