"""What runs in a candidate process ``C`` (forked by the harness, one per program run; or the harness's
own process for a single function/assert test, ``testgroups.runs_inline``).

Everything here after ``prelude`` runs in the same process as untrusted code, so nothing it reports is
trusted by itself: the harness (``harness.py``) treats each record as data, the parent judges values and
outputs against expected values that never enter the sandbox (see ``harness.py`` for the argument).

Records are JSON lines written to the record pipe:
``{"kind": "loaded"}`` after the program's top level ran, ``{"kind": "program_error", ...}`` if it raised,
then per test ``{"i": k, "status": "ok" | "value" | "probed" | "error", ...}`` (``probed``: the values of
an assert test's probes, ``asserts.py``, as one JSON list in ``value``).
"""

from __future__ import annotations

import _sitebuiltins
import builtins
import contextlib
import json
import math
import os
import resource
import signal
import sys
import time
import traceback

from execrl.sandbox.zygote import pyexit

# Annotations only: importing ``typing`` would add ~2 MB to the zygote, and to every fork of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn


TRACEBACK_LINES = 12
ALL_FDS = 1 << 20  # above any descriptor the sandbox can have (its RLIMIT_NOFILE is capped far lower)
PRELUDE_FAILED = 121
MESSAGE_CHARS = 2000
PROBE = "__execrl_probe__"  # the name ``asserts.plan`` gives the probe in a rewritten assert test
VALUE_DEPTH = 100  # as ``records.MAX_DEPTH``: deeper values are not plain values for the parent
# What the harness calls in a candidate process after the program ran, bound at import (in the zygote,
# before any candidate byte exists): a program that replaces ``builtins.exec``, ``json.dumps`` or the
# ``time`` functions changes its own code's behaviour, not the harness's (``pyexit`` for the exit path).
_exec, _compile, _len, _str, _type = exec, compile, len, str, type
_dumps, _loads = json.dumps, json.loads
_perf_counter, _process_time = time.perf_counter, time.process_time
_BaseException, _KeyError = BaseException, KeyError


def write_all(fd: int, data: bytes, write: Callable[[int, memoryview], int] = os.write) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less than asked to a pipe). ``write``: the
    candidate process passes a reference to ``os.write`` taken before the program ran (``_Records``)."""
    view = memoryview(data)
    while view:
        view = view[write(fd, view) :]


def text_bytes(text: str) -> bytes:
    """What the harness writes for a string of the job (stdin, files, the program): its UTF-8, with a
    lone surrogate passed through as its three-byte form (``surrogatepass``), as the job itself was
    encoded (``runner.encode_job``). The program reads invalid UTF-8 there, its own business; a strict
    encode raised in the harness, a ``sandbox_error`` chosen by whoever wrote the string."""
    return text.encode("utf-8", "surrogatepass")


def prelude(
    keep: set[int],
    stdin_data: bytes,
    stdout_fd: int | None,
    cpu_left_s: float,
    limits: dict[str, Any],
    new_session: bool = True,
) -> None:
    """Trusted set-up before any candidate byte runs: fds, stdin, rlimits (lowering is allowed
    unprivileged). The uid is already the candidate's (``jail._drop_privileges``)."""
    if new_session:  # pid 1 of the sandbox (inline runs) already leads its own session
        os.setsid()
    if stdin_data:  # else stdin stays the harness's /dev/null, which reads as empty just the same
        memfd = os.memfd_create("stdin", 0)
        write_all(memfd, stdin_data)
        os.lseek(memfd, 0, os.SEEK_SET)
        os.dup2(memfd, 0)
        os.close(memfd)
    if stdout_fd is not None:
        os.dup2(stdout_fd, 1)
    low = 0
    for fd in sorted(keep | {0, 1, 2}):  # close_range(2) around the kept ones: no /proc listing
        if fd > low:  # never an empty range: CPython would pass close_range(low, low - 1), i.e. "all"
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, ALL_FDS)
    resource.setrlimit(resource.RLIMIT_CPU, cpu_rlimit(cpu_left_s))
    _reseed_preloaded()
    set_job_rlimits(limits)


def set_job_rlimits(limits: dict[str, Any]) -> None:
    """The candidate's per-job limits, soft = hard: file size, open files, processes (+2: the harness and
    the candidate itself share its uid). Set in ``C`` after a fork, or in ``H`` before a spawn
    (``spawn.SelfLimits``), which the program then inherits."""
    cap_rlimit(resource.RLIMIT_FSIZE, int(limits["max_file_mb"]) << 20)
    cap_rlimit(resource.RLIMIT_NOFILE, int(limits["max_open_files"]))
    cap_rlimit(resource.RLIMIT_NPROC, int(limits["max_processes"]) + 2)


