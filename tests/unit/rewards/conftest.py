"""Builders of small tasks for the rewards tests (hand-written, no suites needed)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from execrl.sandbox.types import CallTest, CodeTest, IOTest, TestCase
from execrl.tasks.schema import CodeSpec, MathSpec, StructuredSpec, Task, TaskMetadata

ADD_TESTS: tuple[TestCase, ...] = (
    CallTest(name="small", entry_point="add", args=(1, 2), expected=3),
    CallTest(name="negative", entry_point="add", args=(-4, 1), expected=-3),
    CallTest(name="zero", entry_point="add", args=(0, 0), expected=0),
    CallTest(name="large", entry_point="add", args=(10**6, 1), expected=10**6 + 1),
)
SUM_STDIN_TESTS: tuple[TestCase, ...] = (
    IOTest(name="one", stdin="1\n2\n", expected_stdout="3\n"),
    IOTest(name="two", stdin="10\n-3\n", expected_stdout="7\n"),
)


def _code_task(
    *,
    task_id: str = "add",
    kind: str = "function",
    entry_point: str | None = "add",
    prompt_code: str = "",
    hidden: tuple[TestCase, ...] = ADD_TESTS,
    visible: tuple[TestCase, ...] = (),
    files: Mapping[str, str] | None = None,
    program_path: str | None = None,
) -> Task:
    spec = CodeSpec(
        kind=kind,  # type: ignore[arg-type]
        entry_point=entry_point,
        prompt_code=prompt_code,
        files=files or {},
        program_path=program_path,
    )
    return Task(
        id=task_id,
        domain="code",
        prompt="Write the function.",
        spec=spec,
        metadata=TaskMetadata(family="test"),
        visible_tests=visible,
        hidden_tests=hidden,
    )


@pytest.fixture
def make_code_task() -> Callable[..., Task]:
    return _code_task


@pytest.fixture
def make_math_task() -> Callable[[str], Task]:
    def build(answer: str, task_id: str = "m") -> Task:
        return Task(id=task_id, domain="math", prompt="?", spec=MathSpec(answer), metadata=TaskMetadata("t"))

    return build


@pytest.fixture
def make_structured_task() -> Callable[..., Task]:
    def build(schema: Mapping[str, Any], expected: Mapping[str, Any] | None = None) -> Task:
        spec = StructuredSpec(json_schema=schema, expected_values=expected or {})
        return Task(id="s", domain="structured", prompt="?", spec=spec, metadata=TaskMetadata("t"))

    return build


@pytest.fixture
def stdio_task() -> Task:
    return _code_task(task_id="sum_stdin", kind="stdio", entry_point=None, hidden=SUM_STDIN_TESTS)


@pytest.fixture
def repository_task() -> Task:
    files = {
        "shop/__init__.py": "",
        "shop/report.py": "from shop.pricing import total\n\ndef line(items):\n    return f'total={total(items)}'\n",
        "tests_shop.py": "",
    }
    test = CodeTest(
        name="report",
        code="from shop.report import line\nassert line([1, 2, 3]) == 'total=6', line([1, 2, 3])\n",
    )
    return _code_task(
        task_id="repo",
        kind="repository",
        entry_point=None,
        hidden=(test,),
        files=files,
        program_path="shop/pricing.py",
    )
