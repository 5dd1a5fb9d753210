"""JSONL traces of refine runs (one line per turn) and ``execrl refine show``'s readable rendering.

Each line: ``condition``, ``task_id``, ``turn``, ``messages`` (the conversation the model answered),
``completion``, ``code``, visible verdicts, ``feedback`` given after the turn, token counts, ``final``
(whether this attempt is the problem's final program) and ``hidden_passed`` (for reports; the loop never
shows it). Lines are appended and flushed per condition, so a long run's trace grows as it goes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from execrl.refine.loop import ProblemRun
from execrl.sandbox.types import ellipsize

REASON_CHARS = 80  # a turn's visible-test reason in ``format_trace``; longer ones end in "..."

__all__ = ["TraceWriter", "format_trace", "read_trace"]


class TraceWriter:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: TextIO = path.open("w", encoding="utf-8")

    def write_runs(self, runs: Sequence[ProblemRun]) -> None:
        for run in runs:
            final = run.final_index % len(run.attempts)
            for i, attempt in enumerate(run.attempts):
                row = {"condition": run.condition, "task_id": run.task_id, **dataclasses.asdict(attempt)}
                row["messages"] = [{"role": r, "content": c} for r, c in attempt.messages]
                row["visible_tests"] = [{"name": n, "verdict": v} for n, v in attempt.visible_tests]
                row["final"] = i == final
                self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trace(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a trace file; a malformed line raises naming the file and line."""
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line ({exc})") from exc
            missing = {"condition", "task_id", "turn", "completion"} - set(row)
            if missing:
                raise ValueError(f"{path}:{number}: not a refine trace row (missing {sorted(missing)})")
            yield row


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in (text or "").splitlines()) or prefix + "(empty)"


def format_trace(
    rows: Sequence[dict[str, Any]],
    *,
    task_id: str | None = None,
    condition: str | None = None,
    show_prompt: bool = False,
) -> str:
    """Human-readable rendering: per problem and condition, each turn's code, verdicts and feedback."""
    out: list[str] = []
    for row in rows:
        if (task_id and row["task_id"] != task_id) or (condition and row["condition"] != condition):
            continue
        if row["turn"] == 1:
            out.append(f"=== {row['task_id']}  [{row['condition']}] " + "=" * 30)
        if show_prompt and row["turn"] == 1 and row.get("messages"):
            out.append("  prompt:\n" + _indent(row["messages"][-1]["content"]))
        verdict = "PASS" if row.get("visible_passed") else "FAIL"
        mark = "  <- final" if row.get("final") else ""
        hidden = "pass" if row.get("hidden_passed") else "fail"
        reason = ellipsize(row.get("visible_reason", ""), REASON_CHARS)
        out.append(
            f"--- turn {row['turn']}: visible {verdict} ({reason}), "
            f"hidden {hidden}, {row.get('completion_tokens', 0)} tokens{mark}"
        )
        out.append(_indent(row.get("code") or row["completion"]))
        if row.get("feedback"):
            out.append("  feedback:\n" + _indent(row["feedback"]))
    return "\n".join(out) if out else "(no matching rows)"
