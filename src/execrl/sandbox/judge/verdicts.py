"""Turning the harness's records plus the kernel's view (cgroup OOM counter, CPU time, kills) into verdicts.

Runs in the parent, which alone holds the expected values. Rules, in order, for a test whose process
died: output over the limit -> ``output_limit``; the cgroup's OOM counter moved and the process was
SIGKILLed -> ``memory_limit``; the wall-clock watchdog fired -> ``time_limit`` ("wall"); SIGXCPU, or
SIGKILL at the CPU budget, or the parent's CPU watchdog -> ``time_limit`` ("cpu"); anything else ->
``runtime_error`` (signal name or exit code; exiting with status 0 before reporting a test is a
runtime error: that is how ``os._exit(0)`` before the asserts is caught). A run whose harness never
wrote its final record, with no limit to explain it, is a ``sandbox_error``.

Records are read by type (``records.finite``, ``_int``, ``_short``): a field of the wrong JSON type is
absent, never an exception. An assert test with probes is judged from the probed values against the
expectations ``asserts.plan`` kept in the parent.
"""

from __future__ import annotations

import base64
import binascii
import json
import signal
from typing import TYPE_CHECKING, Any, Literal

from execrl.sandbox.judge import asserts, compare
from execrl.sandbox.types import (
    TRUNCATION_MARKER,
    CallTest,
    CodeTest,
    ExecutionRequest,
    ExecutionResult,
    IOTest,
    TestResult,
    Verdict,
    overall_verdict,
    truncate,
)
from execrl.sandbox.zygote import records

if TYPE_CHECKING:  # the judge's inputs, described where they are made; judging imports no engine
    from execrl.sandbox.host.cgroups import CgroupStats
    from execrl.sandbox.host.runner import RunState

FIELD_BYTES = 4096
LimitKind = Literal["cpu", "wall"] | None
ERROR_VERDICTS = {"MemoryError": Verdict.MEMORY_LIMIT, "AssertionError": Verdict.WRONG_ANSWER}


def _short(text: object) -> str | None:
    """A text field for a ``TestResult``, cut to ``FIELD_BYTES``; anything but a string is no text."""
    return truncate(text, FIELD_BYTES)[0] if isinstance(text, str) else None


