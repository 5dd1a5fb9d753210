"""MBPP (Austin et al. 2021) and MBPP+ (EvalPlus, Liu et al. 2023) rows -> function tasks.

MBPP rows: ``task_id``, ``text``, ``code``, ``test_list`` (assert strings), ``test_setup_code``,
optionally ``challenge_test_list``. The first assert is visible and shown in the prompt (it is the only
way the model learns the function's name and argument order, as in the original protocol); every assert
is a hidden test. The split follows the paper's id ranges: 11-510 is ``test``, the rest ``train``.

MBPP+ rows: ``task_id``, ``prompt`` (a docstring holding the task and one example assert),
``canonical_solution``, ``entry_point``, ``base_input``/``plus_input``, ``atol`` and ``test``: the
harness with the expected results. The expected outputs are NOT in ``base_input``/``plus_input`` (EvalPlus
computes them by running the canonical solution), so a row without ``test`` cannot be verified and is an
error rather than a task with inputs but no answers.
"""

from __future__ import annotations

import ast

from execrl.sandbox.types import CodeTest
from execrl.tasks.importers._common import FUNCTION_INSTRUCTION, fence, function_name, import_rows
from execrl.tasks.schema import CodeSpec, Split, Task, TaskMetadata
from execrl.tasks.serialize import FieldReader
from execrl.tasks.storage import PathLike


def _defined_functions(code: str) -> list[str]:
    return [n.name for n in ast.walk(ast.parse(code)) if isinstance(n, ast.FunctionDef)]


def _called_names(test: str) -> list[str]:
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return []
    return [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def _entry_point(row: FieldReader, code: str, tests: list[str]) -> str | None:
    try:
        defined = _defined_functions(code)
    except SyntaxError as exc:
        row.problems.append((row.where("code"), f"not valid Python: {exc.msg} (line {exc.lineno})"))
        return None
    for test in tests:
        for name in _called_names(test):
            if name in defined:
                return name
    row.problems.append(("test_list", f"no assert calls a function defined in 'code' ({defined})"))
    return None


def _mbpp_row(row: FieldReader, split: Split | None) -> Task | None:
    task_id = row.get("task_id", "any")
    text, code = row.get("text", "str"), row.get("code", "str")
    tests = row.get("test_list", "list")
    setup = row.get("test_setup_code", "str", default="") or ""
    challenge = row.get("challenge_test_list", "list", default=[]) or []
    if tests is not None and not tests:
        row.problems.append(("test_list", "empty"))
    if row.problems:
        return None
    for i, test in enumerate([*tests, *challenge]):
        if not isinstance(test, str):
            row.problems.append((f"test_list[{i}]", f"expected str, got {type(test).__name__}"))
    entry_point = _entry_point(row, code, tests) if not row.problems else None
    if entry_point is None:
        return None
    prefix = f"{setup.strip()}\n" if setup.strip() else ""
    hidden = [CodeTest(f"test_{i}", prefix + t) for i, t in enumerate([*tests, *challenge])]
    prompt = f"{text.strip()}\nYour code should pass this test:\n\n{tests[0]}{FUNCTION_INSTRUCTION}"
    number = int(task_id) if str(task_id).isdigit() else -1
    return Task(
        id=f"mbpp/{task_id}",
        domain="code",
        prompt=prompt,
        spec=CodeSpec(kind="function", entry_point=entry_point),
        metadata=TaskMetadata(
            family="mbpp",
            difficulty=1,
            source="mbpp",
            split=split or ("test" if 11 <= number <= 510 else "train"),
        ),
        visible_tests=(CodeTest("visible_0", prefix + tests[0]),),
        hidden_tests=tuple(hidden),
        reference_solution=fence(code),
    )


def import_mbpp(url: PathLike, *, split: Split | None = None) -> list[Task]:
    """Tasks from an MBPP JSONL file (Google's ``mbpp.jsonl`` layout); ``split`` overrides the id ranges."""
    return import_rows(url, lambda row: _mbpp_row(row, split))


_NO_TEST = (
    "missing: MBPP+ rows need the 'test' harness with expected results "
    "(base_input/plus_input hold inputs only; EvalPlus computes outputs from canonical_solution)"
)


def _docstring_text(prompt: str) -> str:
    text = prompt.strip()
    for quote in ('"""', "'''"):
        if text.startswith(quote) and text.endswith(quote) and len(text) >= 6:
            return text[3:-3].strip()
    return text


def _mbpp_plus_row(row: FieldReader, split: Split) -> Task | None:
    task_id, prompt = row.get("task_id", "str"), row.get("prompt", "str")
    solution, entry_point = row.get("canonical_solution", "str"), row.get("entry_point", "str")
    test = row.get("test", "str", default=None)
    if "test" not in row.data:
        row.problems.append(("test", _NO_TEST))
    imports = row.get("test_imports", "list", default=[]) or []
    row.get("base_input", "list", default=[])
    row.get("plus_input", "list", default=[])
    if row.problems or function_name(row, "entry_point", entry_point) is None:
        return None
    header = "".join(f"{line}\n" for line in imports)
    statement = _docstring_text(prompt)
    examples = [line.strip() for line in statement.splitlines() if line.strip().startswith("assert ")]
    if not examples:
        row.problems.append(("prompt", "no example 'assert' line to show the function's signature"))
        return None
    harness = test if "def check(" not in test else f"{test}\ncheck({entry_point})\n"
    return Task(
        id=f"mbpp_plus/{task_id.split('/')[-1]}",
        domain="code",
        prompt=statement + FUNCTION_INSTRUCTION,
        spec=CodeSpec(kind="function", entry_point=entry_point),
        metadata=TaskMetadata(family="mbpp_plus", difficulty=1, source="evalplus/mbppplus", split=split),
        visible_tests=tuple(CodeTest(f"visible_{i}", header + e) for i, e in enumerate(examples)),
        hidden_tests=(CodeTest("plus", header + harness),),
        reference_solution=fence(solution),
    )


def import_mbpp_plus(url: PathLike, *, split: Split | None = None) -> list[Task]:
    """Tasks from an EvalPlus MBPP+ JSONL file (``MbppPlus.jsonl``); ``test`` split unless given."""
    return import_rows(url, lambda row: _mbpp_plus_row(row, split or "test"))
