"""The job's tests as the harness ``H`` runs them: function/assert groups in a ``C``, io tests, a plain run.

Split from ``harness.py`` (which holds ``H`` itself: its process handling, compile step and ``main``).
``GroupState`` is also the parent's validator of an inline run's records (``runner.py``), so the rules
for what a candidate's record may say live in one place. Stdlib only, like every module the zygote
imports (``execrl.sandbox`` package docstring).
"""

from __future__ import annotations

import json
import os
import time

from execrl.sandbox.zygote import child, records
from execrl.sandbox.zygote.records import clean_error

# Annotations only: importing ``typing`` would add ~2 MB to the zygote, and to every fork of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from execrl.sandbox.zygote.harness import Harness


class GroupState:
    """Validates and relays the records of one ``C`` running a group of function/assert tests."""

    def __init__(self, harness: Harness, pending: list[int]) -> None:
        self.harness = harness
        self.pending = list(pending)
        self.loaded = False
        self.program_error: dict[str, Any] | None = None
        self.violation = False
        self.buffer = bytearray()
        self.line_limit = harness.max_output + (1 << 16)

    def feed(self, data: bytes) -> bool:
        """Take ``data`` from ``C``'s pipe; False once a line broke the protocol. A broken group accepts
        nothing after that: the kill is not instant, and records that arrive in a later read (a real
        ``loaded``/test pair after garbage) must not be relayed as if nothing had happened."""
        if self.violation:
            return False
        self.buffer.extend(data)
        while b"\n" in self.buffer:
            line, _, rest = bytes(self.buffer).partition(b"\n")
            self.buffer = bytearray(rest)
            if not self._accept(line):
                self.violation = True
                return False
        return len(self.buffer) <= self.line_limit

    def _accept(self, line: bytes) -> bool:
        """One line of ``C``'s: parsed with bounds (``records.parse_record``), never raising here (a
        crash of ``H`` would be a ``sandbox_error``, which the candidate must not be able to cause)."""
        record = records.parse_record(line)
        if record is None or self.program_error is not None:
            return False
        if not self.loaded:
            if record.get("kind") == "program_error":
                self.program_error = clean_error(record)
                return True
            self.loaded = record.get("kind") == "loaded"
            return self.loaded
        status = record.get("status")
        if not self.pending or record.get("i") != self.pending[0] or status not in records.TEST_STATUSES:
            return False
        index = self.pending.pop(0)
        self.harness.send({"kind": "test", "i": index, "status": status, **clean_error(record)})
        return True


def runs_inline(isolated: bool, mode: str, test_kinds: list[str], fetches: bool = False) -> bool:
    """Whether the candidate runs in pid 1 itself instead of a forked ``C`` (the parent decides the same
    from the request, so no record from the sandbox can switch it).

    Only for a single Python function/assert test in the strict backend (HumanEval's one ``check``
    test): one Python process per execution instead of two saves the second fork, its copy-on-write
    faults and its exit (about a third of the sandbox's CPU per execution). Nothing is lost for one
    test: the parent validates the records (``GroupState``), knows the expected values, and learns how
    pid 1 ended from the zygote that reaps it. Several tests keep ``C``: a death in one test must not
    take the following tests with it, which needs a trusted harness that survives.
    ``fetches``: the job reads files back after the run (``workfiles.fetch_all``), which needs ``H``.
    """
    one_test = len(test_kinds) == 1 and test_kinds[0] in ("code", "call")
    return isolated and mode == "python" and one_test and not fetches


def run_group(h: Harness, indices: list[int]) -> None:
    """Function and assert tests: one ``C`` runs the program once and then the tests in order; if it dies,
    the test in progress gets the death and a fresh ``C`` continues with the rest."""
    pending = list(indices)
    while pending:
        if h.cpu_left_s() <= 0:
            for index in pending:
                h.send({"kind": "test", "i": index, "status": "skipped", "reason": "cpu"})
            return
        state = GroupState(h, pending)
        rec_r, rec_w = os.pipe()
        pid = _start_group(h, list(pending), rec_w)
        os.close(rec_w)
        outcome = h.supervise(pid, {rec_r: state.feed}, h.deadline)
        os.close(rec_r)
        if state.violation:
            outcome.output_limit = False
        fields = {**outcome.fields(), "protocol_violation": state.violation}
        if state.program_error is not None:
            for index in state.pending:
                h.send({"kind": "test", "i": index, "status": "error", **state.program_error})
            return
        if not state.pending:
            return
        if not state.loaded or outcome.wall_limit:
            for index in state.pending:
                h.send({"kind": "test", "i": index, "status": "died", **fields})
            return
        h.send({"kind": "test", "i": state.pending[0], "status": "died", **fields})
        pending = state.pending[1:]


def _start_group(h: Harness, todo: list[int], rec_w: int) -> int:
    """Start ``C`` for a group: the Python tests in a fork of this interpreter, or the language's own
    call harness (``languages.CallHarness``), fed the tests' inputs on stdin and writing records to fd 3."""
    language = h.job["language"]
    if language["mode"] == "python":
        return h.fork(lambda: child.run_tests(h.job, todo, rec_w, h.cpu_left_s(), h.max_output))
    lines = [json.dumps({"max_bytes": h.max_output}), *(h.call_lines[index] for index in todo)]
    stdin = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    return h.start_program(language["call"], stdin, None, rec_fd=rec_w)


def run_io(h: Harness, indices: list[int]) -> None:
    """stdin/stdout tests: a fresh program run per test, stdout captured by ``H`` for the parent to judge."""
    language = h.job["language"]
    for position, index in enumerate(indices):
        if h.cpu_left_s() <= 0 or time.monotonic() >= h.deadline:
            for rest in indices[position:]:
                h.send({"kind": "test", "i": rest, "status": "skipped", "reason": "cpu"})
            return
        stdin = child.text_bytes(h.job["tests"][index]["stdin"])
        error = None
        if language["mode"] == "python":
            outcome, error = h.run_python_main(stdin, capture=True)
        else:
            outcome = h.run_exec(language["run"], stdin, True, h.max_output, h.deadline)
        stdout = outcome.captured[: h.max_output].decode("utf-8", "replace")
        h.send(
            {
                "kind": "test",
                "i": index,
                "status": "output",
                "stdout": stdout,
                "error": error,
                **outcome.fields(),
            }
        )


def run_plain(h: Harness) -> None:
    language = h.job["language"]
    stdin = child.text_bytes(h.job["stdin"])
    error = None
    if language["mode"] == "python":
        outcome, error = h.run_python_main(stdin, capture=False)
    else:
        outcome = h.run_exec(language["run"], stdin, False, h.max_output, h.deadline)
    h.send({"kind": "run", "error": error, **outcome.fields()})


def run_tests(h: Harness, res_fd: int) -> None:
    """Run the job's tests (or its plain run) after the compile step: inline, grouped, then io."""
    job = h.job
    tests = job["tests"]
    kinds = [t["kind"] for t in tests]
    if runs_inline(h.isolated, job["language"]["mode"], kinds, bool(job.get("fetch_files"))):
        child.run_tests(job, [0], res_fd, h.cpu_left_s(), h.max_output, new_session=False)
    group = [i for i, t in enumerate(tests) if t["kind"] in ("code", "call")]
    io_tests = [i for i, t in enumerate(tests) if t["kind"] == "io"]
    if not tests:
        run_plain(h)
    if group:
        run_group(h, group)
    if io_tests:
        run_io(h, io_tests)