def _int(value: object) -> int | None:
    """An exit code or signal number from a record: an ``int`` (not a ``bool``) or ``None``."""
    return value if type(value) is int else None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Judge:
    def __init__(self, request: ExecutionRequest, state: RunState, stats: CgroupStats | None) -> None:
        self.request = request
        self.state = state
        self.oom = stats is not None and stats.oom_kills > 0
        self.cpu_limit_s = request.limits.cpu_time_s

    def death(self, record: dict[str, Any]) -> tuple[Verdict, LimitKind, str]:
        sig = _int(record.get("signal"))
        cpu_s = records.finite(record.get("cpu_s")) or 0.0
        if record.get("output_limit"):
            return Verdict.OUTPUT_LIMIT, None, "output limit exceeded"
        if self.oom and sig == signal.SIGKILL:
            return Verdict.MEMORY_LIMIT, None, "killed by the out-of-memory killer (memory limit)"
        if record.get("wall_limit") or self.state.kill_reason == "wall":
            return Verdict.TIME_LIMIT, "wall", "wall-clock time limit exceeded"
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= self.cpu_limit_s - 0.01):
            return Verdict.TIME_LIMIT, "cpu", "CPU time limit exceeded"
        if self.state.kill_reason == "cpu":
            return Verdict.TIME_LIMIT, "cpu", "CPU time limit exceeded"
        if record.get("protocol_violation"):
            return Verdict.RUNTIME_ERROR, None, "the program wrote garbage into the harness's record pipe"
        if sig == signal.SIGXFSZ:
            return Verdict.RUNTIME_ERROR, None, "file size limit exceeded (SIGXFSZ)"
        if sig is not None:
            return Verdict.RUNTIME_ERROR, None, f"killed by {_signal_name(int(sig))}"
        code = _int(record.get("exit_code"))
        if code == 0:
            return Verdict.RUNTIME_ERROR, None, "the process exited before reporting the test result"
        return Verdict.RUNTIME_ERROR, None, f"exit code {code}"

    def unreported(self) -> tuple[Verdict, LimitKind, str]:
        """A test with no record at all: the run ended early."""
        reason = self.state.kill_reason
        if reason == "output":
            return Verdict.OUTPUT_LIMIT, None, "output limit exceeded"
        if self.oom:
            return Verdict.MEMORY_LIMIT, None, "killed by the out-of-memory killer (memory limit)"
        if reason in ("wall", "cpu"):
            kind: LimitKind = "wall" if reason == "wall" else "cpu"
            return Verdict.TIME_LIMIT, kind, f"{kind} time limit exceeded"
        if reason == "protocol":
            return Verdict.RUNTIME_ERROR, None, "the program wrote garbage into the harness's record pipe"
        failure = next(
            (r.get("message") for r in self.state.records if r.get("kind") == "harness_error"), None
        )
        if failure:
            return Verdict.SANDBOX_ERROR, None, f"the sandbox's harness failed: {failure}"
        return (
            Verdict.SANDBOX_ERROR,
            None,
            "the sandbox died without reporting a result (its harness was killed or crashed)",
        )

    def test_result(
        self, test: CodeTest | CallTest | IOTest, record: dict[str, Any]
    ) -> tuple[TestResult, LimitKind]:
        status = record.get("status")
        times: dict[str, Any] = {
            "cpu_time_s": records.finite(record.get("cpu_s")) or 0.0,
            "wall_time_s": records.finite(record.get("wall_s")) or 0.0,
        }
        if status in ("ok", "value", "output", "probed") and not _matches(test, str(status)):
            message = f"a {status!r} record cannot answer a {type(test).__name__} (forged record?)"
            return TestResult(test.name, Verdict.WRONG_ANSWER, **times, error_message=message), None
        if status == "ok":
            return TestResult(test.name, Verdict.PASSED, **times), None
        if status == "probed" and isinstance(test, CodeTest):
            return self._probed_result(test, str(record.get("value")), times), None
        if status == "value" and isinstance(test, CallTest):
            return self._call_result(test, str(record.get("value")), times), None
        if status == "output" and isinstance(test, IOTest):
            return self._io_result(test, record, times)
        if status == "error":
            etype = str(record.get("type") or "Exception")
            verdict = ERROR_VERDICTS.get(etype, Verdict.RUNTIME_ERROR)
            return TestResult(
                test.name,
                verdict,
                **times,
                error_type=etype,
                error_message=_short(record.get("message")),
                traceback_tail=_short(record.get("tb")),
            ), None
        if status == "unserializable":
            got = f"<{record.get('type')} object: not a JSON value>"
            return TestResult(
                test.name, Verdict.WRONG_ANSWER, **times, input=self._input(test), got=got
            ), None
        if status == "too_large":
            return TestResult(
                test.name, Verdict.OUTPUT_LIMIT, **times, error_message="result too large"
            ), None
        if status == "skipped":
            return TestResult(
                test.name, Verdict.TIME_LIMIT, error_message="not run: CPU budget used up"
            ), "cpu"
        verdict, kind, message = self.death(record)
        return TestResult(test.name, verdict, **times, error_message=message), kind

    def _input(self, test: CodeTest | CallTest | IOTest) -> str | None:
        if isinstance(test, CallTest):
            args = [repr(a) for a in test.args] + [f"{k}={v!r}" for k, v in test.kwargs.items()]
            return _short(f"{test.entry_point}({', '.join(args)})")
        if isinstance(test, IOTest):
            return _short(test.stdin)
        return None

    def _call_result(self, test: CallTest, value_text: str, times: dict[str, Any]) -> TestResult:
        ok, got = records.loads(value_text)
        if not ok:  # not JSON, or nested deeper than records.MAX_DEPTH: not a value the test can accept
            return TestResult(test.name, Verdict.WRONG_ANSWER, **times, got=_short(value_text))
        expected = json.loads(json.dumps(test.expected))
        if compare.values_equal(got, expected, rel_tol=test.rel_tol, abs_tol=test.abs_tol):
            return TestResult(test.name, Verdict.PASSED, **times)
        return TestResult(
            test.name,
            Verdict.WRONG_ANSWER,
            **times,
            input=self._input(test),
            expected=_short(json.dumps(test.expected)),
            got=_short(value_text),
        )

    def _probed_result(self, test: CodeTest, values_text: str, times: dict[str, Any]) -> TestResult:
        """An assert test's probed values, judged against the expectations only the parent holds."""
        expectations = asserts.plan(test.code).expectations
        values = asserts.decode_values(values_text, len(expectations))
        if values is None:
            message = f"the probed values are malformed or not {len(expectations)} (forged record?)"
            return TestResult(test.name, Verdict.WRONG_ANSWER, **times, error_message=message)
        for expectation, got in zip(expectations, values, strict=True):
            if not asserts.check(expectation, got):
                return TestResult(
                    test.name,
                    Verdict.WRONG_ANSWER,
                    **times,
                    input=_short(expectation.source),
                    expected=_short(expectation.describe()),
                    got=_short(repr(got)),
                    error_type="AssertionError",
                    error_message=_short(expectation.message),
                )
        return TestResult(test.name, Verdict.PASSED, **times)

    def _io_result(
        self, test: IOTest, record: dict[str, Any], times: dict[str, Any]
    ) -> tuple[TestResult, LimitKind]:
        stdout = str(record.get("stdout") or "")
        if (
            record.get("output_limit")
            or record.get("signal") is not None
            or _int(record.get("exit_code")) != 0
        ):
            verdict, kind, message = self.death(record)
            error = record.get("error")
            error = error if isinstance(error, dict) else {}
            return TestResult(
                test.name,
                verdict,
                **times,
                input=self._input(test),
                got=_short(stdout),
                error_type=_short(error.get("type")),
                error_message=_short(error.get("message") or message),
                traceback_tail=_short(error.get("tb")),
            ), kind
        if compare.outputs_equal(
            stdout, test.expected_stdout, mode=test.compare, rel_tol=test.rel_tol, abs_tol=test.abs_tol
        ):
            return TestResult(test.name, Verdict.PASSED, **times), None
        return TestResult(
            test.name,
            Verdict.WRONG_ANSWER,
            **times,
            input=self._input(test),
            expected=_short(test.expected_stdout),
            got=_short(stdout),
        ), None


