"""SandboxFusion "CommonOJ" rows (ByteDance's sandbox service) -> stdio tasks.

A row (JSONL line or JSON array item): ``id``, ``content`` (or ``prompt``) with the statement, ``test``
(a list, or JSON text of one) of ``{"input": {"stdin": ...}, "output": {"stdout": ...}}``, optionally
``labels`` (free-form; ``difficulty`` 1-5 is used when present) and ``canonical_solution``
(``{"python": [programs...], "cpp": [...]}``). SandboxFusion also allows other file names besides
``stdin``/``stdout`` in a test's input and output; ``IOTest`` only has the standard streams, so such a row
is an error naming the file rather than a test that silently ignores it. The format has no public split:
the first case is visible, all cases are hidden. Ids are kept as given.
"""

from __future__ import annotations

from typing import Any

from execrl.sandbox.types import IOTest
from execrl.tasks.importers._common import STDIO_INSTRUCTION, fence, import_rows, json_field
from execrl.tasks.schema import CodeSpec, Split, Task, TaskMetadata
from execrl.tasks.serialize import FieldReader
from execrl.tasks.storage import PathLike


def _stream(row: FieldReader, path: str, value: Any, stream: str) -> str | None:
    if not isinstance(value, dict):
        row.problems.append((path, f"expected an object of file name -> content, got {type(value).__name__}"))
        return None
    extra = sorted(set(value) - {stream})
    if extra:
        row.problems.append((path, f"files other than {stream!r} are not supported: {extra}"))
        return None
    text = value.get(stream, "")
    if not isinstance(text, str):
        row.problems.append((f"{path}.{stream}", f"expected str, got {type(text).__name__}"))
        return None
    return text


def _tests(row: FieldReader) -> list[IOTest]:
    cases = json_field(row, "test", "list")
    tests: list[IOTest] = []
    for i, case in enumerate(cases or []):
        if not isinstance(case, dict):
            row.problems.append((f"test[{i}]", "expected {'input': {...}, 'output': {...}}"))
            continue
        if "output" not in case:
            row.problems.append((f"test[{i}].output", "missing"))
            continue
        stdin = _stream(row, f"test[{i}].input", case.get("input", {}), "stdin")
        stdout = _stream(row, f"test[{i}].output", case["output"], "stdout")
        if stdin is not None and stdout is not None:
            tests.append(IOTest(name=f"test_{i}", stdin=stdin, expected_stdout=stdout))
    if cases is not None and not cases:
        row.problems.append(("test", "empty"))
    return tests


def _sandboxfusion_row(row: FieldReader, split: Split) -> Task | None:
    task_id = row.get("id", "any")
    key = "content" if "content" in row.data or "prompt" not in row.data else "prompt"
    statement = row.get(key, "str")
    labels = json_field(row, "labels", "object", default={}) or {}
    solutions = json_field(row, "canonical_solution", "object", default={}) or {}
    tests = _tests(row)
    difficulty = labels.get("difficulty", 3)
    if not isinstance(difficulty, int) or not 1 <= difficulty <= 5:
        row.problems.append(("labels.difficulty", f"must be an integer in 1..5, got {difficulty!r}"))
    if row.problems:
        return None
    python = solutions.get("python") or []
    reference = python[0] if isinstance(python, list) and python and isinstance(python[0], str) else None
    return Task(
        id=str(task_id),
        domain="code",
        prompt=statement.strip() + STDIO_INSTRUCTION,
        spec=CodeSpec(kind="stdio"),
        metadata=TaskMetadata(
            family="sandboxfusion", difficulty=difficulty, source="sandboxfusion", split=split
        ),
        visible_tests=(tests[0],),
        hidden_tests=tuple(tests),
        reference_solution=fence(reference) if reference else None,
    )


def import_sandboxfusion(url: PathLike, *, split: Split | None = None) -> list[Task]:
    """Tasks from a SandboxFusion CommonOJ file (JSONL or one JSON array)."""
    return import_rows(url, lambda row: _sandboxfusion_row(row, split or "train"))
