"""Reading metrics.jsonl and alarms.jsonl: whole-file (report) and incremental by byte offset (monitor).

The training process appends and flushes one line per step; a reader may see a half-written last line,
so the tail reader only consumes up to the last newline. When a resumed run truncates the file
(``JsonlSink(resume_from_step=k)``), the file shrinks below our offset: the tail starts over and bumps
``generation`` so a client knows to drop what it had.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execrl.inputs import InputFileError, iter_lines, json_value, regular_file
from execrl.telemetry.records import MetricRow, decode_obj

__all__ = ["JsonlTail", "merge_rows", "read_alarms", "read_metrics"]

_log = logging.getLogger(__name__)


def _run_file(run_dir: str | Path, name: str) -> Path:
    run = Path(run_dir)
    if not run.is_dir():
        what = "does not exist" if not run.exists() else "is not a directory"
        raise InputFileError(f"{run}: {what}; pass the run directory of a training run")
    return regular_file(run / name, f"{name} (is {run} a run directory?)")


def _json_lines(path: Path, what: str) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` of each non-blank line, streamed; any problem raises naming ``path:line``."""
    with path.open("rb") as fh:
        for lineno, line in iter_lines(fh, str(path)):
            try:
                yield lineno, json_value(line)
            except ValueError as exc:
                raise InputFileError(f"{path}:{lineno}: malformed {what} line: {exc}") from None


def read_metrics(run_dir: str | Path) -> list[MetricRow]:
    """All rows of ``run_dir/metrics.jsonl``; raises ``InputFileError`` naming file and line.

    A missing directory or file, a directory in its place, binary or non-UTF-8 text, a line over the
    caps of ``execrl.inputs``, JSON nested too deeply, a line without an integer step: all one-line
    errors (``execrl compare`` turns them into exit status 2).
    """
    path = _run_file(run_dir, "metrics.jsonl")
    rows: list[MetricRow] = []
    for lineno, value in _json_lines(path, "metrics"):
        if not isinstance(value, dict):
            raise InputFileError(f"{path}:{lineno}: malformed metrics line: not a JSON object")
        try:
            rows.append(decode_obj(value))
        except ValueError as exc:
            raise InputFileError(f"{path}:{lineno}: malformed metrics line: {exc}") from None
    return rows


def read_alarms(run_dir: str | Path) -> list[dict[str, Any]]:
    """All fired alarms of a run (empty when ``alarms.jsonl`` does not exist)."""
    if not (Path(run_dir) / "alarms.jsonl").exists():
        return []
    path = _run_file(run_dir, "alarms.jsonl")
    out: list[dict[str, Any]] = []
    for lineno, value in _json_lines(path, "alarm"):
        if not isinstance(value, dict):
            raise InputFileError(f"{path}:{lineno}: malformed alarm line: not a JSON object")
        out.append(value)
    return out


def merge_rows(rows: list[MetricRow]) -> list[MetricRow]:
    """Merge rows that share a step (e.g. train and eval metrics logged separately), sorted by step."""
    by_step: dict[int, MetricRow] = {}
    for row in rows:
        prev = by_step.get(row.step)
        if prev is None:
            by_step[row.step] = row
        else:
            by_step[row.step] = MetricRow(
                row.step, max(prev.time_s, row.time_s), {**prev.metrics, **row.metrics}
            )
    return [by_step[s] for s in sorted(by_step)]


MAX_LINE_BYTES = 8 << 20  # a metrics or alarm line is < 10 kB; a longer one is skipped, not buffered


@dataclass
class JsonlTail:
    """Incremental reader of one JSONL file: ``poll()`` returns the complete new lines since last time.

    Each line is parsed on its own and the offset only ever moves past complete lines, so one bad line
    costs that line and nothing else: malformed JSON, text that is not UTF-8, JSON nested deeper than
    ``execrl.inputs`` allows, a value that is not an object, or a line over ``MAX_LINE_BYTES`` (read
    past in bounded pieces, never held whole) is logged, skipped and counted in ``skipped_lines`` so the
    page can show that something is off. A monitor must keep running while a run writes.
    """

    path: Path
    offset: int = 0
    generation: int = 0
    skipped_lines: int = 0
    _ino: int | None = field(default=None, repr=False)
    _in_long_line: bool = field(default=False, repr=False)

    def poll(self) -> list[dict[str, Any]]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return []
        if stat.st_size < self.offset or (self._ino is not None and stat.st_ino != self._ino):
            self.offset = 0  # truncated or replaced (resume rewrote it): start over
            self.generation += 1
            self._in_long_line = False
        self._ino = stat.st_ino
        out: list[dict[str, Any]] = []
        with self.path.open("rb") as fh:
            while self.offset < stat.st_size:
                fh.seek(self.offset)
                chunk = fh.read(min(MAX_LINE_BYTES, stat.st_size - self.offset))
                if not self._consume(chunk, out):
                    break
        return out

    def _consume(self, chunk: bytes, out: list[dict[str, Any]]) -> bool:
        """Take the complete lines of ``chunk``; False when it ends inside a line still being written."""
        end = chunk.rfind(b"\n")
        if end < 0:
            if len(chunk) < MAX_LINE_BYTES:
                return False  # only a partial line so far
            if not self._in_long_line:
                self._skip(f"line longer than {MAX_LINE_BYTES} bytes")
            self._in_long_line = True
            self.offset += len(chunk)
            return True
        for raw in chunk[:end].split(b"\n"):  # each followed by its newline
            if self._in_long_line:  # the tail of a skipped long line
                self._in_long_line = False
            elif raw.strip():
                obj = self._parse_line(raw)
                if obj is not None:
                    out.append(obj)
            self.offset += len(raw) + 1
        return True

    def _parse_line(self, raw: bytes) -> dict[str, Any] | None:
        try:
            obj = json_value(raw.decode("utf-8"))
        except UnicodeDecodeError:
            self._skip("not UTF-8 text")
            return None
        except ValueError as exc:
            self._skip(str(exc))
            return None
        if not isinstance(obj, dict):
            self._skip(f"a JSON {type(obj).__name__}, not an object")
            return None
        return obj

    def _skip(self, why: str) -> None:
        self.skipped_lines += 1
        _log.warning("%s: skipping a malformed line at byte %d (%s)", self.path, self.offset, why)
