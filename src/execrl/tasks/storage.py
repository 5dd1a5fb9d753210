"""Reading and writing task files: JSONL from a local path or any fsspec URL, validated row by row.

Every row is validated when loaded. A bad row either fails the whole load (``TaskValidationError``
listing all bad rows with ``file:line: field '...': problem``), or, when the caller passes
``rejects_path``, is written verbatim to that file with its errors and counted in the ``LoadReport``.
Nothing is dropped silently: a load either raises or says how many rows it rejected and where they are.

Files may be JSON Lines (one object per line, ``.gz``/``.bz2``/... decompressed by suffix) or a single
JSON array (SandboxFusion exports); array items are located as ``file[index]``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, overload

from execrl.tasks.errors import FieldError, TaskSourceError, TaskValidationError
from execrl.tasks.schema import Task
from execrl.tasks.serialize import Problem, parse_task, task_to_json

PathLike = str | os.PathLike[str]

# fsspec protocol -> the package that implements it (for a clear "install X" message).
_BACKEND_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
}


@dataclass(frozen=True)
class RawRow:
    """One row of a source file before conversion: where it is, its text, and its parsed JSON value."""

    location: str  # "file:line" or "file[index]"
    text: str  # the row verbatim, for a rejects file
    value: Any = None
    json_error: str | None = None


@dataclass(frozen=True)
class LoadReport:
    """What a load with a rejects file did: ``loaded`` tasks kept, ``rejected`` rows written out."""

    tasks: tuple[Task, ...]
    rejected: int
    rejects_path: str | None
    errors: tuple[FieldError, ...] = ()

    @property
    def loaded(self) -> int:
        return len(self.tasks)


def open_url(url: PathLike, mode: str = "rt") -> IO[Any]:
    """Open a local path or fsspec URL as text, naming the missing package when a backend is absent."""
    import fsspec

    text = os.fspath(url)
    if not text:
        raise TaskSourceError("empty task path; pass a file path or a URL such as s3://bucket/tasks.jsonl")
    protocol = fsspec.utils.get_protocol(text)
    try:
        fsspec.get_filesystem_class(protocol)
    except ImportError as exc:
        package = _BACKEND_PACKAGES.get(protocol, "the fsspec backend for this protocol")
        raise TaskSourceError(
            f"reading {text!r} needs the package {package!r}, which is not installed "
            f"(pip install {package}; for S3 also `pip install 'execrl[s3]'`): {exc}"
        ) from exc
    except ValueError as exc:
        raise TaskSourceError(f"cannot open {text!r}: unknown protocol {protocol!r} ({exc})") from exc
    return fsspec.open(text, mode, encoding="utf-8", compression="infer").open()  # type: ignore[no-any-return]


def _stem_suffix(name: str) -> str:
    """The suffix before any compression suffix: ``tasks.json.gz`` -> ``.json``."""
    parts = name.lower().rsplit("/", 1)[-1].split(".")
    while len(parts) > 1 and parts[-1] in ("gz", "bz2", "xz", "zst", "lz4", "zip"):
        parts.pop()
    return f".{parts[-1]}" if len(parts) > 1 else ""


def iter_raw_rows(url: PathLike) -> Iterator[RawRow]:
    """Rows of a JSONL file or a JSON array file, blank lines skipped, JSON errors kept per row."""
    name = os.fspath(url)
    with open_url(url) as handle:
        content = handle.read()
    items: Any = None
    if content.lstrip().startswith("["):
        try:
            items = json.loads(content)
        except json.JSONDecodeError as exc:
            if _stem_suffix(name) == ".json":  # a JSONL file may start with an array row: read it as lines
                yield RawRow(f"{name}:{exc.lineno}", content, json_error=f"invalid JSON array: {exc.msg}")
                return
    if isinstance(items, list):
        for i, item in enumerate(items):
            yield RawRow(f"{name}[{i}]", json.dumps(item, ensure_ascii=False), value=item)
        return
    for line_no, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield RawRow(f"{name}:{line_no}", line, value=json.loads(line))
        except json.JSONDecodeError as exc:
            yield RawRow(
                f"{name}:{line_no}", line, json_error=f"invalid JSON: {exc.msg} (column {exc.colno})"
            )


Converter = Callable[[Any], tuple[Sequence[Task], list[Problem]]]


def _convert_all(
    rows: Iterable[RawRow], convert: Converter
) -> tuple[list[Task], list[tuple[RawRow, list[FieldError]]]]:
    """Convert every row; returns the good tasks and the bad rows with their errors (ids must be unique)."""
    tasks: list[Task] = []
    bad: list[tuple[RawRow, list[FieldError]]] = []
    first_seen: dict[str, str] = {}
    for row in rows:
        if row.json_error is not None:
            bad.append((row, [FieldError(row.location, "", row.json_error)]))
            continue
        made, problems = convert(row.value)
        errors = [FieldError(row.location, field, message) for field, message in problems]
        for task in made if not errors else ():
            if task.id in first_seen:
                errors.append(
                    FieldError(
                        row.location, "id", f"duplicate id {task.id!r} (first at {first_seen[task.id]})"
                    )
                )
        if errors:
            bad.append((row, errors))
            continue
        for task in made:
            first_seen[task.id] = row.location
        tasks.extend(made)
    return tasks, bad


def _native(value: Any) -> tuple[Sequence[Task], list[Problem]]:
    task, problems = parse_task(value)
    return ([task] if task is not None and not problems else []), problems


def _write_rejects(bad: Sequence[tuple[RawRow, list[FieldError]]], rejects_path: PathLike) -> None:
    with open_url(rejects_path, "wt") as out:
        for row, errors in bad:
            record = {"location": row.location, "errors": [str(e) for e in errors], "row": row.text}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def convert_file(url: PathLike, convert: Converter, *, rejects_path: PathLike | None = None) -> LoadReport:
    """Run ``convert`` on every row of ``url``; raise on bad rows unless ``rejects_path`` is given."""
    tasks, bad = _convert_all(iter_raw_rows(url), convert)
    errors = tuple(e for _, row_errors in bad for e in row_errors)
    if bad and rejects_path is None:
        raise TaskValidationError(errors, source=os.fspath(url))
    if rejects_path is not None:
        _write_rejects(bad, rejects_path)
    where = os.fspath(rejects_path) if rejects_path is not None else None
    return LoadReport(tasks=tuple(tasks), rejected=len(bad), rejects_path=where, errors=errors)


@overload
def load_tasks(url: PathLike, *, rejects_path: None = None) -> list[Task]: ...
@overload
def load_tasks(url: PathLike, *, rejects_path: PathLike) -> LoadReport: ...
def load_tasks(url: PathLike, *, rejects_path: PathLike | None = None) -> list[Task] | LoadReport:
    """Load our JSONL task file from a path or fsspec URL (``file://``, ``memory://``, ``s3://``...).

    Without ``rejects_path`` any bad row raises ``TaskValidationError`` (all bad rows listed) and the
    result is the task list. With it, bad rows go verbatim to that file and a ``LoadReport`` comes back.
    """
    report = convert_file(url, _native, rejects_path=rejects_path)
    return report if rejects_path is not None else list(report.tasks)


def save_tasks(tasks: Iterable[Task], url: PathLike) -> int:
    """Write tasks as JSONL (compressed by suffix, e.g. ``.jsonl.gz``); returns the number written.

    Ids must be unique, as on load; a task that would not load back raises before anything is written.
    """
    from execrl.tasks.serialize import task_problems

    items = list(tasks)
    errors = [FieldError(t.id, f, m) for t in items for f, m in task_problems(t)]
    seen: set[str] = set()
    for task in items:
        if task.id in seen:
            errors.append(FieldError(task.id, "id", "duplicate id"))
        seen.add(task.id)
    if errors:
        raise TaskValidationError(errors, source=f"save_tasks({os.fspath(url)!r})")
    with open_url(url, "wt") as out:
        for task in items:
            out.write(task_to_json(task) + "\n")
    return len(items)
