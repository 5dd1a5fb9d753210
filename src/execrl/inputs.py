"""Reading files a user hands us (task files, completions, configs, run directories) with bounded memory.

Every reader here streams or caps: a task file is read line by line in fixed-size chunks, with a cap on
one line and on the decompressed total, so a 2 MB ``.jsonl.gz`` that inflates to 2 GiB fails within the
first line cap instead of filling memory (issue 14, class 4). Every problem is an ``InputFileError`` whose
message is one line naming the file, and the line where there is one: a missing path, a directory, a
binary file (a NUL byte), text that is not UTF-8, a line or file over its cap, JSON nested too deeply.
Commands turn it into exit status 2 (tracebacks are for bugs).

Limits: the caps are per file; a caller that keeps every parsed row (the task loader) still holds what it
keeps. JSON depth is checked after ``json.loads`` (which itself stops at Python's recursion limit, also
reported here), so a value within the cap is fully parsed before being refused.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "BinaryReader",
    "DEFAULT_LIMITS",
    "InputFileError",
    "ReadLimits",
    "float_in",
    "positive_int",
    "iter_lines",
    "json_value",
    "read_capped",
    "read_chunk",
    "read_text_file",
    "regular_file",
    "writable_file",
]

_CHUNK_BYTES = 1 << 20


class BinaryReader(Protocol):
    """What the readers need of a stream: ``read(size) -> bytes`` (files, gzip and fsspec streams)."""

    def read(self, size: int = ..., /) -> bytes: ...


class InputFileError(ValueError):
    """An input file cannot be used; the message is one line naming the file (and line)."""


@dataclass(frozen=True)
class ReadLimits:
    """Caps on what one input file may cost. Raise them for unusually large datasets."""

    max_line_bytes: int = 64 << 20  # one JSONL row (a CodeContests row with generated tests is ~10 MB)
    max_total_bytes: int = 1 << 30  # the whole file after decompression
    max_document_bytes: int = 256 << 20  # a file read whole (a JSON array, a config)
    max_json_depth: int = 200  # nesting of one JSON value (task rows need < 20)


DEFAULT_LIMITS = ReadLimits()


def regular_file(path: str | os.PathLike[str], what: str = "file") -> Path:
    """``path`` as a ``Path`` when it is an existing regular file (symlinks to one allowed), else raise."""
    p = Path(path)
    if not p.exists():
        raise InputFileError(f"{p}: not found (no such {what})")
    if p.is_dir():
        raise InputFileError(f"{p}: is a directory, expected a {what}")
    if not p.is_file():
        raise InputFileError(f"{p}: not a regular file, expected a {what}")
    return p


def writable_file(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """``path`` as a ``Path`` when a file can be written there, else raise; for checking an output
    (``--json``) before the work that fills it, not after (issue 35, class 12). Refused: a directory, a
    path under something that is not a directory, a file or directory without write permission."""
    p = Path(path)
    if p.is_dir():
        raise InputFileError(f"{p}: is a directory; the {what} must be a file path")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise InputFileError(f"{p}: exists and is not writable (the {what})")
        return p
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputFileError(f"{p}: {parent} is not a directory, so the {what} cannot be created")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputFileError(f"{p}: no permission to create files in {parent} (the {what})")
    return p


def _decode(raw: bytes, name: str, line_no: int) -> str:
    if b"\0" in raw:
        raise InputFileError(f"{name}:{line_no}: binary data (a NUL byte); expected UTF-8 text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"{name}:{line_no}: not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None


def read_chunk(handle: BinaryReader, size: int, name: str, line_no: int) -> bytes:
    """``handle.read(size)``; a corrupt or truncated compressed stream, or an I/O error, names the file."""
    try:
        return handle.read(size)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        where = f"{name}:{line_no}" if line_no else name
        raise InputFileError(f"{where}: cannot read or decompress ({type(exc).__name__}: {exc})") from None


def iter_lines(
    handle: BinaryReader, name: str, limits: ReadLimits = DEFAULT_LIMITS
) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line of a binary stream, read in 1 MiB chunks.

    Memory stays below ``max_line_bytes`` plus one chunk whatever the stream inflates to; runs of blank
    lines are counted without a Python-level loop per line (a bomb of newlines is still fast).
    """
    pending: list[bytes] = []
    pending_bytes, total, line_no = 0, 0, 0
    while chunk := read_chunk(handle, _CHUNK_BYTES, name, line_no + 1):
        total += len(chunk)
        if total > limits.max_total_bytes:
            raise InputFileError(
                f"{name}:{line_no + 1}: more than {limits.max_total_bytes} bytes after decompression "
                "(ReadLimits.max_total_bytes)"
            )
        if not chunk.strip() and b"\n" in chunk:  # only blank lines (a newline bomb): count them
            head = b"".join(pending)
            if head.strip():
                yield line_no + 1, _decode(head, name, line_no + 1)
            line_no += chunk.count(b"\n")
            pending, pending_bytes = [], 0
            continue
        parts = chunk.split(b"\n")
        if len(parts) > 1:
            first = b"".join([*pending, parts[0]])
            pending, pending_bytes = [], 0
            for raw in (first, *parts[1:-1]):
                line_no += 1
                if len(raw) > limits.max_line_bytes:
                    raise _line_too_long(name, line_no, limits)
                if raw.strip():
                    yield line_no, _decode(raw, name, line_no)
        pending.append(parts[-1])
        pending_bytes += len(parts[-1])
        if pending_bytes > limits.max_line_bytes:
            raise _line_too_long(name, line_no + 1, limits)
    last = b"".join(pending)
    if last.strip():
        yield line_no + 1, _decode(last, name, line_no + 1)


