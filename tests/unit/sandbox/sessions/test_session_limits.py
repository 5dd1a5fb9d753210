"""Each limit of a session, per cell and per session, ends with the verdict the table in
``sandbox/sessions/types.py`` gives, and says whether the session survived; a cell that kills the
interpreter is a result, never an exception."""

from __future__ import annotations

import time

from execrl.sandbox import Sandbox, SessionLimits, Verdict

SMALL = SessionLimits(
    cell_timeout_s=0.4, cell_cpu_time_s=0.2, max_output_bytes=1000, memory_mb=64, max_processes=8
)


def test_wall_limit_interrupts_and_the_session_survives(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SMALL) as session:
        session.run("kept = 'yes'")
        result = session.run("import time\ntime.sleep(30)")
        assert (result.verdict, result.limit, result.session_alive) == (
            Verdict.TIME_LIMIT,
            "cell_timeout_s",
            True,
        )
        assert result.error_type == "KeyboardInterrupt" and result.wall_s < 2
        assert session.run("kept").value == "'yes'"


def test_cpu_limit_interrupts_a_busy_loop(sandbox: Sandbox) -> None:
    limits = SessionLimits(cell_timeout_s=20, cell_cpu_time_s=0.2)
    with sandbox.open_session(limits=limits) as session:
        result = session.run("while True:\n    pass")
        assert (result.verdict, result.limit, result.session_alive) == (
            Verdict.TIME_LIMIT,
            "cell_cpu_time_s",
            True,
        )
        assert result.cpu_s >= 0.2
        assert session.run("1 + 1").value == "2"


def test_per_call_timeout_only_lowers_the_limit(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SessionLimits(cell_timeout_s=0.3)) as session:
        assert session.run("import time; time.sleep(0.2)", timeout_s=0.05).limit == "cell_timeout_s"
        assert session.run("time.sleep(1)", timeout_s=100).wall_s < 0.9  # 100 s is capped at 0.3 s


def test_output_limit_cuts_and_interrupts(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SMALL) as session:
        once = session.run("print('x' * 5000)")
        assert (once.verdict, once.limit, once.session_alive) == (
            Verdict.OUTPUT_LIMIT,
            "max_output_bytes",
            True,
        )
        assert len(once.stdout) == 1000 and once.stdout_truncated
        endless = session.run("while True:\n    print('y' * 100)")
        assert (endless.verdict, endless.session_alive) == (Verdict.OUTPUT_LIMIT, True)
        assert session.run("'after'").value == "'after'"


def test_a_cell_ignoring_the_interrupt_ends_the_session(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SMALL) as session:
        code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)"
        result = session.run(code)
        assert (result.verdict, result.limit, result.session_alive) == (
            Verdict.TIME_LIMIT,
            "cell_timeout_s",
            False,
        )
        assert "did not stop when interrupted" in result.message
        later = session.run("1")
        assert (later.verdict, later.session_alive) == (
            Verdict.TIME_LIMIT,
            False,
        ) and "not run" in later.message


def test_memory_bomb_ends_the_session_as_memory_limit(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SMALL) as session:
        result = session.run("x = bytearray(300 << 20)")
        assert (result.verdict, result.limit, result.session_alive) == (
            Verdict.MEMORY_LIMIT,
            "memory_mb",
            False,
        )


def test_interpreter_deaths_are_runtime_errors(sandbox: Sandbox) -> None:
    """os._exit, a segfault through ctypes and a SIGKILL to itself end the session with how it died."""
    cases = {
        "import os\nos._exit(7)": {"exit_code": 7},
        "import ctypes\nctypes.string_at(0)": {"signal": 11},
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)": {"signal": 9},
    }
    for code, how in cases.items():
        with sandbox.open_session(limits=SMALL) as session:
            session.run("a = 1")
            result = session.run(code)
            assert (result.verdict, result.session_alive) == (Verdict.RUNTIME_ERROR, False), (code, result)
            assert {key: getattr(result, key) for key in how} == how, (code, result)


def test_fork_bomb_is_contained_and_the_session_survives(sandbox: Sandbox) -> None:
    """The process limit stops the bomb; the wall limit interrupts it; the session's init kills every
    process the cell left, so the next cell runs."""
    with sandbox.open_session(limits=SMALL) as session:
        bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
        result = session.run(bomb)
        assert result.verdict is Verdict.TIME_LIMIT and result.session_alive
        listing = "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())"  # zombies too
        assert session.run(listing).value == "[1, 2]"


def test_process_limit_makes_fork_fail_in_the_cell(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SMALL) as session:
        code = "import os, time\npids = []\nfor _ in range(20):\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(5); os._exit(0)\n    pids.append(pid)"
        result = session.run(code)
        assert (result.verdict, result.error_type, result.session_alive) == (
            Verdict.RUNTIME_ERROR,
            "BlockingIOError",
            True,
        )


def test_work_directory_size_is_enospc_in_the_cell(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SessionLimits(workdir_mb=1)) as session:
        result = session.run("open('big', 'wb').write(b'x' * (2 << 20))")
        assert (result.error_type, result.session_alive) == ("OSError", True)
        assert "No space left" in (result.error_message or "")


def test_max_cells(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SessionLimits(max_cells=2)) as session:
        assert session.run("1").passed and session.run("2").passed
        third = session.run("3")
        assert (third.verdict, third.limit, third.session_alive) == (
            Verdict.RUNTIME_ERROR,
            "max_cells",
            False,
        )


def test_session_cpu_budget_ends_the_session(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SessionLimits(cpu_time_s=0.2, cell_cpu_time_s=10)) as session:
        result = session.run("while True:\n    pass")
        assert (result.verdict, result.limit, result.session_alive) == (
            Verdict.TIME_LIMIT,
            "cpu_time_s",
            False,
        )


def test_lifetime_ends_a_running_cell(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SessionLimits(lifetime_s=0.3)) as session:
        result = session.run("import time\ntime.sleep(10)")
        assert (result.verdict, result.limit, result.session_alive) == (
            Verdict.TIME_LIMIT,
            "lifetime_s",
            False,
        )


def test_idle_timeout_ends_the_session_between_cells(sandbox: Sandbox) -> None:
    with sandbox.open_session(limits=SessionLimits(idle_timeout_s=0.2)) as session:
        session.run("1")
        time.sleep(0.6)
        result = session.run("2")
        assert (result.verdict, result.limit, result.session_alive) == (
            Verdict.TIME_LIMIT,
            "idle_timeout_s",
            False,
        )
        assert not session.alive


def test_death_between_cells_is_noticed(sandbox: Sandbox) -> None:
    """A background thread that kills the interpreter after its cell returned: the watchdog ends the
    session, and the next cell answers how it died. (If the watchdog saw the session compute between
    cells first, it froze it, and the thread fires during the next cell instead: the same answer.)"""
    with sandbox.open_session() as session:
        session.run("import os, threading, time\nthreading.Timer(0.05, os._exit, (9,)).start()")
        time.sleep(0.5)
        result = session.run("time.sleep(2)")
        assert (result.session_alive, result.exit_code) == (False, 9), result
