"""Resource exhaustion hazards (#1-#6, #13, #15): each asserts the verdict and that the host is untouched."""

from __future__ import annotations

import resource

from security_helpers import assert_no_survivors, py

from execrl.sandbox import CallTest, ExecutionRequest, IOTest, Limits, Sandbox, Verdict


def test_fork_bomb_is_contained(sandbox: Sandbox) -> None:
    result = sandbox.run(py("import os\nwhile True:\n    os.fork()\n"))
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "BlockingIOError" in result.stderr  # pids.max / RLIMIT_NPROC said no
    assert_no_survivors(sandbox)


def test_thread_bomb_is_contained(sandbox: Sandbox) -> None:
    program = (
        "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(30,)).start()\n"
    )
    result = sandbox.run(py(program, timeout_s=2.0))
    # The main thread dies of RuntimeError; then, as plain ``python`` does, the exit waits for the
    # non-daemon threads (``pyexit``), so the wall limit ends the run (it was runtime_error before
    # issue 28, when the harness skipped CPython's thread shutdown).
    assert result.verdict is Verdict.TIME_LIMIT and result.limit_kind == "wall"
    assert "can't start new thread" in result.stderr
    assert_no_survivors(sandbox)


def test_memory_bomb_is_memory_limit(sandbox: Sandbox) -> None:
    result = sandbox.run(
        py("chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n", memory_mb=96)
    )
    assert result.verdict is Verdict.MEMORY_LIMIT
    assert result.peak_memory_mb <= 96.5
    assert_no_survivors(sandbox)


def test_memory_bomb_in_a_call_test_is_memory_limit(sandbox: Sandbox) -> None:
    program = "def f():\n    x = [bytearray(8 << 20) for _ in range(100)]\n    return len(x)\n"
    result = sandbox.run(py(program, CallTest("t", "f", expected=100), memory_mb=64))
    assert result.tests[0].verdict is Verdict.MEMORY_LIMIT
    assert result.verdict is Verdict.MEMORY_LIMIT


def test_cpu_loop_is_cpu_time_limit(sandbox: Sandbox) -> None:
    result = sandbox.run(py("while True:\n    pass\n", cpu_time_s=0.5, timeout_s=30.0))
    assert result.verdict is Verdict.TIME_LIMIT and result.limit_kind == "cpu"
    assert 0.4 <= result.cpu_time_s <= 3.0
    assert_no_survivors(sandbox)


def test_sleep_forever_is_wall_time_limit(sandbox: Sandbox) -> None:
    result = sandbox.run(py("import time\ntime.sleep(10**6)\n", timeout_s=0.5))
    assert result.verdict is Verdict.TIME_LIMIT and result.limit_kind == "wall"
    assert result.wall_time_s < 5.0
    assert_no_survivors(sandbox)


def test_blocking_read_on_empty_stdin_ends(sandbox: Sandbox) -> None:
    result = sandbox.run(py("import sys\ndata = sys.stdin.read()\nprint(len(data))\n"))
    assert result.verdict is Verdict.PASSED and result.stdout == "0\n"


def test_huge_stdout_is_output_limit_with_bounded_controller_memory(sandbox: Sandbox) -> None:
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = sandbox.run(
        py("import sys\nwhile True:\n    sys.stdout.write('x' * (1 << 20))\n", timeout_s=20.0)
    )
    after_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert result.verdict is Verdict.OUTPUT_LIMIT and result.stdout_truncated
    assert len(result.stdout.encode()) < (1 << 20) + 100
    assert after_kb - before_kb < 64 * 1024  # the parent never buffered the flood
    assert_no_survivors(sandbox)


def test_huge_stderr_is_output_limit(sandbox: Sandbox) -> None:
    result = sandbox.run(py("import os\nwhile True:\n    os.write(2, b'e' * 65536)\n", timeout_s=20.0))
    assert result.verdict is Verdict.OUTPUT_LIMIT and result.stderr_truncated


def test_ignoring_signals_still_times_out(sandbox: Sandbox) -> None:
    program = (
        "import signal\n"
        "for s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "while True:\n    pass\n"
    )
    result = sandbox.run(py(program, cpu_time_s=0.5, timeout_s=30.0))
    assert result.verdict is Verdict.TIME_LIMIT and result.limit_kind == "cpu"
    assert_no_survivors(sandbox)


def test_fd_exhaustion_is_runtime_error(sandbox: Sandbox) -> None:
    result = sandbox.run(py("fds = []\nwhile True:\n    fds.append(open('/dev/null'))\n"))
    assert result.verdict is Verdict.RUNTIME_ERROR and "Too many open files" in result.stderr


def test_fork_bomb_in_one_test_does_not_starve_the_next(sandbox: Sandbox) -> None:
    """Regression guard: stragglers of one test are killed and reaped before the next test forks, so a
    bomb cannot turn the following tests into sandbox errors (which rewards would skip, not score 0)."""
    program = (
        "import os, time\n"
        "if input() == 'bomb':\n"
        "    for _ in range(100):\n"
        "        try:\n            if os.fork() == 0:\n                time.sleep(60)\n        except OSError:\n            break\n"
        "print('ok')\n"
    )
    tests = (IOTest("bomb", "bomb", "ok"), IOTest("next", "calm", "ok"), IOTest("again", "bomb", "ok"))
    result = sandbox.run(py(program, *tests))
    assert [t.verdict for t in result.tests] == [Verdict.PASSED, Verdict.PASSED, Verdict.PASSED]


def test_compiled_cpu_loop_and_fork_bomb_are_contained(sandbox: Sandbox) -> None:
    """The same limits hold for a program the sandbox compiled and exec'd (C++), not only for Python."""
    program = (
        "#include <unistd.h>\n#include <string>\n#include <iostream>\n"
        "int main(){ std::string mode; std::cin >> mode;\n"
        '  if (mode == "fork") { while (true) { pid_t p = fork(); if (p == 0) pause();\n'
        '    if (p < 0) { std::cout << "refused"; return 0; } } }\n'
        "  volatile unsigned long x = 0; while (true) { x++; } }\n"
    )
    limits = Limits(cpu_time_s=0.5, timeout_s=30.0, max_processes=16)
    loop, fork = sandbox.run_batch(
        [
            ExecutionRequest(language="cpp", program=program, tests=(IOTest("t", mode, out),), limits=limits)
            for mode, out in (("loop", ""), ("fork", "refused"))
        ]
    )
    assert loop.verdict is Verdict.TIME_LIMIT and loop.limit_kind == "cpu"
    assert fork.verdict is Verdict.PASSED
