"""Reading metrics.jsonl and alarms.jsonl: whole-file (report) and incremental by byte offset (monitor).

The training process appends and flushes one line per step; a reader may see a half-written last line,
so the tail reader only consumes up to the last newline. When a resumed run truncates the file
(``JsonlSink(resume_from_step=k)``), the file shrinks below our offset: the tail starts over and bumps
``generation`` so a client knows to drop what it had.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execrl.telemetry.records import MetricRow, decode_line

__all__ = ["JsonlTail", "merge_rows", "read_alarms", "read_metrics"]

_log = logging.getLogger(__name__)


def read_metrics(run_dir: str | Path) -> list[MetricRow]:
    """All rows of ``run_dir/metrics.jsonl``; raises naming file and line on a malformed line."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is {run_dir} a run directory?")
    rows: list[MetricRow] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rows.append(decode_line(line))
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: malformed metrics line: {exc}") from exc
    return rows


def read_alarms(run_dir: str | Path) -> list[dict[str, Any]]:
    """All fired alarms of a run (empty when ``alarms.jsonl`` does not exist)."""
    path = Path(run_dir) / "alarms.jsonl"
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: malformed alarm line: {exc}") from exc
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


@dataclass
class JsonlTail:
    """Incremental reader of one JSONL file: ``poll()`` returns the complete new lines since last time.

    Malformed lines are logged and skipped (a monitor must keep running while a run writes), and counted
    in ``skipped_lines`` so the page can show that something is off.
    """

    path: Path
    offset: int = 0
    generation: int = 0
    skipped_lines: int = 0
    _ino: int | None = field(default=None, repr=False)

    def poll(self) -> list[dict[str, Any]]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return []
        if stat.st_size < self.offset or (self._ino is not None and stat.st_ino != self._ino):
            self.offset = 0  # truncated or replaced (resume rewrote it): start over
            self.generation += 1
        self._ino = stat.st_ino
        if stat.st_size == self.offset:
            return []
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read(stat.st_size - self.offset)
        end = chunk.rfind(b"\n")
        if end < 0:
            return []  # only a partial line so far
        self.offset += end + 1
        return self._parse(chunk[: end + 1])

    def _parse(self, data: bytes) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for raw in data.splitlines():
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                self.skipped_lines += 1
                _log.warning("%s: skipping malformed line (%s)", self.path, exc)
                continue
            if isinstance(obj, dict):
                out.append(obj)
            else:
                self.skipped_lines += 1
        return out
