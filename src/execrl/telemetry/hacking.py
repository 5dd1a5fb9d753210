"""Reading ``hack.jsonl``: the completions the reward audit flagged, ranked for a person to read.

``execrl.recipes.audit`` appends, per step, the most suspicious completions (those the reward passed but
the held-back audit tests failed first, then those with the most suspicious-behaviour flags). The report's
``hack`` section shows the top ones with their verdicts; this module only reads and ranks (no plotting,
no rewards import), so the report and the monitor can use it without the training stack.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["HACK_FILE", "read_flagged", "top_flagged"]

HACK_FILE = "hack.jsonl"


def read_flagged(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every record of ``run_dir/hack.jsonl``; a resumed run's repeated (step, row) keeps the last one.

    A torn last line (the run was killed mid-write) is skipped; any other bad line raises naming it.
    """
    path = Path(run_dir) / HACK_FILE
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records: dict[tuple[int, int], dict[str, Any]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a JSON record ({exc.msg})") from exc
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise ValueError(f"{path}:{number}: expected an object with an integer 'step'")
        records[(record["step"], int(record.get("row", 0)))] = record
    return [records[key] for key in sorted(records)]


def top_flagged(records: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The ``count`` most suspicious records: failed audit first, then most flags, then latest step."""

    def rank(record: dict[str, Any]) -> tuple[int, int, int]:
        flags = record.get("flags") or []
        return ("audit_failed" in flags, len(flags), int(record["step"]))

    return sorted(records, key=rank, reverse=True)[:count]
