"""A cell's verdict from what the parent saw (``driver.Outcome``): the table in ``types.py``.

Limits, OOM kills and deaths are the parent's own observations and decide the verdict; the record the
interpreter wrote (its repr, its exception) only fills the texts, each field checked for its type and
size here, so a forged or garbled record can never raise in the caller.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from execrl.sandbox.sessions.driver import Outcome
from execrl.sandbox.sessions.types import CellResult
from execrl.sandbox.types import Verdict
from execrl.sandbox.zygote.session_worker import SIGNAL_EXIT_BASE

__all__ = ["ended_answer", "judge_cell", "refused_cell"]

_LIMIT_VERDICTS = {
    "cell_timeout_s": Verdict.TIME_LIMIT,
    "cell_cpu_time_s": Verdict.TIME_LIMIT,
    "cpu_time_s": Verdict.TIME_LIMIT,
    "lifetime_s": Verdict.TIME_LIMIT,
    "max_output_bytes": Verdict.OUTPUT_LIMIT,
}
_LIMIT_WORDS = {
    "cell_timeout_s": "the cell ran past its wall-clock limit",
    "cell_cpu_time_s": "the cell used more CPU time than its limit",
    "cpu_time_s": "the session used all of its CPU time",
    "lifetime_s": "the session reached its lifetime",
    "max_output_bytes": "the cell wrote more output than its limit",
}
TRACEBACK_LINES = 64
TEXT_CHARS = 8000


def _text(value: Any, limit: int = TEXT_CHARS) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _record_fields(record: dict[str, Any] | None) -> dict[str, Any]:
    """The texts of the interpreter's record, each of its type (anything else is dropped)."""
    if record is None:
        return {}
    fields: dict[str, Any] = {}
    if record.get("status") == "ok":
        fields["value"] = _text(record.get("value"), 1 << 30)
        return fields
    fields["error_type"] = _text(record.get("type"), 200) or "Error"
    fields["error_message"] = _text(record.get("message")) or ""
    lines = record.get("tb")
    if isinstance(lines, list):
        fields["traceback"] = tuple(
            line[:TEXT_CHARS] for line in lines[:TRACEBACK_LINES] if isinstance(line, str)
        )
    return fields


def _exit_fields(status: int | None) -> dict[str, Any]:
    """How the interpreter ended, from the wait status of the sandbox's pid 1 (``worker.encode_status``)."""
    if status is None:
        return {}
    if os.WIFSIGNALED(status):  # pid 1 itself was killed (by the parent, or the OOM killer)
        return {"signal": os.WTERMSIG(status)}
    code = os.WEXITSTATUS(status)
    if SIGNAL_EXIT_BASE < code < SIGNAL_EXIT_BASE + 65:
        return {"signal": code - SIGNAL_EXIT_BASE}
    return {"exit_code": code}


def _death_words(exit_fields: dict[str, Any]) -> str:
    if "signal" in exit_fields:
        number = exit_fields["signal"]
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"the interpreter was killed by {name}"
    if "exit_code" in exit_fields:
        return f"the interpreter exited with status {exit_fields['exit_code']}"
    return ""


def judge_cell(out: Outcome, index: int, status: int | None, unknown: str) -> CellResult:
    """The ``CellResult`` of one cell: verdict and liveness from the parent's observations."""
    texts = _record_fields(out.record)
    stdout = bytes(out.stdout).decode("utf-8", "replace")
    stderr = bytes(out.stderr).decode("utf-8", "replace")
    common = {
        "index": index, "stdout": stdout, "stderr": stderr, "wall_s": out.wall_s, "cpu_s": out.cpu_s,
        "stdout_truncated": out.stdout_over, "stderr_truncated": out.stderr_over, **texts,
    }  # fmt: skip
    ended = out.dead or out.killed is not None
    if not ended:
        verdict = _alive_verdict(out)
        message = _LIMIT_WORDS.get(
            out.limit or "", "the cgroup's OOM killer killed a process" if out.oom else ""
        )
        limit = out.limit or ("memory_mb" if out.oom else None)
        return CellResult(verdict=verdict, limit=limit, message=message, **common)
    exit_fields = _exit_fields(status)
    if out.killed == "protocol":
        verdict, limit, message = (
            Verdict.RUNTIME_ERROR,
            None,
            "the interpreter broke the session's record protocol",
        )
    elif out.limit in _LIMIT_VERDICTS:
        verdict, limit, message = _LIMIT_VERDICTS[out.limit], out.limit, _LIMIT_WORDS[out.limit]
        if out.killed is not None and out.killed == out.limit and out.limit.startswith(("cell_", "max_")):
            message += "; it did not stop when interrupted, so the session was killed"
    elif out.oom:
        verdict, limit, message = (
            Verdict.MEMORY_LIMIT,
            "memory_mb",
            "the interpreter was killed at the memory limit",
        )
    elif exit_fields:
        verdict, limit, message = Verdict.RUNTIME_ERROR, None, _death_words(exit_fields)
    else:
        verdict, limit, message = Verdict.SANDBOX_ERROR, None, unknown
    if out.record is not None and verdict is Verdict.RUNTIME_ERROR and out.killed is None:
        verdict = Verdict.PASSED if out.record.get("status") == "ok" else Verdict.RUNTIME_ERROR
        message = f"the cell finished, then {message or 'the interpreter ended'}"
    message = f"{message}; the session ended" if message else "the session ended"
    return CellResult(
        verdict=verdict, limit=limit, message=message, session_alive=False, **exit_fields, **common
    )


def _alive_verdict(out: Outcome) -> Verdict:
    if out.limit in _LIMIT_VERDICTS:
        return _LIMIT_VERDICTS[out.limit]
    if out.oom:
        return Verdict.MEMORY_LIMIT
    assert out.record is not None
    return Verdict.PASSED if out.record.get("status") == "ok" else Verdict.RUNTIME_ERROR


def refused_cell(
    index: int, limit: str, message: str, verdict: Verdict = Verdict.RUNTIME_ERROR
) -> CellResult:
    """A cell that did not run because a session limit ended the session (``max_cells``, ``lifetime_s``,
    ``idle_timeout_s``, ``cpu_time_s`` while idle)."""
    return CellResult(
        verdict=verdict,
        index=index,
        limit=limit,
        session_alive=False,
        message=f"{message}; the session ended",
    )


def ended_answer(ending: CellResult, index: int) -> CellResult:
    """The answer to a cell sent to a session that already ended: not run, the ending's verdict."""
    return CellResult(
        verdict=ending.verdict, index=index, limit=ending.limit, session_alive=False,
        message=f"not run: the session ended earlier ({ending.message})",
        exit_code=ending.exit_code, signal=ending.signal,
    )  # fmt: skip
