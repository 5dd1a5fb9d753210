"""Bounded parsing of bytes that came from a candidate (hazard class 1 and 2 of issue 9).

Everything a candidate process writes (its records on the record pipe, a returned value's JSON text) is
untrusted input, read by the harness ``H`` (pid 1 of the sandbox) and, for inline runs, by the parent.
A line may be megabytes of ``[``, a field may hold a list where a string belongs, a number may have
thousands of digits (``float()`` of it raises ``OverflowError``; ``math.isfinite`` too). Parsed with
plain ``json.loads`` and ``dict.get`` such input raised in ``H`` (the run became ``sandbox_error``, which
rewards mask out: a failing program could escape its negative reward) or in the parent (the request,
and a whole batch with it, crashed). Here every such input is a value ``None``: "not a record", which
the callers turn into the candidate's ``runtime_error`` (protocol violation) or ``wrong_answer``.

Bounds: ``MAX_DEPTH`` levels of nesting (checked without recursion, and only walked when the text has
more brackets than that, so a flat value costs one ``str.count``), integers up to Python's own
``int`` string limit (``json`` raises ``ValueError`` beyond it), floats must be finite where a duration
is expected. Sizes are bounded by the callers (the pipe readers cap line lengths).

Imported by the harness inside the zygote: standard library only, no ``typing`` at run time.
"""

from __future__ import annotations

import json
import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 100
ERROR_FIELDS = {"type": str, "message": str, "tb": str, "value": str, "cpu_s": float, "wall_s": float}
TEST_STATUSES = frozenset({"ok", "value", "probed", "error", "unserializable", "too_large"})


def depth_within(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (decoded JSON) nests at most ``limit`` containers deep; iterative, no recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in item if isinstance(child, list | dict))
    return True


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> tuple[bool, Any]:
    """``(True, value)`` for JSON text nesting at most ``limit`` deep, else ``(False, None)``; never raises."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False, None
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    brackets = data.count(b"[") + data.count(b"{")
    if brackets > limit and not depth_within(value, limit):
        return False, None
    return True, value


def parse_record(line: bytes) -> dict[str, Any] | None:
    """One record line from a candidate: a JSON object whose ``kind``/``status`` (if present) are
    strings and ``i`` (if present) an integer, else ``None``."""
    ok, record = loads(line, 4)
    if not ok or not isinstance(record, dict):
        return None
    for key in ("kind", "status"):
        if key in record and not isinstance(record[key], str):
            return None
    if "i" in record and type(record["i"]) is not int:
        return None
    return record


def finite(value: Any) -> float | None:
    """``value`` as a finite float if it is a JSON number that is one (``bool`` is not), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int with hundreds of digits
        return None
    return number if math.isfinite(number) else None


def clean_error(record: dict[str, Any]) -> dict[str, Any]:
    """Only the known fields of a candidate's test record, each of its type (strings; finite floats)."""
    cleaned: dict[str, Any] = {}
    for key, kind in ERROR_FIELDS.items():
        value = record.get(key)
        if kind is float:
            number = finite(value)
            if number is not None:
                cleaned[key] = number
        elif isinstance(value, str):
            cleaned[key] = value
    return cleaned
