"""Hostile programs in every sandbox language (issue 13's acceptance): a write outside the work
directory, reading host files, a network connection, a memory bomb and a fork bomb are all contained,
each with its verdict, and no process survives (``conftest.host_untouched``, which checks every pool:
the ``python-data`` runtime's, where the same hazards run in Python with numpy, too).

Verdicts: the escape attempts are refused at the system-call level (read-only mounts, files that do not
exist in the jail, an empty network namespace and seccomp's socket filter), so the program runs on and
prints ``denied`` four times: ``passed``. A memory bomb is ``memory_limit`` (the cgroup's OOM kill); for
Java also ``runtime_error`` with ``OutOfMemoryError`` when the heap cap (``-Xmx`` = the memory limit)
is reached before the cgroup's. A fork bomb ends with its spawn refused (pids.max / RLIMIT_NPROC):
the program prints ``refused`` (``passed``), or its runtime dies of it (``runtime_error``: Go and the
JVM need threads of their own), or, for bash's classic bomb, which retries forever, ``time_limit``.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from hostile_programs import PROGRAMS, PYTHON_DATA
from security_helpers import host_file_absent

from execrl.sandbox import ExecutionRequest, IOTest, Limits, Sandbox, Verdict

DENIED = "write denied\nshadow denied\nsecret denied\nnet denied\n"


@pytest.mark.parametrize(
    ("language", "runtime"), [*((name, None) for name in sorted(PROGRAMS)), ("python", "python-data")]
)
def test_hostile_programs_are_contained(
    sandbox: Sandbox, language: str, runtime: str | None, tmp_path: Path, listener: socket.socket
) -> None:
    """``python-data`` runs in a pool and zygote of its own (numpy preloaded); ``host_untouched`` checks
    every pool for survivors."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret\n")
    target = f"/usr/lib/execrl-escape-{language}-{runtime}-{tmp_path.name}"
    port = listener.getsockname()[1]
    tests = (
        IOTest("escape", f"escape {secret} {port} {target}\n", DENIED, compare="exact"),
        IOTest("memory", "memory\n", ""),
        IOTest("fork", "fork\n", "refused\n"),
    )
    limits = Limits(memory_mb=128, max_processes=32, timeout_s=60.0, cpu_time_s=20.0)
    request = ExecutionRequest(
        language=language,
        program=PYTHON_DATA if runtime == "python-data" else PROGRAMS[language],
        tests=tests,
        limits=limits,
        runtime=runtime,
    )
    result = sandbox.run(request)
    escape, memory, fork = result.tests
    assert escape.verdict is Verdict.PASSED, (escape, result.stderr)
    assert host_file_absent(target)
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing reached the host's listener
    assert "host-secret" not in result.stdout + result.stderr
    java_heap = language == "java" and "OutOfMemoryError" in result.stderr
    assert memory.verdict is Verdict.MEMORY_LIMIT or (
        java_heap and memory.verdict is Verdict.RUNTIME_ERROR
    ), memory
    if language == "bash":  # the classic bomb has no output to judge: it ends, or is stopped, unpassed
        assert fork.verdict in (Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR, Verdict.TIME_LIMIT), fork
    else:
        assert fork.verdict in (Verdict.PASSED, Verdict.RUNTIME_ERROR), (fork, result.stderr[-2000:])