def assemble(request: ExecutionRequest, state: RunState, stats: CgroupStats | None) -> ExecutionResult:
    judge = Judge(request, state, stats)
    by_index = {
        int(r["i"]): r for r in state.records if r.get("kind") == "test" and isinstance(r.get("i"), int)
    }
    compile_record = next((r for r in state.records if r.get("kind") == "compile"), None)
    run_record = next((r for r in state.records if r.get("kind") == "run"), None)
    tests: list[TestResult] = []
    kinds: list[LimitKind] = []
    extra: dict[str, Any] = {}
    compile_failed = compile_record is not None and not compile_record.get("ok")
    for index, test in enumerate(request.tests):
        if compile_failed:
            tests.append(TestResult(test.name, Verdict.COMPILE_ERROR))
            continue
        record = by_index.get(index)
        if record is None:
            if state.kill_reason == "stop":
                continue  # stop_on_first_failure: tests after the first failure are not reported
            missing, kind, message = judge.unreported()
            tests.append(TestResult(test.name, missing, error_message=message))
        else:
            result, kind = judge.test_result(test, record)
            tests.append(result)
        kinds.append(kind)
    verdict: Verdict
    if compile_failed:
        verdict = Verdict.COMPILE_ERROR
    elif request.tests:
        verdict = overall_verdict([t.verdict for t in tests])
    elif run_record is not None:
        verdict, kind, message = (
            (Verdict.PASSED, None, "") if _clean_exit(run_record) else judge.death(run_record)
        )
        kinds.append(kind)
        extra = _plain_run_fields(run_record)
    else:
        verdict, kind, message = judge.unreported()
        kinds.append(kind)
        if verdict is Verdict.SANDBOX_ERROR:
            extra["sandbox_error"] = message
    if state.kill_reason == "output" and verdict is not Verdict.COMPILE_ERROR:
        verdict = Verdict.OUTPUT_LIMIT
    if request.tests and not compile_failed and not state.done and verdict is Verdict.PASSED:
        verdict = Verdict.SANDBOX_ERROR
        extra["sandbox_error"] = "the harness ended without its final record"
    if verdict is Verdict.SANDBOX_ERROR and "sandbox_error" not in extra:
        extra["sandbox_error"] = next(
            (t.error_message for t in tests if t.verdict is Verdict.SANDBOX_ERROR), None
        )
    return _result(request, state, stats, verdict, tests, kinds, compile_record, extra)


def _plain_run_fields(record: dict[str, Any]) -> dict[str, Any]:
    """What a plain run's ``run`` record adds to the result: exit status, the program's own wall time
    (the harness's, compile excluded) and, for Python, the uncaught exception it reported."""
    error = record.get("error")
    error = error if isinstance(error, dict) else {}
    return {
        "exit_code": _int(record.get("exit_code")),
        "signal": _int(record.get("signal")),
        "run_wall_time_s": records.finite(record.get("wall_s")) or 0.0,
        "error_type": _short(error.get("type")),
        "error_message": _short(error.get("message")),
    }


