"""LiveCodeBench (Jain et al. 2024) code-generation rows -> code tasks.

Rows: ``question_id``, ``question_title``, ``question_content``, ``platform``, ``contest_date``,
``starter_code``, ``difficulty`` (easy/medium/hard), ``public_test_cases`` and ``private_test_cases``
(JSON text: a list of ``{"input", "output", "testtype": "stdin"|"functional"}``) and ``metadata`` (JSON
text; ``func_name`` for functional problems). A functional case's input holds one JSON value per line,
one per argument; its output one JSON value. Public cases are visible; public and private are hidden.

The released dataset stores most private cases as base64(zlib(pickle(json))). That form is refused:
``pickle.loads`` on downloaded data runs whatever code the file says, so it is not a format we read.
Decode it once yourself, in an environment you trust, to the JSON list form.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from execrl.inputs import json_value
from execrl.sandbox.types import IOTest, TestCase
from execrl.tasks.importers._common import (
    FUNCTION_INSTRUCTION,
    STDIO_INSTRUCTION,
    call_test,
    candidate_expr,
    difficulty_from,
    fence,
    function_name,
    import_rows,
    json_field,
)
from execrl.tasks.schema import CodeSpec, Split, Task, TaskMetadata
from execrl.tasks.serialize import FieldReader
from execrl.tasks.storage import PathLike

LCB_DIFFICULTY = {"easy": 1, "medium": 3, "hard": 5}
COMPRESSED_REFUSED = (
    "compressed form (base64+zlib+pickle) is not supported: unpickling downloaded data can run arbitrary "
    "code. Decode it once in a trusted environment and store the JSON list of "
    '{"input", "output", "testtype"} objects instead'
)


def _looks_compressed(text: str) -> bool:
    """True for base64 text that decodes to a zlib stream (checked by its header, never decompressed)."""
    try:
        head = base64.b64decode(text.strip()[:16] + "=" * (-len(text.strip()[:16]) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0


def _cases(row: FieldReader, key: str) -> list[Any]:
    raw = row.data.get(key)
    if isinstance(raw, str) and raw.strip() and not raw.lstrip().startswith("[") and _looks_compressed(raw):
        row.problems.append((key, COMPRESSED_REFUSED))
        return []
    return list(json_field(row, key, "list", default=[]) or [])


def _case_test(row: FieldReader, path: str, case: Any, name: str, candidate: str | None) -> TestCase | None:
    if (
        not isinstance(case, dict)
        or not isinstance(case.get("input"), str)
        or not isinstance(case.get("output"), str)
    ):
        row.problems.append((path, "expected {'input': str, 'output': str, 'testtype': ...}"))
        return None
    kind = case.get("testtype", "stdin")
    if kind == "stdin":
        return IOTest(name=name, stdin=case["input"], expected_stdout=case["output"])
    if kind != "functional":
        row.problems.append((f"{path}.testtype", f"must be 'stdin' or 'functional', got {kind!r}"))
        return None
    if candidate is None:
        row.problems.append(("metadata.func_name", "missing (required by functional test cases)"))
        return None
    try:
        args = [json_value(line) for line in case["input"].split("\n") if line.strip()]
        expected = json_value(case["output"])
    except ValueError as exc:
        row.problems.append((path, f"functional case is not one JSON value per line: {exc}"))
        return None
    return call_test(name, candidate, args, expected)


def _lcb_row(row: FieldReader, split: Split) -> Task | None:
    question_id, content = row.get("question_id", "any"), row.get("question_content", "str")
    starter = row.get("starter_code", "str", default="") or ""
    meta = json_field(row, "metadata", "object", default={}) or {}
    difficulty = difficulty_from(row, "difficulty", LCB_DIFFICULTY, default=3)
    public, private = _cases(row, "public_test_cases"), _cases(row, "private_test_cases")
    if row.problems:
        return None
    func_name = meta.get("func_name")
    if func_name is not None and function_name(row, "metadata.func_name", func_name) is None:
        return None
    candidate = candidate_expr(func_name, starter) if func_name is not None else None
    groups = (("public_test_cases", "public", public), ("private_test_cases", "private", private))
    made = {
        prefix: [_case_test(row, f"{key}[{i}]", c, f"{prefix}_{i}", candidate) for i, c in enumerate(cases)]
        for key, prefix, cases in groups
    }
    if row.problems:
        return None
    visible = [t for t in made["public"] if t is not None]
    hidden = visible + [t for t in made["private"] if t is not None]
    if candidate is None:
        spec, prompt = CodeSpec(kind="stdio"), content.strip() + STDIO_INSTRUCTION
    else:
        entry = "Solution" if "class Solution" in starter else str(func_name)
        spec = CodeSpec(kind="function", entry_point=entry, starter_code=starter)
        prompt = (
            content.strip()
            + (f"\n\nStart from:\n{fence(starter)}" if starter.strip() else "")
            + FUNCTION_INSTRUCTION
        )
    return Task(
        id=f"livecodebench/{question_id}",
        domain="code",
        prompt=prompt,
        spec=spec,
        metadata=TaskMetadata(
            family="livecodebench", difficulty=difficulty, source="livecodebench", split=split
        ),
        visible_tests=tuple(visible),
        hidden_tests=tuple(hidden),
    )


def import_livecodebench(url: PathLike, *, split: Split | None = None) -> list[Task]:
    """Tasks from a LiveCodeBench ``code_generation_lite`` JSONL file (private cases in JSON form)."""
    return import_rows(url, lambda row: _lcb_row(row, split or "test"))
