"""Errors raised while reading, validating and registering tasks.

```
TaskError
├── TaskValidationError   one or more rows are malformed (lists every bad row, not just the first)
├── TaskSourceError       the file/URL cannot be read (missing fsspec backend, unsupported format,
│   │                     a directory, not UTF-8, binary, over a size cap)
│   └── TaskFileNotFoundError   no such file (also a ``FileNotFoundError``)
└── SuiteError            unknown or duplicate suite name, or a split the suite does not have
```

A row's problems are ``FieldError``s: where (``tasks.jsonl:17``), which field (a dotted path with list
indices, ``hidden_tests[2].expected_stdout``) and what is wrong (``missing``), rendered as
``tasks.jsonl:17: field 'hidden_tests[2].expected_stdout': missing``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class TaskError(Exception):
    """Base class of every error raised by ``execrl.tasks``."""


@dataclass(frozen=True)
class FieldError:
    """One problem in one row. ``location`` is ``file:line`` (or ``file[index]`` for a JSON array)."""

    location: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"field '{self.field}'" if self.field else "row"
        return f"{self.location}: {where}: {self.message}"


class TaskValidationError(TaskError):
    """Rows failed validation. ``errors`` holds every problem of every bad row, in file order."""

    def __init__(self, errors: Sequence[FieldError], *, source: str = "", max_shown: int = 50) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.source = source
        rows = {e.location for e in self.errors}
        lines = [str(e) for e in self.errors[:max_shown]]
        if len(self.errors) > max_shown:
            lines.append(f"... and {len(self.errors) - max_shown} more problems")
        head = f"{len(rows)} invalid row(s)" + (f" in {source}" if source else "")
        hint = "fix the rows, or pass rejects_path=... to write them to a rejects file and load the rest"
        if len(self.errors) == 1:  # one line: the problem first, then what to do
            super().__init__(f"{lines[0]} ({hint})")
        else:
            super().__init__(f"{head} ({hint}):\n" + "\n".join(lines))

    @property
    def bad_locations(self) -> tuple[str, ...]:
        """The distinct ``file:line`` locations with at least one problem, in file order."""
        return tuple(dict.fromkeys(e.location for e in self.errors))


class TaskSourceError(TaskError):
    """A task file or URL cannot be read (missing backend package, bad format name, empty path)."""


class TaskFileNotFoundError(TaskSourceError, FileNotFoundError):
    """The task file does not exist (a ``FileNotFoundError`` too, for callers that catch that)."""


class SuiteError(TaskError):
    """Unknown suite, duplicate registration, or a split the suite does not provide."""
