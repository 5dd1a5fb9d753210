"""APPS (Hendrycks et al. 2021) and CodeContests (Li et al. 2022, AlphaCode) rows -> code tasks.

APPS rows: ``problem_id``, ``question``, ``solutions`` (JSON text: list of programs), ``input_output``
(JSON text: ``inputs``, ``outputs`` and, for call-based problems, ``fn_name``), ``difficulty``
(introductory/interview/competition), ``starter_code``. Stdin problems become ``stdio`` tasks with
``IOTest``s; call-based ones ``function`` tasks whose tests call ``fn_name`` (a ``Solution`` method when
the starter code has that class) and accept APPS's ``[result] == expected`` convention. APPS has no
public/private split: the first case (usually the statement's example) is visible, all cases are hidden.

CodeContests rows: ``name``, ``description``, ``public_tests``/``private_tests``/``generated_tests``
(``{"input": [...], "output": [...]}``), ``solutions``/``incorrect_solutions``
(``{"language": [...], "solution": [...]}``, language 3 = Python 3), ``difficulty`` (the dataset's enum).
Public tests are visible; hidden are all three groups, as in AlphaCode's evaluation. The first Python 3
solution is the reference and the first incorrect Python 3 solution the wrong one. Limits: the problems'
own time/memory limits are not carried over (the sandbox's defaults apply), and problems with several
valid outputs need a checker that ``IOTest`` comparisons do not provide.
"""

from __future__ import annotations

from typing import Any

from execrl.sandbox.types import TestCase
from execrl.tasks.importers._common import (
    FUNCTION_INSTRUCTION,
    STDIO_INSTRUCTION,
    call_test,
    candidate_expr,
    difficulty_from,
    fence,
    function_name,
    import_rows,
    io_tests,
    json_field,
)
from execrl.tasks.schema import CodeSpec, Split, Task, TaskMetadata
from execrl.tasks.serialize import FieldReader
from execrl.tasks.storage import PathLike

APPS_DIFFICULTY = {"introductory": 1, "interview": 3, "competition": 5}
# CodeContests Problem.Difficulty enum: 1-5 EASY..HARDEST, 7.. Codeforces letters A, B, C, ...
CODECONTESTS_DIFFICULTY: dict[Any, int] = {0: 3, 1: 1, 2: 3, 3: 4, 4: 5, 5: 5, 6: 3, 7: 1, 8: 2, 9: 3, 10: 4}
CODECONTESTS_DIFFICULTY.update({i: 5 for i in range(11, 30)})
PYTHON3 = 3


def _apps_tests(row: FieldReader, io: dict[str, Any], starter: str) -> tuple[list[TestCase], str | None]:
    inputs, outputs = io.get("inputs"), io.get("outputs")
    if (
        not isinstance(inputs, list)
        or not isinstance(outputs, list)
        or len(inputs) != len(outputs)
        or not inputs
    ):
        row.problems.append(("input_output", "needs non-empty 'inputs' and 'outputs' lists of equal length"))
        return [], None
    fn_name = io.get("fn_name")
    if fn_name is None:
        return list(io_tests("test", inputs, outputs)), None
    if function_name(row, "input_output.fn_name", fn_name) is None:
        return [], None
    candidate = candidate_expr(fn_name, starter)
    tests: list[TestCase] = []
    for i, (args, expected) in enumerate(zip(inputs, outputs, strict=True)):
        if not isinstance(args, list):
            row.problems.append((f"input_output.inputs[{i}]", "expected the list of call arguments"))
            continue
        tests.append(call_test(f"test_{i}", candidate, args, expected, wrapped_ok=True))
    return tests, fn_name


