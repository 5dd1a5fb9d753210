"""Host-side checks for the adversarial sandbox suite (research notes, section 5)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from execrl.sandbox import ExecutionRequest, Limits, Sandbox
from execrl.sandbox.host.pool import WorkerPool
from execrl.sandbox.host.uids import UIDS_PER_POOL

# Prepended to a program: ``probe(label, fn)`` prints "label OK" or "label <errno name>".
PROBE = """
import errno, os
def probe(label, fn):
    try:
        fn()
        print(label, "OK")
    except OSError as exc:
        print(label, errno.errorcode.get(exc.errno, exc.errno))
"""


def py(program: str, *tests: object, **limits: float) -> ExecutionRequest:
    """A Python request with small limits so that hostile programs end quickly."""
    base = {"timeout_s": 10.0, "cpu_time_s": 2.0, "memory_mb": 128, "max_processes": 16}
    base.update(limits)
    return ExecutionRequest(language="python", program=program, tests=tuple(tests), limits=Limits(**base))  # type: ignore[arg-type]


def _uid(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def pools(sandbox: Sandbox) -> list[WorkerPool]:
    """The default pool, every runtime's pool started so far (``python-data`` has its own zygote) and the
    session pools (``sandbox/sessions/``)."""
    sessions = sandbox._sessions.pools() if sandbox._sessions is not None else []
    return [sandbox._pool, *sandbox._runtime_pools.values(), *sessions]


def sandbox_processes(pool: WorkerPool) -> set[int]:
    """Host pids running as one of this pool's uids (other pools and sandboxes on the host use others)."""
    uids = range(pool.uid_base, pool.uid_base + UIDS_PER_POOL)
    return {int(p) for p in os.listdir("/proc") if p.isdigit() and _uid(p) in uids}


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def parked_pids(pool: WorkerPool) -> set[int]:
    """Pid 1 of every parked worker, and its parked runtime (a warm start, ``sandbox/zygote/warm.py``): a child
    of that pid 1, in that worker's cgroup slot."""
    deadline = time.monotonic() + 10
    while True:
        with pool.cond:
            if not pool.pending or time.monotonic() > deadline:
                workers = [w for queue in pool.ready.values() for w in queue]
                break
        time.sleep(0.01)
    pids = {w.pid for w in workers}
    for worker in workers:
        if pool.cgroups is not None:
            pids.update(p for p in pool.cgroups.slots[worker.slot].pids() if _ppid(p) == worker.pid)
    return pids


def assert_no_survivors(sandbox: Sandbox) -> None:
    """Nothing of a finished run is left, in any of the sandbox's pools: only parked (never used) workers
    and their parked runtimes run as a sandbox uid, and every cgroup slot holds only those."""
    for pool in pools(sandbox):
        _assert_pool_clean(pool)


def _assert_pool_clean(pool: WorkerPool) -> None:
    deadline = time.monotonic() + 5
    while True:
        parked = parked_pids(pool)
        extra = sandbox_processes(pool) - parked
        cgroup_pids: set[int] = set()
        if pool.cgroups is not None:
            for slot in pool.cgroups.slots:
                cgroup_pids.update(slot.pids())
        if not extra and cgroup_pids <= parked:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"survivors: uid processes {extra}, cgroup processes {cgroup_pids - parked}")
        time.sleep(0.02)


def host_file_absent(path: str) -> bool:
    return not Path(path).exists()
