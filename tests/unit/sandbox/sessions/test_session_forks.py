"""A template's trusted setup forks into sessions that share its state copy-on-write and go on alone."""

from __future__ import annotations

import pytest

from execrl.sandbox import Sandbox, SessionError, SessionForkError, SessionLimits, Verdict
from execrl.sandbox.errors import SandboxFailure


def test_forks_share_the_setup_and_diverge(sandbox: Sandbox) -> None:
    template = sandbox.open_template(setup=["data = list(range(100))", "open('setup.txt', 'w').write('s')"])
    forks = template.fork(3)
    template.close()  # lives on until the forks end
    try:
        for i, fork in enumerate(forks):
            fork.run(f"data.append({i})\nopen('setup.txt', 'a').write('{i}')")
        answers = [fork.run("len(data), data[-1], open('setup.txt').read()").value for fork in forks]
        assert answers == ["(101, 0, 's0')", "(101, 1, 's1')", "(101, 2, 's2')"]
        assert [fork.kind for fork in forks] == ["fork"] * 3
    finally:
        for fork in forks:
            fork.close()


def test_cell_numbers_continue_from_the_setup(sandbox: Sandbox) -> None:
    template = sandbox.open_template(setup=["def helper():\n    raise ValueError('from setup')"])
    (fork,) = template.fork(1)
    template.close()
    with fork:
        result = fork.run("helper()")
    assert result.index == 2
    assert any('File "<cell 1>", line 2, in helper' in line for line in result.traceback)


def test_setup_files_and_random_state_are_per_fork(sandbox: Sandbox) -> None:
    template = sandbox.open_template(setup=["import random"], files={"in.txt": "hello"})
    forks = template.fork(2)
    template.close()
    try:
        draws = {fork.run("random.random()").value for fork in forks}
        assert len(draws) == 2  # reseeded per fork, as two fresh interpreters would be
        assert {fork.run("open('in.txt').read()").value for fork in forks} == {"'hello'"}
    finally:
        for fork in forks:
            fork.close()


def test_each_fork_has_its_own_memory_limit(sandbox: Sandbox) -> None:
    """The setup's 60 MB stay charged to the template; a fork may allocate up to its own limit, and one
    that passes it ends alone."""
    limits = SessionLimits(memory_mb=128)
    template = sandbox.open_template(setup=["big = bytearray(60 << 20)"], limits=limits)
    forks = template.fork(2)
    template.close()
    try:
        assert forks[0].run("more = bytearray(80 << 20)\nlen(more)").passed  # 60 + 80 > 128, but 80 < 128
        over = forks[1].run("more = bytearray(200 << 20)")
        assert (over.verdict, over.session_alive) == (Verdict.MEMORY_LIMIT, False)
        assert forks[0].run("len(big) + len(more)").value == str(140 << 20)
        assert forks[0].stats().memory_mb < 120
    finally:
        for fork in forks:
            fork.close()


def test_setup_rules(sandbox: Sandbox) -> None:
    with pytest.raises(SessionError, match="setup cell 1 failed"):
        sandbox.open_template(setup=["1 / 0"])
    template = sandbox.open_template(setup=["x = 1"])
    forks = template.fork(1)
    with pytest.raises(SessionForkError, match="only before the first fork"):
        template.run_setup("x = 2")
    with pytest.raises(SessionError, match="fork 1 to 64"):
        template.fork(0)
    forks += template.fork(1)  # forking again is fine
    template.close()
    with pytest.raises(SessionError):
        template.fork(1)
    for fork in forks:
        fork.close()


def test_running_out_of_slots_fails_cleanly() -> None:
    """All or nothing: a fork that finds no free slot raises and leaves no fork behind."""
    from execrl.sandbox import SandboxConfig
    from execrl.sandbox.sessions import forks as fork_steps

    original, fork_steps.SLOT_TIMEOUT_S = fork_steps.SLOT_TIMEOUT_S, 0.2
    try:
        with Sandbox(SandboxConfig(workers=1, max_sessions=3)) as small:
            template = small.open_template(setup=["x = 1"])
            with pytest.raises(SandboxFailure, match="no free sandbox slot"):
                template.fork(3)
            forks = template.fork(2)  # the slots came back
            assert [f.run("x").value for f in forks] == ["1", "1"]
            for fork in forks:
                fork.close()
            template.close()
    finally:
        fork_steps.SLOT_TIMEOUT_S = original


def test_numpy_state_forks(sandbox: Sandbox) -> None:
    template = sandbox.open_template(
        setup=["import numpy as np\nrows = np.arange(1_000_000, dtype=np.int64)"], runtime="python-data"
    )
    forks = template.fork(2)
    template.close()
    try:
        forks[0].run("rows[:] = 0")
        assert [f.run("int(rows.sum())").value for f in forks] == ["0", str(sum(range(1_000_000)))]
    finally:
        for fork in forks:
            fork.close()


def test_forks_beyond_the_templates_process_limit(sandbox: Sandbox) -> None:
    """A fork is born in the template's cgroup: the parent keeps no more requests ahead of the replies
    than the template's process limit leaves room for, so many forks of a tight template all start."""
    template = sandbox.open_template(setup=["x = 1"], limits=SessionLimits(max_processes=1))
    forks = template.fork(4)
    template.close()
    try:
        assert [fork.run("x").value for fork in forks] == ["1"] * 4
    finally:
        for fork in forks:
            fork.close()
