"""Reading and writing task files: JSONL from a local path or any fsspec URL, validated row by row.

Every row is validated when loaded. A bad row either fails the whole load (``TaskValidationError``
listing the bad rows with ``file:line: field '...': problem``; reading stops at the
``MAX_BAD_ROWS``-th), or, when the caller passes ``rejects_path``, is written verbatim to that file with
its errors and counted in the ``LoadReport``. Nothing is dropped silently: a load either raises or says
how many rows it rejected and where they are.

Files may be JSON Lines (one object per line, ``.gz``/``.bz2``/... decompressed by suffix), streamed in
1 MiB chunks with caps on one line and on the decompressed total (``execrl.inputs.ReadLimits``: a 2 GiB
gzip bomb fails at the first cap with ~100 MB resident), or, for a ``.json`` file whose first character
is ``[``, a single JSON array (SandboxFusion exports; read whole within ``max_document_bytes``), whose
items are located as ``file[index]``. A ``.jsonl`` file is always read as lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, overload

from execrl.inputs import (
    DEFAULT_LIMITS,
    BinaryReader,
    InputFileError,
    ReadLimits,
    iter_lines,
    json_value,
    read_capped,
    read_chunk,
)
from execrl.tasks.errors import FieldError, TaskFileNotFoundError, TaskSourceError, TaskValidationError
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
    """Open a local path or fsspec URL (``rt``/``wt`` as UTF-8 text, ``rb`` as bytes), decompressing by
    suffix, naming the missing package when a backend is absent and the path when it cannot be opened."""
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
    encoding = None if "b" in mode else "utf-8"
    if protocol in ("file", "local") and "r" in mode:
        _refuse_special_file(text)
    try:
        return fsspec.open(text, mode, encoding=encoding, compression="infer").open()  # type: ignore[no-any-return]
    except IsADirectoryError:
        raise TaskSourceError(f"{text}: is a directory, expected a task file") from None
    except FileNotFoundError:
        raise TaskFileNotFoundError(f"{text}: no such task file") from None
    except OSError as exc:
        raise TaskSourceError(f"{text}: cannot open ({exc.strerror or exc})") from None


def _refuse_special_file(text: str) -> None:
    """A FIFO, socket or device in place of a task file would block or never end: refuse it by name."""
    try:
        mode = os.stat(text.removeprefix("file://")).st_mode
    except OSError:
        return  # missing or unreadable: opening it reports that
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise TaskSourceError(f"{text}: not a regular file (a FIFO, socket or device), expected a task file")


def _stem_suffix(name: str) -> str:
    """The suffix before any compression suffix: ``tasks.json.gz`` -> ``.json``."""
    parts = name.lower().rsplit("/", 1)[-1].split(".")
    while len(parts) > 1 and parts[-1] in ("gz", "bz2", "xz", "zst", "lz4", "zip"):
        parts.pop()
    return f".{parts[-1]}" if len(parts) > 1 else ""


class _Prefixed:
    """A binary stream whose first bytes were read ahead (to tell a JSON array from JSON Lines)."""

    def __init__(self, handle: IO[bytes], name: str) -> None:
        self._handle = handle
        self.head = read_chunk(handle, 4096, name, 1)
        self._pos = 0

    def read(self, size: int = -1) -> bytes:
        if self._pos < len(self.head):
            end = len(self.head) if size < 0 else self._pos + size
            out, self._pos = self.head[self._pos : end], min(end, len(self.head))
            return out
        return self._handle.read(size)


def _row(location: str, text: str, max_depth: int) -> RawRow:
    try:
        return RawRow(location, text, value=json_value(text, max_depth))
    except ValueError as exc:
        return RawRow(location, text, json_error=str(exc))


def _array_rows(name: str, handle: BinaryReader, limits: ReadLimits) -> Iterator[RawRow]:
    """Items of a JSON array file (read whole, within ``max_document_bytes``), located as ``file[i]``."""
    content = read_capped(handle, name, limits.max_document_bytes)
    row = _row(f"{name}:1", content, limits.max_json_depth)
    if not isinstance(row.value, list):
        yield RawRow(row.location, content[:2000], json_error=f"invalid JSON array: {row.json_error}")
        return
    for i, item in enumerate(row.value):
        yield RawRow(f"{name}[{i}]", json.dumps(item, ensure_ascii=False), value=item)


def iter_raw_rows(url: PathLike, *, limits: ReadLimits = DEFAULT_LIMITS) -> Iterator[RawRow]:
    """Rows of a JSONL file (streamed line by line) or of a ``.json`` file holding one JSON array.

    Blank lines are skipped; a line that is not JSON, or nests deeper than ``limits.max_json_depth``,
    becomes a row with its ``json_error``. A file that is not UTF-8 text, is binary, or exceeds a cap of
    ``limits`` raises ``TaskSourceError`` naming the file and line (see ``execrl.inputs``).
    """
    name = os.fspath(url)
    with open_url(url, "rb") as handle:
        try:
            stream = _Prefixed(handle, name)
            if _stem_suffix(name) == ".json" and stream.head.lstrip()[:1] == b"[":
                yield from _array_rows(name, stream, limits)
                return
            for line_no, line in iter_lines(stream, name, limits):
                yield _row(f"{name}:{line_no}", line, limits.max_json_depth)
        except InputFileError as exc:
            raise TaskSourceError(str(exc)) from None


Converter = Callable[[Any], tuple[Sequence[Task], list[Problem]]]


MAX_BAD_ROWS = 1000  # without a rejects file, reading stops here: the error lists the first ones
BadRow = tuple[RawRow, list[FieldError]]


def _row_errors(
    row: RawRow, convert: Converter, first_seen: dict[str, str]
) -> tuple[Sequence[Task], list[FieldError]]:
    if row.json_error is not None:
        return [], [FieldError(row.location, "", row.json_error)]
    made, problems = convert(row.value)
    errors = [FieldError(row.location, field, message) for field, message in problems]
    for task in made if not errors else ():
        if task.id in first_seen:
            message = f"duplicate id {task.id!r} (first at {first_seen[task.id]})"
            errors.append(FieldError(row.location, "id", message))
    return made, errors


def _convert_all(rows: Iterable[RawRow], convert: Converter, on_bad: Callable[[BadRow], None]) -> list[Task]:
    """Convert every row; bad rows go to ``on_bad`` (ids must be unique across the file)."""
    tasks: list[Task] = []
    first_seen: dict[str, str] = {}
    for row in rows:
        made, errors = _row_errors(row, convert, first_seen)
        if errors:
            on_bad((row, errors))
            continue
        for task in made:
            first_seen[task.id] = row.location
        tasks.extend(made)
    return tasks


def _native(value: Any) -> tuple[Sequence[Task], list[Problem]]:
    task, problems = parse_task(value)
    return ([task] if task is not None and not problems else []), problems


class _TooManyBadRows(Exception):
    """Internal: stop reading a file that has more than ``MAX_BAD_ROWS`` bad rows."""


def convert_file(
    url: PathLike,
    convert: Converter,
    *,
    rejects_path: PathLike | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> LoadReport:
    """Run ``convert`` on every row of ``url``; raise on bad rows unless ``rejects_path`` is given.

    Rows stream from the file; bad rows stream to the rejects file. Without one, reading stops at the
    ``MAX_BAD_ROWS``-th bad row (a file that bad is the wrong file: listing a billion errors helps nobody).
    """
    source = os.fspath(url)
    errors: list[FieldError] = []
    bad_count = 0

    def keep(bad: BadRow) -> None:
        nonlocal bad_count
        bad_count += 1
        if rejects is not None:
            record = {"location": bad[0].location, "errors": [str(e) for e in bad[1]], "row": bad[0].text}
            rejects.write(json.dumps(record, ensure_ascii=False) + "\n")
            if len(errors) < MAX_BAD_ROWS:
                errors.extend(bad[1])
            return
        errors.extend(bad[1])
        if bad_count >= MAX_BAD_ROWS:
            raise _TooManyBadRows

    with contextlib.ExitStack() as stack:
        rejects = stack.enter_context(open_url(rejects_path, "wt")) if rejects_path is not None else None
        try:
            tasks = _convert_all(iter_raw_rows(url, limits=limits), convert, keep)
        except _TooManyBadRows:
            errors.insert(0, FieldError(source, "", f"stopped reading after {MAX_BAD_ROWS} bad rows"))
            raise TaskValidationError(errors, source=source) from None
    if bad_count and rejects_path is None:
        raise TaskValidationError(errors, source=source)
    where = os.fspath(rejects_path) if rejects_path is not None else None
    return LoadReport(tasks=tuple(tasks), rejected=bad_count, rejects_path=where, errors=tuple(errors))


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
