"""Work a cell leaves running is charged, and stops while no cell runs (issue 35, class 6).

A cell can start threads and processes that outlive it. Under RL that is a reward hack: a sample that
leaves spinners behind takes the machine's CPU from its siblings' cells (whose wall-clock limits then
cut them short) while its own cells look cheap, bounded only by the session's ``cpu_time_s``, which
the tool recipe never lowered. A session's cgroup is now frozen between its cells, so what a cell left
running computes only while a later cell of the same session runs, and is charged to that cell (once
the watchdog has seen the session compute between cells: one ``WATCH_INTERVAL_S`` of it at most); and
the session's CPU is its cgroup's whole count, between cells included. The sandbox fixture runs every
test under both seccomp policies.
"""

from __future__ import annotations

import time

import pytest

from execrl.sandbox import Sandbox, Session, SessionLimits, Verdict

CAUGHT_S = 0.4  # the watchdog polls every 0.1 s: by then it has frozen a session that computes idle

LIMITS = SessionLimits(cell_timeout_s=5, memory_mb=128, max_processes=16)
SPINNERS = """
import subprocess, sys, threading
def spin():
    while True:
        pass
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
children = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(2)]
"""


def _cpu_s(session: Session) -> float:
    slot = session._endpoint.slot
    assert slot is not None
    return slot.cpu_time_s()


def _freezes(session: Session) -> bool:
    """Whether the host's cgroups have a freezer for the session (``getattr``: the code before the fix
    had no such attribute, and this test ran and failed there)."""
    slot = session._endpoint.slot
    return slot is not None and getattr(slot, "can_freeze", True)


def test_what_a_cell_leaves_running_waits_for_the_next_cell(sandbox: Sandbox) -> None:
    """Regression: two threads and two processes a cell left spinning used ~1 CPU-s per second between
    cells, charged to no cell (4.4 CPU-s after a cell of milliseconds in the hostile round). Now they
    use none until the next cell, whose ``cpu_s`` counts them; the session's ``cpu_s`` is its cgroup's."""
    with sandbox.open_session(limits=LIMITS) as session:
        if not _freezes(session):
            pytest.skip("this host's cgroups have no freezer")
        started = session.run(SPINNERS)
        assert started.passed, started
        time.sleep(CAUGHT_S)
        before = _cpu_s(session)
        time.sleep(0.5)
        assert _cpu_s(session) - before < 0.05  # nothing ran between the cells
        later = session.run("import time\ntime.sleep(0.5)\nsum(c.poll() is None for c in children)")
        assert later.value == "2" and later.cpu_s > 0.05, later  # they ran during it, charged to it
        assert session.stats().cpu_s >= started.cpu_s + later.cpu_s - 1e-6
        time.sleep(0.3)  # and from now on it is frozen as soon as a cell ends
        assert _cpu_s(session) - session._rest_cpu_s < 0.01  # type: ignore[operator]


def test_a_siblings_leftovers_do_not_run_during_another_forks_cell(sandbox: Sandbox) -> None:
    """Regression: a fork's spinners kept computing while its sibling's cell ran (the sibling's cell
    shares the machine with them, and its wall-clock limit cut it short). Now the spinners' fork is
    frozen while it runs no cell: its CPU does not move during the sibling's busy cell."""
    template = sandbox.open_template(setup=["x = 1"], limits=LIMITS)
    a, b = forks = template.fork(2)
    template.close()
    try:
        if not _freezes(a):
            pytest.skip("this host's cgroups have no freezer")
        assert a.run(SPINNERS).passed
        time.sleep(CAUGHT_S)
        before = _cpu_s(a)
        busy = b.run(
            "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass"
        )
        assert busy.passed and busy.cpu_s >= 0.3, busy
        assert _cpu_s(a) - before < 0.05
    finally:
        for fork in forks:
            fork.close()


def test_the_sessions_cpu_budget_counts_work_left_running(sandbox: Sandbox) -> None:
    """The session's ``cpu_time_s`` bounds everything its processes use, whichever cell started them:
    a spinner left by the first cell runs during the next ones, and the session ends at its budget."""
    limits = SessionLimits(cell_timeout_s=5, memory_mb=128, max_processes=16, cpu_time_s=0.6)
    with sandbox.open_session(limits=limits) as session:
        assert session.run(SPINNERS).passed
        results = [session.run("import time\ntime.sleep(0.2)") for _ in range(20)]
        ended = next(r for r in results if not r.session_alive)
        assert (ended.verdict, ended.limit) == (Verdict.TIME_LIMIT, "cpu_time_s"), ended
        assert session.stats().cpu_s < 0.6 + 0.3  # the budget, and at most one poll's overshoot
