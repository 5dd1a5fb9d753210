"""The HTTP service's own caps on what one request may make the server hold (issue 14, class 1).

A request may ask the sandbox for up to 1 GiB of output per stream (``Limits`` allows it for library
callers); over HTTP one such request took the server to 8.7 GB RSS. Everything a result holds is bounded
by the request: ``stdout``, ``stderr`` and ``compile_output`` by ``limits.max_output_bytes`` each (plus a
truncation marker), each test's text fields by ``verdicts.FIELD_BYTES`` each. While an execution runs the
parent also holds each test's record, whose captured stdout or returned value is cut at
``max_output_bytes`` (``harness``), so the bound in flight is per test, not per field. These functions
turn a request into those bounds so that the service can refuse (422) before anything runs.

Limits, stated honestly: the bounds count text (UTF-8 bytes); JSON-encoding a response takes up to six
times as much while it is built (``\\u0001`` for a control byte). ``TestResult.error_type`` is the name
of the exception class the candidate raised, cut only by the record's line limit, and is not counted.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import re
from collections.abc import Iterator, Sequence

from execrl.sandbox.judge.verdicts import FIELD_BYTES  # each text field of a TestResult (input, got, ...)
from execrl.sandbox.service.serialize import FieldProblem, RequestFieldError
from execrl.sandbox.types import TRUNCATION_MARKER, ExecutionRequest, Limits

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_JSON_ITEMS",
    "body_slices",
    "check_batch",
    "check_execution",
    "check_json_shape",
    "execution_bytes",
    "fetch_bytes",
    "fit_default_output",
    "json_too_deep",
    "result_bytes",
]

MAX_JSON_DEPTH = 64  # a request nests a few levels; call arguments rarely more than ten
MAX_JSON_ITEMS = 1 << 20  # values in one body: at most ~100 MB while it is parsed
_MARKER_BYTES = len(TRUNCATION_MARKER.format(n=1 << 40))
_TEST_FIELDS = 5  # input, expected, got, error_message, traceback_tail
_DEFAULT_OUTPUT_BYTES = Limits().max_output_bytes
_RECORD_SLACK = 1 << 16  # a record's line may exceed max_output_bytes by this much (testgroups.GroupState)


def fetch_bytes(execution: ExecutionRequest) -> int:
    """Most the fetched files of ``execution`` can add to its result, as base64 (4 bytes per 3)."""
    limits = execution.limits
    raw = min(limits.max_fetch_bytes, len(execution.fetch_files) * limits.max_fetch_file_bytes)
    return 4 * -(-raw // 3)


def result_bytes(execution: ExecutionRequest) -> int:
    """Most text the ``ExecutionResult`` of ``execution`` can hold (three streams, every test's fields,
    the fetched files)."""
    per_stream = execution.limits.max_output_bytes + _MARKER_BYTES
    per_test = _TEST_FIELDS * (FIELD_BYTES + _MARKER_BYTES)
    tests = sum(per_test + len(t.name.encode("utf-8", "replace")) for t in execution.tests)
    return 3 * per_stream + tests + fetch_bytes(execution)


def execution_bytes(execution: ExecutionRequest) -> int:
    """Most the parent holds while ``execution`` runs: three streams plus one record per test."""
    per_record = execution.limits.max_output_bytes + _RECORD_SLACK
    return result_bytes(execution) + len(execution.tests) * per_record


def fit_default_output(execution: ExecutionRequest, max_output_bytes: int) -> ExecutionRequest:
    """A request that kept the library's default output limit runs under the server's cap when that is
    lower (the default is the server's to choose, as ``SandboxConfig.limits`` does); an explicit value
    above the cap is refused by ``check_execution``. 1 MiB sent explicitly counts as the default."""
    limits = execution.limits
    if limits.max_output_bytes == _DEFAULT_OUTPUT_BYTES > max_output_bytes:
        return dataclasses.replace(
            execution, limits=dataclasses.replace(limits, max_output_bytes=max_output_bytes)
        )
    return execution


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def check_execution(
    execution: ExecutionRequest,
    *,
    max_output_bytes: int,
    max_tests: int,
    max_result_mb: int,
    prefix: str = "",
) -> None:
    """Raise ``RequestFieldError`` (422) naming the field if ``execution`` asks for more than a cap."""
    field = f"{prefix}." if prefix else ""
    asked = execution.limits.max_output_bytes
    if asked > max_output_bytes:
        raise _capped(
            f"{field}limits.max_output_bytes",
            f"{asked} is above this server's cap of {max_output_bytes} bytes per stream; send <= "
            f"{max_output_bytes} (server option --max-output-bytes)",
        )
    if len(execution.tests) > max_tests:
        raise _capped(
            f"{field}tests",
            f"has {len(execution.tests)} tests; this server runs at most {max_tests} per execution "
            "(server option --max-tests)",
        )
    need = execution_bytes(execution)
    if need > max_result_mb << 20:
        raise _capped(
            f"{field}limits.max_output_bytes",
            f"with {len(execution.tests)} tests this execution may hold {_mib(need)} of output (3 streams "
            f"+ 1 per test, {asked} bytes each); this server holds at most {max_result_mb} MiB per "
            "request: lower limits.max_output_bytes or send fewer tests (server option --max-result-mb)",
        )


def check_batch(executions: Sequence[ExecutionRequest], *, max_result_mb: int) -> None:
    """Raise ``RequestFieldError`` on ``requests`` if the batch's results together may exceed the cap."""
    need = sum(result_bytes(e) for e in executions)
    if need > max_result_mb << 20:
        raise _capped(
            "requests",
            f"the results of these {len(executions)} requests may hold {_mib(need)} of output; this "
            f"server answers at most {max_result_mb} MiB per response: send fewer requests per batch or "
            "lower limits.max_output_bytes (server option --max-result-mb)",
        )


def _capped(field: str, message: str) -> RequestFieldError:
    return RequestFieldError([FieldProblem(field, message, "cap_exceeded")])


_JSON_STRING = re.compile(rb'"[^"]*"')  # once escaped backslashes and quotes are removed
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")  # an opener steps +1 and a closer -1, after - 1
_NOT_BACKSLASH = re.compile(rb"[^\\]")
SLICE_BYTES = 1 << 20  # bytes scanned per C call: the GIL changes hands between them


def body_slices(raw: bytes, slice_bytes: int = SLICE_BYTES) -> Iterator[bytes]:
    """``raw`` in pieces of about ``slice_bytes``, each cut after a byte that is not a backslash (so an
    escape never spans two pieces). Scanning a large body piece by piece keeps each C call short: one
    call over 60 MiB held the GIL ~0.5 s, and a health check on the event loop waited for it (two such
    bodies stalled ``/v1/ping`` for seconds: issue 35, class 8)."""
    start = 0
    while start < len(raw):
        end = start + slice_bytes
        if end < len(raw) and raw[end - 1] == 0x5C:  # inside a run of backslashes: cut after its escape
            found = _NOT_BACKSLASH.search(raw, end)
            end = found.end() if found is not None else len(raw)
        yield raw[start:end]
        start = end


class _Shape:
    """The running counts of ``check_json_shape`` over successive pieces of one body."""

    def __init__(self, max_brackets: int) -> None:
        self.max_brackets = max_brackets  # past it, more closers than openers: not JSON, no depth
        self.in_string = False
        self.items = 0
        self.brackets = 0
        self.depth = 0
        self.deepest = 0

    def feed(self, piece: bytes) -> None:
        unescaped = piece.replace(b"\\\\", b"").replace(b'\\"', b"")
        if self.in_string:  # a string that began in an earlier piece
            end = unescaped.find(b'"')
            if end < 0:
                return
            unescaped, self.in_string = unescaped[end + 1 :], False
        if unescaped.count(b'"') % 2:  # a string that goes on in the next piece
            unescaped, self.in_string = unescaped[: unescaped.rfind(b'"')], True
        structure = _JSON_STRING.sub(b"0", unescaped)
        self.items += structure.count(b",") + structure.count(b"[") + structure.count(b"{")
        brackets = structure.translate(None, _NOT_BRACKETS)
        self.brackets += len(brackets)
        if self.brackets > self.max_brackets:
            return
        steps = brackets.translate(_STEP)
        running = itertools.accumulate(map(operator.sub, steps, itertools.repeat(1)), initial=self.depth)
        self.deepest = max(self.deepest, max(running))
        self.depth += 2 * steps.count(2) - len(steps)


def check_json_shape(
    raw: bytes, *, max_depth: int = MAX_JSON_DEPTH, max_items: int = MAX_JSON_ITEMS,
    slice_bytes: int = SLICE_BYTES,
) -> None:  # fmt: skip
    """Raise ``RequestFieldError`` on ``body`` if the JSON in ``raw`` nests deeper than ``max_depth`` or
    holds more than ``max_items`` values, before it is parsed.

    Parsing first is what breaks: a 64 MiB body of ``{},`` decodes into 22 million dicts (3.2 GB RSS),
    and JSON nested ~1,000 deep overflows the parser's stack (a plain-text 500). On the bytes, with every
    string replaced by a placeholder, values are counted by their separators and brackets and the depth
    is the deepest running count of open brackets, all in C loops over pieces of ``slice_bytes``
    (``body_slices``; a string or a count carries over from one piece to the next), about 1 s per 64 MiB
    on a busy 2-core machine. Not JSON is left to the parser to report, unless it is already too deep or
    too large.
    """
    shape = _Shape(2 * max_items)
    for piece in body_slices(raw, slice_bytes):
        shape.feed(piece)
        if shape.items > max_items:
            message = (
                f"holds more than {max_items} JSON values; this server parses at most {max_items} per body"
            )
            raise RequestFieldError([FieldProblem("body", message, "json_invalid")])
    if shape.brackets > shape.max_brackets:
        return  # more closers than openers: not JSON, and json.loads says where
    if shape.deepest > max_depth:
        raise RequestFieldError([json_too_deep(max_depth)])


def json_too_deep(limit: int = MAX_JSON_DEPTH) -> FieldProblem:
    message = f"is nested more than {limit} levels deep; this server accepts at most {limit}"
    return FieldProblem("body", message, "json_invalid")