def cap_rlimit(which: int, value: int) -> None:
    """Set soft = hard = ``value``, clamped to the current hard limit (raising it needs CAP_SYS_RESOURCE,
    which containers often drop)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


_GLOBAL_RNGS: list[Any] = []  # module-level generators the zygote preloaded (``find_global_rngs``)


def find_global_rngs() -> None:
    """Once, in the zygote after its preloads: every module-level random generator with state of its
    own (``random``'s ``_inst``, numpy's legacy global ``RandomState``, any other module's global
    ``random.Random``/``RandomState``), to reseed per execution (``_reseed_preloaded``). Every sandbox is
    a copy of the zygote, so without that each would draw the same numbers: the worker is a raw
    ``clone``, which runs no at-fork hook, and an inline run (``testgroups.runs_inline``) never forks. OS-
    backed generators (``secrets``' ``SystemRandom``) have no state; state deeper than a module's
    globals (an object's attribute) is not found."""
    random = sys.modules.get("random")
    kinds: tuple[type, ...] = (random.Random,) if random is not None else ()
    system = random.SystemRandom if random is not None else None
    mtrand = sys.modules.get("numpy.random.mtrand")
    if mtrand is not None:
        kinds += (mtrand.RandomState,)
    if not kinds:
        return
    seen = {id(generator) for generator in _GLOBAL_RNGS}
    for module in list(sys.modules.values()):
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, kinds) and type(value) is not system and id(value) not in seen:
                seen.add(id(value))
                _GLOBAL_RNGS.append(value)


def _reseed_preloaded() -> None:
    """Reseed each generator ``find_global_rngs`` found from the OS, as a fresh import would seed it:
    a test that draws random inputs draws new ones in every execution (a policy cannot memorise them)."""
    for generator in _GLOBAL_RNGS:
        generator.seed()


def cpu_rlimit(cpu_left_s: float) -> tuple[int, int]:
    """RLIMIT_CPU (soft, hard) of a candidate process with ``cpu_left_s`` of the budget left: SIGXCPU at
    the budget (whole seconds), SIGKILL a second later."""
    cpu = max(1, math.ceil(cpu_left_s))
    return cpu, cpu + 1


def prelude_failed(exc: BaseException) -> NoReturn:
    """A failure in the trusted set-up is the sandbox's fault: say so on stderr, exit with 121."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    os.write(2, f"execrl harness: child set-up failed:\n{text}".encode())
    os._exit(PRELUDE_FAILED)


def prepare_interpreter() -> None:
    """Once, in the zygote (which never reads or writes them): the standard streams and builtins a
    candidate expects, inherited by every worker instead of being rebuilt in each (~30 page faults).

    ``exit``/``quit`` as ``site`` would add them (the zygote runs with ``-S``; programs use them); the
    streams keep their descriptors 0/1/2 (the harness points those at the job's pipes before any
    candidate code runs) and only change how they treat undecodable text.
    """
    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    streams = ((sys.stdin, "replace"), (sys.stdout, "backslashreplace"), (sys.stderr, "backslashreplace"))
    for stream, errors in streams:
        stream.reconfigure(encoding="utf-8", errors=errors)  # type: ignore[union-attr]


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _candidate_traceback(exc: BaseException) -> list[str]:
    """The traceback without the harness's own leading frames (they are noise, and host paths)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return traceback.format_exception(type(exc), exc, tb)


def error_fields(exc: BaseException) -> dict[str, str]:
    lines = _candidate_traceback(exc)
    tail = "".join(lines).splitlines()[-TRACEBACK_LINES:]
    try:
        message = str(exc)[:MESSAGE_CHARS]
    except Exception as inner:  # noqa: BLE001 - a candidate exception's __str__ may raise anything
        message = f"<str() failed: {type(inner).__name__}>"
    return {"type": type(exc).__name__, "message": message, "tb": "\n".join(tail)}


class _Records:
    """Writes JSON lines to the record pipe with a reference to ``os.write`` taken before the program ran."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self.fd = fd
        self.max_bytes = max_bytes
        self._write = os.write
        self._dumps = json.dumps

    def send(self, record: dict[str, Any]) -> None:
        data = (self._dumps(record) + "\n").encode("utf-8", "replace")
        if _len(data) > self.max_bytes:
            data = (self._dumps({**_small(record), "status": "too_large", "size": len(data)}) + "\n").encode()
        write_all(self.fd, data, self._write)


def _small(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k in ("i", "kind")}


def _exec_program(source: str, path: str, module_name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": module_name, "__builtins__": builtins, "__file__": path}
    code = _compile(source, path, "exec")
    _exec(code, namespace)
    return namespace


def run_main(
    job: dict[str, Any], stdin: bytes, stdout_fd: int | None, rec_fd: int, cpu_left_s: float
) -> NoReturn:
    """Run the program as ``__main__`` (plain runs and stdin/stdout tests), ending exactly as
    ``python main.py`` would (``pyexit.finish``: exit status, hooks, threads, ``atexit``, flushes) with
    nothing looked up after the program ran that the program could have replaced."""
    exit_now, status = pyexit.exit_now, 1
    try:
        keep = {rec_fd} | ({stdout_fd} if stdout_fd is not None else set())
        try:
            prelude(keep, stdin, stdout_fd, cpu_left_s, job["limits"])
        except BaseException as exc:  # noqa: BLE001
            prelude_failed(exc)
        records = _Records(rec_fd, 1 << 16)
        module = _run_module(job["language"].get("run"))
        sys.argv = [job["program_path"]] if module is None else module
        sys.path.insert(0, os.getcwd())
        error: BaseException | None = None
        try:
            if module is None:
                _exec_program(job["program"], job["program_path"], "__main__")
            else:
                _runpy().run_module(module[0], run_name="__main__", alter_sys=True)
        except _BaseException as exc:  # noqa: BLE001 - the candidate's failure is data
            error = exc
        if error is not None and not pyexit.is_system_exit(error):
            try:  # noqa: SIM105 - not contextlib.suppress, whose methods the program could patch
                records.send({"kind": "program_error", **error_fields(error)})
            except _BaseException:  # noqa: BLE001 - e.g. an exception type whose name is no text
                pass
        status = pyexit.finish(error, __file__)
    finally:
        exit_now(status)


def _run_module(run: list[str] | None) -> list[str] | None:
    """``[module, *args]`` when the language runs a module on the program (``python -m pytest main.py``:
    its ``run`` argv is ``["-m", module, *args]``), else None (the program itself is ``__main__``)."""
    if run and len(run) >= 2 and run[0] == "-m":
        return run[1:]
    return None


def _runpy() -> Any:
    import runpy  # only a module-running language needs it; the zygote stays lean

    return runpy


_TAGS: dict[type[tuple[Any, ...] | set[Any] | frozenset[Any]], str] = {tuple: "t", set: "s", frozenset: "f"}


def encode_value(value: Any, depth: int = 0) -> Any:
    """A probed value as JSON data that keeps Python's distinctions (``asserts.decode_value`` reads it):
    tuples, sets, frozensets, dicts (any hashable keys), bytes and complex numbers are tagged, so
    ``[1, 2] != (1, 2)`` survives. Subclasses compare as their base type (a ``Counter`` as a ``dict``, a
    named tuple as a ``tuple``, as ``==`` treats them); a NumPy scalar as its Python value. Anything else
    is ``{"u": type name}``, which the parent judges equal to nothing."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if depth >= VALUE_DEPTH:
        raise ValueError("nested too deep")
    for base in (int, float, str):
        if isinstance(value, base):
            return base(value)
    if isinstance(value, list):
        return [encode_value(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {"d": [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in value.items()]}
    for container, tag in _TAGS.items():
        if isinstance(value, container):
            return {tag: [encode_value(item, depth + 1) for item in value]}
    if isinstance(value, bytes | bytearray):
        return {"b": bytes(value).decode("latin-1")}
    if isinstance(value, complex):
        return {"c": [value.real, value.imag]}
    if getattr(kind, "__module__", "") == "numpy" and getattr(value, "ndim", None) == 0:
        return encode_value(value.item(), depth + 1)
    return {"u": kind.__name__}


def _prober(values: list[str]) -> Callable[[Any], None]:
    """The probe a rewritten assert test calls (``asserts``): it records the value, it judges nothing."""
    dumps = json.dumps

    def probe(value: Any) -> None:
        try:
            values.append(dumps(encode_value(value)))
        except (TypeError, ValueError, RecursionError):  # e.g. an int past the str-conversion limit
            values.append(dumps({"u": type(value).__name__}))

    return probe


def _jsonable(value: Any) -> Any:
    """Tuples become lists (JSON has none); anything else JSON cannot hold raises TypeError."""
    return _loads(_dumps(value, allow_nan=True))


def _run_test(namespace: dict[str, Any], test: dict[str, Any], index: int) -> dict[str, Any]:
    start_wall, start_cpu = _perf_counter(), _process_time()
    result: dict[str, Any]
    try:
        if test["kind"] == "code":
            values: list[str] = []
            namespace[PROBE] = _prober(values)
            _exec(_compile(test["code"], f"<test {index}>", "exec"), namespace)
            result = (
                {"status": "probed", "value": f"[{','.join(values)}]"} if test["probes"] else {"status": "ok"}
            )
        else:
            fn: Callable[..., Any] = namespace[test["entry_point"]]
            value = fn(*test["args"], **test["kwargs"])
            try:
                result = {"status": "value", "value": _dumps(_jsonable(value))}
            except (TypeError, ValueError, RecursionError) as exc:
                result = {"status": "unserializable", "type": type(value).__name__, "message": str(exc)[:200]}
    except _KeyError as exc:
        if test["kind"] == "call" and test["entry_point"] not in namespace:
            result = {
                "status": "error",
                "type": "NameError",
                "message": f"{test['entry_point']!r} is not defined",
            }
        else:
            result = {"status": "error", **error_fields(exc)}
    except _BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt count as failures too
        result = {"status": "error", **error_fields(exc)}
    result["cpu_s"] = _process_time() - start_cpu
    result["wall_s"] = _perf_counter() - start_wall
    return result


def run_tests(
    job: dict[str, Any],
    indices: list[int],
    rec_fd: int,
    cpu_left_s: float,
    max_bytes: int,
    new_session: bool = True,
) -> NoReturn:
    """Run the program once (as ``__candidate__``), then each function/assert test, reporting each.

    Also the inline path (``testgroups.runs_inline``): then this process is the sandbox's pid 1 and
    ``rec_fd`` goes straight to the parent, which validates these records itself. It ends through
    ``pyexit.exit_now``: ``os._exit = None`` in the program (SandboxFusion's anti-hack prelude) must not
    turn the end of a run into an exception that climbs into the harness's own code."""
    exit_now = pyexit.exit_now
    try:
        try:
            prelude({rec_fd}, text_bytes(job["stdin"]), None, cpu_left_s, job["limits"], new_session)
        except BaseException as exc:  # noqa: BLE001
            prelude_failed(exc)
        records = _Records(rec_fd, max_bytes)
        sys.argv = [job["program_path"]]
        sys.path.insert(0, os.getcwd())
        try:
            namespace = _exec_program(job["program"], job["program_path"], "__candidate__")
        except _BaseException as exc:  # noqa: BLE001 - the candidate's failure is data
            records.send({"kind": "program_error", **error_fields(exc)})
            _flush()
            exit_now(0)
        records.send({"kind": "loaded"})
        for index in indices:
            result = _run_test(namespace, job["tests"][index], index)
            _flush()
            records.send({"i": index, **result})
        _flush()
    finally:
        exit_now(0)


def exec_program(
    argv: list[str],
    stdin: bytes,
    stdout_fd: int | None,
    cpu_left_s: float,
    limits: dict[str, Any],
    env: dict[str, str] | None = None,
    rec_fd: int | None = None,
    merge_stderr: bool = False,
) -> NoReturn:
    """Exec a compiler or a program, its stdout to ``stdout_fd`` when given, and its stderr there too
    with ``merge_stderr`` (a compiler's diagnostics; a program's stderr never mixes into the stdout a
    test judges). ``env`` is
    added to the sandbox's environment (a compiler's cache directory); ``rec_fd`` becomes fd
    ``RECORD_FD`` of the program (a call harness in another language writes its records there)."""
    try:
        try:
            keep = ({stdout_fd} if stdout_fd is not None else set()) | (
                {rec_fd} if rec_fd is not None else set()
            )
            prelude(keep, stdin, stdout_fd, cpu_left_s, limits)
            if rec_fd is not None:
                move_fd(rec_fd, RECORD_FD)
        except BaseException as exc:  # noqa: BLE001
            prelude_failed(exc)
        if stdout_fd is not None and merge_stderr:
            os.dup2(1, 2)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        os.execve(argv[0], argv, {**os.environ, **in_workdir(env or {})})
    finally:
        os._exit(127)


RECORD_FD = 3  # as ``languages.CALL_RECORD_FD``


def in_workdir(env: dict[str, str]) -> dict[str, str]:
    """``env`` with values starting ``./`` made absolute under the work directory (the current one): a
    compiler's cache goes into this execution's directory under either backend (the unisolated one has
    no private ``/tmp``)."""
    cwd = os.getcwd()
    return {key: f"{cwd}/{value[2:]}" if value.startswith("./") else value for key, value in env.items()}


def move_fd(fd: int, target: int) -> None:
    """``fd`` as ``target``, inherited across ``execve`` (``os.pipe`` descriptors are close-on-exec, and
    ``dup2`` onto itself would keep that flag)."""
    if fd != target:
        os.dup2(fd, target)
        os.close(fd)
    os.set_inheritable(target, True)