def _line_too_long(name: str, line_no: int, limits: ReadLimits) -> InputFileError:
    return InputFileError(
        f"{name}:{line_no}: line longer than {limits.max_line_bytes} bytes (ReadLimits.max_line_bytes)"
    )


def read_capped(handle: BinaryReader, name: str, max_bytes: int) -> str:
    """The whole (decompressed) stream as UTF-8 text, refusing more than ``max_bytes``."""
    parts, size = [], 0
    while size <= max_bytes and (
        part := read_chunk(handle, min(_CHUNK_BYTES, max_bytes + 1 - size), name, 0)
    ):
        parts.append(part)
        size += len(part)
    data = b"".join(parts)
    if len(data) > max_bytes:
        raise InputFileError(f"{name}: larger than {max_bytes} bytes; too large to read whole")
    line_of = data.count(b"\n", 0, data.find(b"\0")) + 1 if b"\0" in data else 0
    if line_of:
        raise InputFileError(f"{name}:{line_of}: binary data (a NUL byte); expected UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = data.count(b"\n", 0, exc.start) + 1
        raise InputFileError(
            f"{name}:{line_no}: not UTF-8 text (invalid byte 0x{data[exc.start]:02x})"
        ) from None


def read_text_file(
    path: str | os.PathLike[str], what: str = "file", *, max_bytes: int = DEFAULT_LIMITS.max_document_bytes
) -> str:
    """A small whole text file (a config): must exist, be a regular file, be UTF-8 and non-empty."""
    p = regular_file(path, what)
    try:
        with p.open("rb") as fh:
            text = read_capped(fh, str(p), max_bytes)
    except OSError as exc:
        raise InputFileError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if not text.strip():
        raise InputFileError(f"{p}: the {what} is empty")
    return text


def _too_deep(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests lists/objects deeper than ``max_depth`` (iterative: no recursion limit)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def json_value(text: str, max_depth: int = DEFAULT_LIMITS.max_json_depth) -> Any:
    """``json.loads(text)``; raises ``ValueError`` with a short reason (invalid, or nested too deeply)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
    if _too_deep(value, max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    return value


def positive_int(text: str) -> int:
    """An ``argparse`` type: an integer >= 1 (``--limit 0`` or ``-1`` would silently drop tasks)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def float_in(low: float, high: float) -> Callable[[str], float]:
    """An ``argparse`` type: a finite float in ``[low, high]`` (no NaN, no infinity)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"expected a number in [{low:g}, {high:g}], got {text}")
        return value

    return parse
