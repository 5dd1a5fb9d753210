"""Tasks as a Hugging Face ``datasets`` table, and back.

Arrow needs one type per column, but a task's tests mix three shapes and its spec three more. Scalars stay
scalar columns (``id``, ``domain``, ``family``, ``difficulty``, ``source``, ``split``, solutions, plain-text
``prompt``) so a table can be filtered and inspected in the HF viewer; nested fields are JSON strings
(``spec``, ``visible_tests``, ``hidden_tests``, ``audit_tests``, ``prompt_messages``, ``session``: ``null``
for a task without a tool session; a table without the column loads). ``from_hf_dataset`` validates
every row exactly like ``load_tasks`` (locations are ``<dataset>[row]``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from execrl.inputs import json_value
from execrl.tasks.errors import FieldError, TaskValidationError
from execrl.tasks.schema import Task
from execrl.tasks.serialize import parse_task, task_to_dict

if TYPE_CHECKING:
    import datasets

JSON_COLUMNS = ("spec", "visible_tests", "hidden_tests", "audit_tests")
META_COLUMNS = ("family", "difficulty", "source", "split")


def _row(task: Task) -> dict[str, Any]:
    data = task_to_dict(task)
    prompt = data.pop("prompt")
    meta = data.pop("metadata")
    row: dict[str, Any] = {key: json.dumps(data.get(key, []), ensure_ascii=False) for key in JSON_COLUMNS}
    row.update(
        session=json.dumps(data.get("session"), ensure_ascii=False),
        id=data["id"],
        domain=data["domain"],
        prompt=prompt if isinstance(prompt, str) else "",
        prompt_messages=json.dumps(prompt, ensure_ascii=False) if not isinstance(prompt, str) else "",
        reference_solution=data["reference_solution"],
        wrong_solution=data["wrong_solution"],
        **{key: meta[key] for key in META_COLUMNS},
    )
    return row


def to_hf_dataset(tasks: Iterable[Task]) -> datasets.Dataset:
    """A ``datasets.Dataset`` with one row per task (see the module docstring for the columns)."""
    import datasets

    rows = [_row(task) for task in tasks]
    columns = (
        "id",
        "domain",
        "prompt",
        "prompt_messages",
        *JSON_COLUMNS,
        "reference_solution",
        "wrong_solution",
        "session",
    )
    features = datasets.Features(
        {name: datasets.Value("string") for name in columns}
        | {"family": datasets.Value("string"), "difficulty": datasets.Value("int32")}
        | {"source": datasets.Value("string"), "split": datasets.Value("string")}
    )
    return datasets.Dataset.from_list(rows, features=features)


def _decode_row(row: Mapping[str, Any], problems: list[tuple[str, str]]) -> dict[str, Any]:
    data: dict[str, Any] = {"id": row.get("id"), "domain": row.get("domain")}
    for key in JSON_COLUMNS + ("prompt_messages",):
        text = row.get(key) or ""
        if key == "prompt_messages" and not text:
            continue
        try:
            data[key] = json_value(text) if text else []
        except ValueError as exc:
            problems.append((key, str(exc)))
    if row.get("session"):
        try:
            data["session"] = json_value(row["session"])
        except ValueError as exc:
            problems.append(("session", str(exc)))
    data["prompt"] = data.pop("prompt_messages", row.get("prompt"))
    data["metadata"] = {key: row.get(key) for key in META_COLUMNS if row.get(key) is not None}
    data["reference_solution"] = row.get("reference_solution")
    data["wrong_solution"] = row.get("wrong_solution")
    return data


def from_hf_dataset(dataset: Iterable[Mapping[str, Any]], *, name: str = "<dataset>") -> list[Task]:
    """Tasks from a table written by ``to_hf_dataset``; raises ``TaskValidationError`` on any bad row."""
    tasks: list[Task] = []
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index, row in enumerate(dataset):
        location = f"{name}[{index}]"
        problems: list[tuple[str, str]] = []
        data = _decode_row(row, problems)
        task, more = parse_task(data) if not problems else (None, [])
        problems.extend(more)
        if task is not None and not problems and task.id in seen:
            problems.append(("id", f"duplicate id {task.id!r}"))
        errors.extend(FieldError(location, field, message) for field, message in problems)
        if task is not None and not problems:
            seen.add(task.id)
            tasks.append(task)
    if errors:
        raise TaskValidationError(errors, source=name)
    return tasks
