"""Task <-> plain JSON dict, with every problem of a row reported by field path.

One task is one JSON object (one JSONL line)::

    {"id": "functions/0001", "domain": "code",
     "prompt": "Write ..." | [{"role": "user", "content": "..."}],
     "spec": {"type": "code", "kind": "function", "entry_point": "f", ...}
           | {"type": "math", "answer": "3/4"}
           | {"type": "structured", "json_schema": {...}, "expected_values": {...}},
     "metadata": {"family": "...", "difficulty": 1, "source": "execrl", "split": "train"},
     "visible_tests": [{"type": "code", "name": "t0", "code": "assert f(1) == 2"},
                       {"type": "call", "name": "t1", "entry_point": "f", "args": [1], "expected": 2},
                       {"type": "io", "name": "t2", "stdin": "1\\n", "expected_stdout": "2\\n"}],
     "hidden_tests": [...], "reference_solution": "```python ...```", "wrong_solution": "...",
     "audit_tests": [...],
     "session": {"tools": ["python"], "setup": ["import json"], "files": {"data.csv": "..."},
                 "runtime": "python", "reference_cells": ["print(...)"]}}

``audit_tests`` (held back from reward and prompt, see ``execrl.rewards.audit``) and ``session`` (the tool
session of a tool episode, ``execrl.tools``) are optional and only written when a task has them, so files
of tasks without them are unchanged.

Parsing never stops at the first problem: it collects ``(field, message)`` pairs for the whole row so a
user fixes a file in one pass. Unknown keys are errors (a typo such as ``hiden_tests`` would otherwise
silently drop every hidden test). Tests are parsed by ``execrl.sandbox.service.serialize.build_case``, the same
schema as sandbox requests (one parser: the two used to disagree on whether ``name`` is required); a test's
``name`` may be omitted and defaults to ``test_<index>``. JSON has no tuples, so ``CallTest.args`` comes back as a tuple and
``expected`` as a list; the sandbox compares lists and tuples as equal.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, get_args

from execrl.sandbox.types import CallTest, CodeTest, IOTest, TestCase
from execrl.tasks.errors import FieldError, TaskValidationError
from execrl.tasks.schema import (
    ChatMessage,
    CodeKind,
    CodeSpec,
    MathSpec,
    Role,
    SessionSpec,
    Split,
    StructuredSpec,
    Task,
    TaskMetadata,
    VerifierSpec,
)

Problem = tuple[str, str]  # (field path, message)

TEST_TYPES: dict[str, type] = {"code": CodeTest, "call": CallTest, "io": IOTest}
SPEC_TYPES: dict[str, type] = {"code": CodeSpec, "math": MathSpec, "structured": StructuredSpec}
_TYPE_OF_TEST = {cls: tag for tag, cls in TEST_TYPES.items()}
_TYPE_OF_SPEC = {cls: tag for tag, cls in SPEC_TYPES.items()}
TASK_KEYS = tuple(f.name for f in fields(Task))


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_kind(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "list":
        return isinstance(value, list | tuple)
    return True  # "any"


class FieldReader:
    """Reads typed fields from one JSON object, recording problems under a path prefix."""

    def __init__(self, data: Mapping[str, Any], path: str, problems: list[Problem]) -> None:
        self.data, self.path, self.problems = data, path, problems

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, kind: str, *, default: Any = ..., nullable: bool = False) -> Any:
        if key not in self.data:
            if default is ...:
                self.problems.append((self.where(key), "missing"))
                return None
            return default
        value = self.data[key]
        if value is None and nullable:
            return None
        if not _is_kind(value, kind):
            self.problems.append((self.where(key), f"expected {kind}, got {_type_name(value)}"))
            return None
        return value

    def choice(self, key: str, allowed: tuple[str, ...], *, default: Any = ...) -> Any:
        value = self.get(key, "str", default=default)
        if isinstance(value, str) and value not in allowed:
            self.problems.append((self.where(key), f"must be one of {list(allowed)}, got {value!r}"))
            return None
        return value

    def no_unknown(self, known: tuple[str, ...]) -> None:
        for key in self.data:
            if key not in known:
                self.problems.append((self.where(key), f"unknown field (known: {', '.join(known)})"))


def _object(value: Any, path: str, problems: list[Problem]) -> FieldReader | None:
    if not isinstance(value, Mapping):
        problems.append((path, f"expected object, got {_type_name(value)}"))
        return None
    return FieldReader(value, path, problems)


def _parse_test(value: Any, path: str, index: int, problems: list[Problem]) -> TestCase | None:
    """One test through the sandbox's schema (the only parser of test cases), its errors worded for files.

    A test's ``name`` defaults to ``test_<index>`` (its place in its list), as in sandbox requests.
    """
    from pydantic import ValidationError  # lazy: importing pydantic costs ~0.2 s of `import execrl.tasks`

    from execrl.sandbox.service.serialize import build_case, find_unencodable

    bad = find_unencodable(value, path)
    if bad is not None:
        problems.append((bad, "string is not valid Unicode (lone surrogate)"))
        return None
    try:
        return build_case(value, index=index)
    except ValidationError as exc:
        problems += [_worded(dict(err), value, path) for err in exc.errors(include_url=False)]
        return None


_PYDANTIC_KINDS = {
    "string_type": "str",
    "int_type": "int",
    "float_type": "float",
    "bool_type": "bool",
    "list_type": "list",
    "dict_type": "object",
}


def _worded(err: dict[str, Any], value: Any, path: str) -> Problem:
    """A pydantic error on one test as a task-file problem (``missing``, ``expected str, got int``...)."""
    from execrl.sandbox.service.serialize import CASE_MODELS

    kind, got, loc = err["type"], err.get("input"), err["loc"]
    if kind == "model_attributes_type":
        return path, f"expected object, got {_type_name(got)}"
    if kind == "union_tag_not_found":
        return f"{path}.type", "missing"
    if kind == "union_tag_invalid":
        return f"{path}.type", f"must be one of {list(CASE_MODELS)}, got {value['type']!r}"
    field = path + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:])
    model_fields = CASE_MODELS[loc[0]].model_fields  # loc[0] is the union member's tag
    if kind == "missing":
        return field, "missing"
    if kind == "extra_forbidden":
        return field, f"unknown field (known: {', '.join(model_fields)})"
    if loc[-1] in ("rel_tol", "abs_tol"):
        return field, f"must be a finite number >= 0, got {got!r}"
    if kind in _PYDANTIC_KINDS:
        return field, f"expected {_PYDANTIC_KINDS[kind]}, got {_type_name(got)}"
    if kind == "literal_error":
        return field, f"must be one of {list(get_args(model_fields[loc[-1]].annotation))}, got {got!r}"
    return field, str(err["msg"])


def _parse_tests(row: FieldReader, key: str) -> tuple[TestCase, ...]:
    items = row.get(key, "list", default=[]) or []
    parsed = [_parse_test(item, f"{key}[{i}]", i, row.problems) for i, item in enumerate(items)]
    return tuple(t for t in parsed if t is not None)


def _parse_spec(value: Any, problems: list[Problem]) -> VerifierSpec | None:
    row = _object(value, "spec", problems)
    if row is None:
        return None
    tag = row.choice("type", tuple(SPEC_TYPES))
    if tag is None:
        return None
    row.no_unknown(("type", *(f.name for f in fields(SPEC_TYPES[tag]))))
    before = len(problems)
    if tag == "math":
        spec: VerifierSpec = MathSpec(answer=row.get("answer", "str"))
    elif tag == "structured":
        spec = StructuredSpec(
            json_schema=row.get("json_schema", "object"),
            expected_values=dict(row.get("expected_values", "object", default={}) or {}),
        )
    else:
        files = row.get("files", "object", default={}) or {}
        for path, text in files.items():
            if not isinstance(text, str):
                problems.append((f"spec.files.{path}", f"expected str, got {_type_name(text)}"))
        spec = CodeSpec(
            kind=row.choice("kind", get_args(CodeKind)),
            language=row.get("language", "str", default="python"),
            entry_point=row.get("entry_point", "str", default=None, nullable=True),
            prompt_code=row.get("prompt_code", "str", default=""),
            files=dict(files),
            program_path=row.get("program_path", "str", default=None, nullable=True),
            starter_code=row.get("starter_code", "str", default=""),
        )
    return spec if len(problems) == before else None


def _parse_prompt(value: Any, problems: list[Problem]) -> str | tuple[ChatMessage, ...] | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple):
        problems.append(("prompt", f"expected str or list of messages, got {_type_name(value)}"))
        return None
    messages = []
    for i, item in enumerate(value):
        row = _object(item, f"prompt[{i}]", problems)
        if row is None:
            continue
        row.no_unknown(("role", "content"))
        role, content = row.choice("role", get_args(Role)), row.get("content", "str")
        if role is not None and content is not None:
            messages.append(ChatMessage(role=role, content=content))
    return tuple(messages)


def _parse_metadata(value: Any, problems: list[Problem]) -> TaskMetadata | None:
    row = _object(value, "metadata", problems)
    if row is None:
        return None
    row.no_unknown(tuple(f.name for f in fields(TaskMetadata)))
    before = len(problems)
    difficulty = row.get("difficulty", "int", default=1)
    if isinstance(difficulty, int) and not 1 <= difficulty <= 5:
        problems.append(("metadata.difficulty", f"must be in 1..5, got {difficulty}"))
    meta = TaskMetadata(
        family=row.get("family", "str"),
        difficulty=difficulty,
        source=row.get("source", "str", default="execrl"),
        split=row.choice("split", get_args(Split), default="train"),
    )
    return meta if len(problems) == before else None


def _strings(row: FieldReader, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    items = row.get(key, "list", default=list(default)) or []
    bad = [i for i, item in enumerate(items) if not isinstance(item, str)]
    for i in bad:
        row.problems.append((f"{row.where(key)}[{i}]", f"expected str, got {_type_name(items[i])}"))
    return tuple(items) if not bad else default


def _parse_session(value: Any, problems: list[Problem]) -> SessionSpec | None:
    row = _object(value, "session", problems)
    if row is None:
        return None
    row.no_unknown(tuple(f.name for f in fields(SessionSpec)))
    before = len(problems)
    files = row.get("files", "object", default={}) or {}
    for path, text in files.items():
        if not isinstance(text, str):
            problems.append((f"session.files.{path}", f"expected str, got {_type_name(text)}"))
    spec = SessionSpec(
        tools=_strings(row, "tools", SessionSpec.tools),
        setup=_strings(row, "setup", ()),
        files=dict(files),
        runtime=row.get("runtime", "str", default="python"),
        reference_cells=_strings(row, "reference_cells", ()),
    )
    return spec if len(problems) == before else None


def _session_problems(spec: SessionSpec) -> list[Problem]:
    from execrl.sandbox.types import work_path_problems

    problems: list[Problem] = []
    if not spec.tools or any(not name.strip() for name in spec.tools):
        problems.append(("session.tools", "must list at least one tool name, none empty"))
    if len(set(spec.tools)) != len(spec.tools):
        problems.append(("session.tools", f"lists a tool twice: {list(spec.tools)}"))
    problems += [(f"session.{name}", why) for name, why in work_path_problems(list(spec.files), None)]
    if spec.runtime not in ("python", "python-data"):
        problems.append(("session.runtime", f"must be 'python' or 'python-data', got {spec.runtime!r}"))
    return problems


def parse_task(data: Any) -> tuple[Task | None, list[Problem]]:
    """Build a ``Task`` from a JSON value; returns ``(task or None, every problem found)``."""
    problems: list[Problem] = []
    row = _object(data, "", problems)
    if row is None:
        return None, problems
    row.no_unknown(TASK_KEYS)
    task_id = row.get("id", "str")
    if isinstance(task_id, str) and not task_id.strip():
        problems.append(("id", "empty"))
    domain = row.get("domain", "str")
    data = row.data
    prompt = _parse_prompt(data["prompt"], problems) if "prompt" in data else row.get("prompt", "str")
    spec = _parse_spec(data["spec"], problems) if "spec" in data else row.get("spec", "object")
    meta = (
        _parse_metadata(data["metadata"], problems) if "metadata" in data else row.get("metadata", "object")
    )
    visible, hidden = _parse_tests(row, "visible_tests"), _parse_tests(row, "hidden_tests")
    reference = row.get("reference_solution", "str", default=None, nullable=True)
    wrong = row.get("wrong_solution", "str", default=None, nullable=True)
    audit = _parse_tests(row, "audit_tests")
    session = _parse_session(data["session"], problems) if data.get("session") is not None else None
    if problems:
        return None, problems
    task = Task(task_id, domain, prompt, spec, meta, visible, hidden, reference, wrong, audit, session)  # type: ignore[arg-type]
    return task, task_problems(task)


def identifier_problem(name: object) -> str | None:
    """Why ``name`` cannot be pasted into generated code as a Python name, or None when it can.

    Guards against a row whose "function name" is an expression (``f() or 1 == 1``): pasted into a test
    it would make any completion pass. Keywords are refused too (``class`` is an identifier to Python's
    tokenizer but not a name a program can define).
    """
    if not isinstance(name, str):
        return f"expected a Python identifier, got {_type_name(name)}"
    if not name.isidentifier() or keyword.iskeyword(name):
        return f"must be a Python identifier (letters, digits, '_', not a keyword), got {name[:80]!r}"
    return None


def _test_problems(task: Task) -> list[Problem]:
    problems: list[Problem] = []
    for key in ("visible_tests", "hidden_tests", "audit_tests"):
        names = [t.name for t in getattr(task, key)]
        for i, test in enumerate(getattr(task, key)):
            if test.name in names[:i]:
                problems.append((f"{key}[{i}].name", f"duplicate test name {test.name!r}"))
            if isinstance(test, CallTest) and (why := identifier_problem(test.entry_point)):
                problems.append((f"{key}[{i}].entry_point", why))
            _parse_test(_test_to_dict(test), f"{key}[{i}]", i, problems)  # would it load back?
    return problems


def task_problems(task: Task) -> list[Problem]:
    """Consistency checks across fields (a well-typed task can still be unusable)."""
    problems: list[Problem] = []
    spec = task.spec
    expected = {"code": CodeSpec, "math": MathSpec, "structured": StructuredSpec}.get(task.domain)
    if expected is not None and not isinstance(spec, expected):
        problems.append(("spec.type", f"domain {task.domain!r} needs spec type {_TYPE_OF_SPEC[expected]!r}"))
    if isinstance(spec, CodeSpec):
        if spec.kind == "function" and not spec.entry_point:
            problems.append(("spec.entry_point", "missing (required for kind 'function')"))
        elif spec.entry_point is not None and (why := identifier_problem(spec.entry_point)):
            problems.append(("spec.entry_point", why))
        if spec.kind == "repository" and not spec.program_path:
            problems.append(("spec.program_path", "missing (required for kind 'repository')"))
        if not task.hidden_tests:
            problems.append(
                ("hidden_tests", "empty: a code task needs at least one hidden test to be scored")
            )
    if isinstance(task.prompt, tuple) and not task.prompt:
        problems.append(("prompt", "empty message list"))
    shown_or_scored = [*task.visible_tests, *task.hidden_tests]  # a list: tests hold dicts, unhashable
    for i, test in enumerate(task.audit_tests):
        if test in shown_or_scored:
            problems.append(
                (f"audit_tests[{i}]", "repeats a visible or hidden test; audit tests must be held back")
            )
    if task.session is not None:
        problems += _session_problems(task.session)
    return problems + _test_problems(task)


def validate_task(task: Task) -> None:
    """Raise ``TaskValidationError`` if ``task`` would not load back (suites call this on what they build)."""
    _, problems = parse_task(task_to_dict(task))
    if problems:
        raise TaskValidationError([FieldError(task.id, f, m) for f, m in problems])


def task_from_dict(data: Mapping[str, Any], *, location: str = "<dict>") -> Task:
    """Inverse of ``task_to_dict``; raises ``TaskValidationError`` listing every problem of the row."""
    task, problems = parse_task(data)
    if problems or task is None:
        raise TaskValidationError([FieldError(location, f, m) for f, m in problems])
    return task


def _test_to_dict(test: TestCase) -> dict[str, Any]:
    return {"type": _TYPE_OF_TEST[type(test)], **_plain(asdict(test))}


def _plain(value: Any) -> Any:
    """Tuples -> lists and mappings -> dicts, recursively, so the result is JSON-ready."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def task_to_dict(task: Task) -> dict[str, Any]:
    """The JSON-ready dict of one task (see the module docstring for the layout)."""
    prompt: Any = task.prompt
    if isinstance(prompt, tuple):
        prompt = [{"role": m.role, "content": m.content} for m in prompt]
    return {
        "id": task.id,
        "domain": task.domain,
        "prompt": prompt,
        "spec": {"type": _TYPE_OF_SPEC[type(task.spec)], **_plain(asdict(task.spec))},
        "metadata": asdict(task.metadata),
        "visible_tests": [_test_to_dict(t) for t in task.visible_tests],
        "hidden_tests": [_test_to_dict(t) for t in task.hidden_tests],
        "reference_solution": task.reference_solution,
        "wrong_solution": task.wrong_solution,
        **({"audit_tests": [_test_to_dict(t) for t in task.audit_tests]} if task.audit_tests else {}),
        **({"session": _plain(asdict(task.session))} if task.session is not None else {}),
    }


def task_to_json(task: Task) -> str:
    """One JSONL line (no trailing newline); non-ASCII kept as is."""
    return json.dumps(task_to_dict(task), ensure_ascii=False)