def _matches(test: CodeTest | CallTest | IOTest, status: str) -> bool:
    """Whether ``status`` is the one record that may answer ``test``: an assert test with probes is
    answered only by their values (an ``ok`` for it is forged), one without only by ``ok``."""
    if isinstance(test, CodeTest):
        return status == ("probed" if asserts.plan(test.code).expectations else "ok")
    return status == {CallTest: "value", IOTest: "output"}[type(test)]


def _clean_exit(record: dict[str, Any]) -> bool:
    return (
        _int(record.get("exit_code")) == 0 and record.get("signal") is None and not record.get("wall_limit")
    )


def _result(
    request: ExecutionRequest,
    state: RunState,
    stats: CgroupStats | None,
    verdict: Verdict,
    tests: list[TestResult],
    kinds: list[LimitKind],
    compile_record: dict[str, Any] | None,
    extra: dict[str, Any],
) -> ExecutionResult:
    limit = request.limits.max_output_bytes
    stdout, out_cut = truncate(state.stdout.decode("utf-8", "replace"), limit)
    stderr, err_cut = truncate(state.stderr.decode("utf-8", "replace"), limit)
    if state.stdout_over and not out_cut:
        stdout += TRUNCATION_MARKER.format(n=state.stdout_dropped)
    if state.stderr_over and not err_cut:
        stderr += TRUNCATION_MARKER.format(n=state.stderr_dropped)
    limit_kind = None
    if verdict is Verdict.TIME_LIMIT:
        limit_kind = next(
            (k for k in kinds if k is not None), "wall" if state.kill_reason == "wall" else "cpu"
        )
    compile_output = str(compile_record.get("output") or "") if compile_record else ""
    files, file_errors = fetched_files(request, state)
    return ExecutionResult(
        verdict=verdict,
        tests=tuple(tests),
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=out_cut or state.stdout_over,
        stderr_truncated=err_cut or state.stderr_over,
        limit_kind=limit_kind,
        compile_output=truncate(compile_output, limit)[0],
        compile_wall_time_s=(records.finite(compile_record.get("wall_s")) or 0.0) if compile_record else 0.0,
        compile_timed_out=_compile_timed_out(compile_record),
        cpu_time_s=stats.cpu_time_s if stats else sum(t.cpu_time_s for t in tests),
        wall_time_s=state.wall_s,
        peak_memory_mb=stats.peak_memory_mb if stats else 0.0,
        files=files,
        file_errors=file_errors,
        **extra,
    )


def _compile_timed_out(record: dict[str, Any] | None) -> bool:
    """The compiler hit the compile step's wall-clock limit or its CPU rlimit (SIGXCPU). A SIGKILL is not
    counted: it may be the memory limit's as well as the CPU hard limit's."""
    if record is None or record.get("ok"):
        return False
    return bool(record.get("wall_limit")) or _int(record.get("signal")) == signal.SIGXCPU


_STOPPED = {
    "wall": " (wall-clock limit)",
    "cpu": " (CPU time limit)",
    "output": " (output limit)",
    "protocol": " (the program broke the record protocol)",
    "stop": " (stop_on_first_failure)",
}


def fetched_files(request: ExecutionRequest, state: RunState) -> tuple[dict[str, bytes], dict[str, str]]:
    """The request's ``fetch_files`` as ``(files, file_errors)``: every path in exactly one of them.

    The records come from the harness, which read the files itself (``workfiles.fetch_all``); still read
    by type, the first record per requested path counts and any other is ignored."""
    wanted = set(request.fetch_files)
    files: dict[str, bytes] = {}
    errors: dict[str, str] = {}
    for record in state.records:
        path = record.get("path")
        if record.get("kind") != "file" or not isinstance(path, str) or path not in wanted:
            continue
        if path in files or path in errors:
            continue
        data, error = record.get("data"), record.get("error")
        if isinstance(data, str):
            try:
                files[path] = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                errors[path] = "the harness sent it garbled (not base64)"
        else:
            errors[path] = error if isinstance(error, str) else "the harness gave no reason"
    why = _STOPPED.get(state.kill_reason or "", "")
    for path in request.fetch_files:
        if path not in files and path not in errors:
            errors[path] = (
                f"not read: the sandbox was stopped before its harness read the work directory{why}"
            )
    return files, errors


def sandbox_error_result(message: str) -> ExecutionResult:
    return ExecutionResult(verdict=Verdict.SANDBOX_ERROR, sandbox_error=message)
