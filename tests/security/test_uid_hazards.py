"""Two sandbox pools never share uids, even as pid 1 of separate containers.

Guards against issue 23's cross-replica fault: the uid block was derived from (pid, pool number), so two
sandbox services in separate containers (each pid 1 of its own pid namespace, the Kubernetes deployment
the README describes) gave their slots the same uids; RLIMIT_NPROC counts a uid's processes across the
whole kernel, so a job that filled its process limit in one replica turned an unrelated job in the other
into a ``sandbox_error`` (spawn failed with EAGAIN). Here two processes run at the same time, each pid 1
of a fresh pid namespace (``unshare --pid --fork``), and each reports the first uid its pool would use
(the choice itself: ``tests/unit/sandbox/test_uid_blocks.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from execrl.sandbox.host.uids import UIDS_PER_POOL

REPORT = (
    "import os, sys\n"
    "from execrl.sandbox.host.uids import uid_block_base\n"
    "print(os.getpid(), uid_block_base(8), flush=True)\n"
    "sys.stdin.read()\n"  # stay alive (and keep the namespace) until the test has read both
)


def _pid1(env: dict[str, str]) -> subprocess.Popen[str]:
    argv = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", REPORT]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root and unshare")
def test_pid_1_of_two_pid_namespaces_get_distinct_uid_blocks() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("EXECRL_SANDBOX_UIDS", None)
    first, second = _pid1(env), _pid1(env)
    try:
        reports = [proc.stdout.readline().split() for proc in (first, second) if proc.stdout is not None]
    finally:
        for proc in (first, second):
            proc.communicate("", timeout=30)
    assert [pid for pid, _ in reports] == ["1", "1"], reports
    bases = [int(base) for _, base in reports]
    assert abs(bases[0] - bases[1]) >= UIDS_PER_POOL, bases  # disjoint blocks, not merely different
