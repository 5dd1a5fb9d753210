"""JSONL traces of refine runs (one line per turn) and ``execrl refine show``'s readable rendering.

Each line: ``condition``, ``task_id``, ``turn``, ``messages`` (the conversation the model answered),
``completion``, ``code``, visible verdicts, ``feedback`` given after the turn, token counts, ``final``
(whether this attempt is the problem's final program) and ``hidden_passed`` (for reports; the loop never
shows it). Lines are appended and flushed per condition, so a long run's trace grows as it goes.

``execrl refine show`` prints a trace that holds what candidate programs wrote: every field goes through
:func:`printable` (a program printed terminal escapes, an OSC 52 clipboard write, into its own output),
and malformed rows are skipped and counted rather than ending the rendering.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from execrl.refine.runs import ProblemRun
from execrl.sandbox.types import ellipsize

REASON_CHARS = 80  # a turn's visible-test reason in ``format_trace``; longer ones end in "..."

__all__ = ["TraceWriter", "format_trace", "printable", "read_trace"]


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


MAX_ROW_BYTES = 64 << 20
_ROW_TYPES: dict[str, tuple[type, ...]] = {  # field -> accepted types (required fields first)
    "condition": (str,),
    "task_id": (str,),
    "turn": (int,),
    "completion": (str,),
    "code": (str, type(None)),
    "feedback": (str, type(None)),
    "visible_reason": (str,),
    "visible_passed": (bool,),
    "hidden_passed": (bool,),
    "final": (bool,),
    "completion_tokens": (int,),
    "messages": (list,),
}
_REQUIRED = ("condition", "task_id", "turn", "completion")
# C0/C1 controls (terminal escapes, OSC 52 clipboard writes, carriage returns), bidi overrides and
# Unicode line separators; newlines and tabs are kept in multi-line text only.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069"
_UNPRINTABLE = re.compile(f"[{_CONTROLS}]")
_UNPRINTABLE_LINE = re.compile(f"[{_CONTROLS}\\t\\n]")


def printable(text: object, *, multiline: bool = False) -> str:
    """``text`` safe for a terminal: control characters shown as escapes (``\\x1b``, ``\\u202e``)."""
    pattern = _UNPRINTABLE if multiline else _UNPRINTABLE_LINE
    return pattern.sub(lambda m: ascii(m.group())[1:-1], str(text))


def _row_problem(row: Any) -> str | None:
    """Why ``row`` is not a refine trace row (None: it is)."""
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    missing = [k for k in _REQUIRED if k not in row]
    if missing:
        return f"missing {missing}"
    for key, types in _ROW_TYPES.items():
        if key in row and (
            not isinstance(row[key], types) or (bool not in types and isinstance(row[key], bool))
        ):
            return f"{key} is a {type(row[key]).__name__}"
    messages = row.get("messages") or []
    if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        return "messages are not {role, content} objects"
    return None


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) per line; None for a line over ``MAX_ROW_BYTES`` (skipped unread)."""
    with path.open("rb") as handle:
        number = 0
        while raw := handle.readline(MAX_ROW_BYTES + 1):
            number += 1
            if len(raw) > MAX_ROW_BYTES and not raw.endswith(b"\n"):
                while (more := handle.readline(1 << 20)) and not more.endswith(b"\n"):
                    pass
                yield number, None
                continue
            yield number, raw


def _parse(raw: bytes | None) -> tuple[Any, str | None]:
    if raw is None:
        return None, f"longer than {MAX_ROW_BYTES} bytes"
    try:
        return json.loads(raw.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5,000-digit integer, deep nesting
        return None, f"not a JSON line ({str(exc).splitlines()[0][:80]})"


def read_trace(path: Path, *, skipped: list[tuple[int, str]] | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a trace file. A malformed line (not UTF-8 JSON, not a row, a field of the wrong type)
    raises naming the file and line, or, when ``skipped`` is a list, is skipped and its (line number,
    problem) appended there."""
    for number, raw in _raw_lines(path):
        if raw is not None and not raw.strip():
            continue
        row, problem = _parse(raw)
        problem = problem or _row_problem(row)
        if problem is None:
            yield row
        elif skipped is not None:
            skipped.append((number, problem))
        else:
            raise ValueError(f"{path}:{number}: not a refine trace row ({problem})")


def _indent(text: str | None, prefix: str = "    ") -> str:
    lines = printable(text or "", multiline=True).splitlines()
    return "\n".join(prefix + line for line in lines) or prefix + "(empty)"


def format_trace(
    rows: Sequence[dict[str, Any]],
    *,
    task_id: str | None = None,
    condition: str | None = None,
    show_prompt: bool = False,
) -> str:
    """Human-readable rendering: per problem and condition, each turn's code, verdicts and feedback.
    Everything from the trace is shown through :func:`printable` (a program's output may hold terminal
    escapes)."""
    out: list[str] = []
    for row in rows:
        if (task_id and row["task_id"] != task_id) or (condition and row["condition"] != condition):
            continue
        if row["turn"] == 1:
            out.append(f"=== {printable(row['task_id'])}  [{printable(row['condition'])}] " + "=" * 30)
        if show_prompt and row["turn"] == 1 and row.get("messages"):
            out.append("  prompt:\n" + _indent(row["messages"][-1]["content"]))
        verdict = "PASS" if row.get("visible_passed") else "FAIL"
        mark = "  <- final" if row.get("final") else ""
        hidden = "pass" if row.get("hidden_passed") else "fail"
        reason = printable(ellipsize(row.get("visible_reason", ""), REASON_CHARS))
        out.append(
            f"--- turn {row['turn']}: visible {verdict} ({reason}), "
            f"hidden {hidden}, {row.get('completion_tokens', 0)} tokens{mark}"
        )
        out.append(_indent(row.get("code") or row["completion"]))
        if row.get("feedback"):
            out.append("  feedback:\n" + _indent(row["feedback"]))
    return "\n".join(out) if out else "(no matching rows)"
