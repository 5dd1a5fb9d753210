"""The one task schema every domain shares (no torch, no I/O).

A task is what the policy is prompted with plus everything needed to verify an answer. Rewards route by
``Task.domain`` (a key of the reward registry), never by ``if data_source == ...`` ladders.

Visible tests may be shown to the model (in the prompt, or as feedback in the refine loop); hidden tests
are only for scoring. Keeping them apart is what lets a refine loop show failures without leaking the
grader. ``audit_tests`` are a third, held-back split: never used for the reward and never shown, only
re-run on a sample of the completions the reward passed, so a run learns when its reward stops meaning
what it says (reward hacking; see ``execrl.rewards.audit``). ``reference_solution`` must pass the hidden tests and ``wrong_solution`` must fail them (checked in
CI by ``execrl tasks check``): this is how we know a verifier can tell right from wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from execrl.sandbox.types import TestCase

Role = Literal["system", "user", "assistant"]
CodeKind = Literal["function", "stdio", "repository"]
Split = Literal["train", "test"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class CodeSpec:
    """How to turn a completion into a program and run it.

    - ``function``: the completion defines ``entry_point``; ``prompt_code`` (HumanEval's signature and
      docstring, imports) is prepended when the completion only continues it.
    - ``stdio``: the completion is a whole program reading stdin; tests are ``IOTest``s.
    - ``repository``: ``files`` is a small project; the completion becomes the file ``program_path``
      (``starter_code`` is that file's current content) and the project's own test suite is run, so a
      change that breaks a caller loses reward.
    """

    kind: CodeKind
    language: str = "python"
    entry_point: str | None = None
    prompt_code: str = ""
    files: Mapping[str, str] = field(default_factory=dict)
    program_path: str | None = None
    starter_code: str = ""


@dataclass(frozen=True)
class MathSpec:
    """An exact numeric answer, written as the reference writes it ("3/4", "1,250", "0.5")."""

    answer: str


@dataclass(frozen=True)
class StructuredSpec:
    """JSON that must satisfy ``json_schema`` and, where given, hold ``expected_values`` at those keys
    (dotted paths, e.g. ``"address.city"``)."""

    json_schema: Mapping[str, Any]
    expected_values: Mapping[str, Any] = field(default_factory=dict)


VerifierSpec = CodeSpec | MathSpec | StructuredSpec


@dataclass(frozen=True)
class SessionSpec:
    """Where a tool episode of this task starts (``execrl.tools``; absent: a bare session).

    ``files`` are placed in the session's work directory, ``setup`` cells (the task's own trusted code:
    imports, loading the data) run once per group in a template that the group's samples fork from, in
    the Python ``runtime`` (``python`` or ``python-data``); ``tools`` are the tools the task offers.
    ``reference_cells``: the ``python`` cells of a reference tool-using solution; ``execrl tasks check``
    runs them in a fork of the task's template and scores their output as an answer, so a suite proves
    that the tool really solves its tasks. Nothing here is shown to the judge: the final answer is scored
    on the hidden tests in a fresh jail.
    """

    tools: tuple[str, ...] = ("python",)
    setup: tuple[str, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    runtime: str = "python"
    reference_cells: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskMetadata:
    family: str
    difficulty: int = 1  # 1 (easiest) .. 5
    source: str = "execrl"
    split: Split = "train"


@dataclass(frozen=True)
class Task:
    id: str
    domain: str  # reward-registry key: "code", "math", "structured", or a user's own
    prompt: str | tuple[ChatMessage, ...]
    spec: VerifierSpec
    metadata: TaskMetadata
    visible_tests: tuple[TestCase, ...] = ()
    hidden_tests: tuple[TestCase, ...] = ()
    reference_solution: str | None = None  # a model-style answer that must score full reward
    wrong_solution: str | None = None  # a plausible wrong answer that must not
    audit_tests: tuple[TestCase, ...] = ()  # held back from reward and prompt; see the module docstring
    session: SessionSpec | None = None  # the tool session of a tool episode (``execrl.tools``)


def audit_view(task: Task) -> Task:
    """``task`` with its audit tests in place of the hidden ones (and no visible ones), so the unchanged
    reward path (``score_batch`` with ``use_hidden_tests``) scores a completion on the audit split."""
    if not task.audit_tests:
        raise ValueError(
            f"task {task.id!r} has no audit_tests; only tasks with an audit split can be audited"
        )
    return replace(task, hidden_tests=task.audit_tests, visible_tests=(), audit_tests=())


def prompt_for_chat(prompt: str | tuple[ChatMessage, ...]) -> str | list[dict[str, str]]:
    """The prompt in the form chat templates take: a string (one user turn) or role/content dicts."""
    if isinstance(prompt, str):
        return prompt
    return [{"role": m.role, "content": m.content} for m in prompt]