def _apps_row(row: FieldReader, split: Split) -> Task | None:
    problem_id, question = row.get("problem_id", "any"), row.get("question", "str")
    io = json_field(row, "input_output", "object")
    solutions = json_field(row, "solutions", "list", default=[]) or []
    starter = row.get("starter_code", "str", default="") or ""
    difficulty = difficulty_from(row, "difficulty", APPS_DIFFICULTY, default=3)
    if row.problems:
        return None
    tests, fn_name = _apps_tests(row, io, starter)
    if row.problems:
        return None
    if fn_name is None:
        spec, prompt = CodeSpec(kind="stdio"), question.strip() + STDIO_INSTRUCTION
    else:
        entry = "Solution" if "class Solution" in starter else fn_name
        spec = CodeSpec(kind="function", entry_point=entry, starter_code=starter)
        starter_text = f"\n\nStart from:\n{fence(starter)}" if starter.strip() else ""
        prompt = question.strip() + starter_text + FUNCTION_INSTRUCTION
    reference = next((s for s in solutions if isinstance(s, str) and s.strip()), None)
    return Task(
        id=f"apps/{problem_id}",
        domain="code",
        prompt=prompt,
        spec=spec,
        metadata=TaskMetadata(family="apps", difficulty=difficulty, source="apps", split=split),
        visible_tests=(tests[0],),
        hidden_tests=tuple(tests),
        reference_solution=fence(reference) if reference else None,
    )


def import_apps(url: PathLike, *, split: Split | None = None) -> list[Task]:
    """Tasks from an APPS JSONL file (the HF ``codeparrot/apps`` row layout)."""
    return import_rows(url, lambda row: _apps_row(row, split or "train"))


def _test_group(row: FieldReader, key: str, prefix: str) -> list[TestCase]:
    group = row.get(key, "object", default={}) or {}
    inputs, outputs = group.get("input", []), group.get("output", [])
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        row.problems.append((key, "needs 'input' and 'output' lists of equal length"))
        return []
    for i, value in enumerate([*inputs, *outputs]):
        if not isinstance(value, str):
            row.problems.append((f"{key}.{'input' if i < len(inputs) else 'output'}", "expected strings"))
            return []
    return list(io_tests(prefix, inputs, outputs))


def _first_python3(row: FieldReader, key: str) -> str | None:
    group = row.get(key, "object", default={}) or {}
    languages, programs = group.get("language", []), group.get("solution", [])
    if not isinstance(languages, list) or not isinstance(programs, list) or len(languages) != len(programs):
        row.problems.append((key, "needs 'language' and 'solution' lists of equal length"))
        return None
    return next((p for lang, p in zip(languages, programs, strict=True) if lang == PYTHON3), None)


def _codecontests_row(row: FieldReader, split: Split) -> Task | None:
    name, description = row.get("name", "str"), row.get("description", "str")
    public = _test_group(row, "public_tests", "public")
    private = _test_group(row, "private_tests", "private")
    generated = _test_group(row, "generated_tests", "generated")
    reference, wrong = _first_python3(row, "solutions"), _first_python3(row, "incorrect_solutions")
    difficulty = difficulty_from(row, "difficulty", CODECONTESTS_DIFFICULTY, default=3)
    if not (public or private or generated) and not row.problems:
        row.problems.append(("private_tests", "no tests at all (public, private and generated are empty)"))
    if row.problems:
        return None
    return Task(
        id=f"codecontests/{name}",
        domain="code",
        prompt=description.strip() + STDIO_INSTRUCTION,
        spec=CodeSpec(kind="stdio"),
        metadata=TaskMetadata(
            family="codecontests", difficulty=difficulty, source="deepmind/code_contests", split=split
        ),
        visible_tests=tuple(public),
        hidden_tests=(*public, *private, *generated),
        reference_solution=fence(reference) if reference else None,
        wrong_solution=fence(wrong) if wrong else None,
    )


def import_codecontests(url: PathLike, *, split: Split | None = None) -> list[Task]:
    """Tasks from a CodeContests JSONL file (the HF ``deepmind/code_contests`` row layout)."""
    return import_rows(url, lambda row: _codecontests_row(row, split or "train"))
