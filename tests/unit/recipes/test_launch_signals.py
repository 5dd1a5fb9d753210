"""``launch_ranks`` (``execrl train --nproc``) runs torch's elastic agent in this process; the agent installs
its own SIGINT/SIGTERM/SIGHUP/SIGQUIT handlers and never puts the previous ones back.

Regression: after an in-process ``--nproc`` run, a later ``execrl tools run`` in the same process got
torch's ``SignalException`` handler for Ctrl-C, so an interrupted run went on and exited 0 instead of
writing its partial report and exiting 130 (seen in the suite as a flaky
``test_an_interrupted_run_writes_the_finished_episodes[SIGINT]``).
"""

from __future__ import annotations

import signal

import pytest

from execrl.recipes.launch import launch_ranks


@pytest.mark.slow
# torch's elastic agent leaves its rank log files open when a rank fails (theirs, not this test's subject)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning")
def test_launch_ranks_puts_the_signal_handlers_back() -> None:
    def mine(signum: int, frame: object) -> None:  # pragma: no cover - never delivered
        raise AssertionError("not called")

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    previous = {sig: signal.signal(sig, mine) for sig in sigs}
    try:
        code = launch_ranks(2, ["--no-such-flag"], shutdown_timeout_s=30)  # both ranks exit 2 at once
        assert code != 0
        assert {sig: signal.getsignal(sig) for sig in sigs} == dict.fromkeys(sigs, mine)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
