"""Which uids a pool's sandboxes run as: one block per pool, distinct across pools, processes and containers.

Each slot of a pool runs under its own unprivileged uid, ``uid_base + slot`` (``pool.WorkerPool``), because
RLIMIT_NPROC and kill(2) count and check by uid across the whole kernel: two sandboxes sharing a uid could
exhaust each other's process limit or signal each other. Split from ``pool.py``.
"""

from __future__ import annotations

import itertools
import math
import os

from execrl.sandbox.errors import InvalidRequestError, SandboxFailure

UID_BASE = 1_500_000  # sandbox uids: far above any real user, never in /etc/passwd
UIDS_PER_POOL = 2048  # each pool owns a block of uids: one per slot, distinct across pools and processes
UID_BLOCKS = 500_000
UID_RANGE_ENV = "EXECRL_SANDBOX_UIDS"  # "FIRST-LAST": the uids this host's pools may use (see uid_block_base)
PID_NS_INIT_INO = 0xEFFFFFFC  # the kernel's PROC_PID_INIT_INO; other namespaces get numbers above it


_pools_started = itertools.count()


def uid_block_base(slots: int) -> int:
    """First uid of this pool's block: ``UID_RANGE_ENV``'s range (default ``UID_BASE`` and ``UID_BLOCKS``
    blocks of ``UIDS_PER_POOL``) cut into blocks, one picked from (pid namespace, pid, pool number), so
    that RLIMIT_NPROC and kill(2), which count and check by uid across the whole kernel, never reach
    across sandboxes of two pools, even in different containers.

    Why the pid namespace: it was (pid, pool number) alone, and two service replicas in separate
    containers are each pid 1 of their own pid namespace: they took the same block, and a job that filled
    its process limit in one made spawns in the other fail (a ``sandbox_error``). The namespace's inode
    number is unique among the host's live namespaces (``uid_block``). Limits: a collision-free choice
    among all processes of all containers is not possible without coordination; where replicas must be
    disjoint by construction, give each a range of its own in ``EXECRL_SANDBOX_UIDS`` (under Kubernetes
    user namespaces the range must also lie inside the pod's mapped ids, ``deploy/k8s/README.md``)."""
    if slots > UIDS_PER_POOL:
        raise SandboxFailure(f"at most {UIDS_PER_POOL} slots per sandbox (workers + max_concurrency + 1)")
    first, blocks = uid_range(os.environ.get(UID_RANGE_ENV))
    ns_id = os.stat("/proc/self/ns/pid").st_ino - PID_NS_INIT_INO
    return first + uid_block(ns_id, os.getpid(), next(_pools_started), blocks) * UIDS_PER_POOL


def uid_range(text: str | None) -> tuple[int, int]:
    """(first uid, number of blocks) of ``EXECRL_SANDBOX_UIDS`` ("FIRST-LAST", inclusive), or the default."""
    if text is None or not text.strip():
        return UID_BASE, UID_BLOCKS
    first_text, _, last_text = text.strip().partition("-")
    if not (first_text.isdigit() and last_text.isdigit()):
        raise InvalidRequestError(f"{UID_RANGE_ENV}={text!r}: expected FIRST-LAST, e.g. 1500000-1999999")
    first, last = int(first_text), int(last_text)
    blocks = (last - first + 1) // UIDS_PER_POOL
    if first < 1 or last >= 2**31 - 1 or blocks < 1:
        raise InvalidRequestError(
            f"{UID_RANGE_ENV}={text!r}: needs 1 <= FIRST, LAST < 2147483647 and room for at least one "
            f"block of {UIDS_PER_POOL} uids"
        )
    return first, blocks


def uid_block(ns_id: int, pid: int, pool: int, blocks: int) -> int:
    """The block index of (pid namespace id, pid, pool number) among ``blocks``: ``pid * 64 + pool`` as
    before on the host (namespace 0), shifted by the namespace id times a stride near ``blocks`` times
    the golden ratio, coprime with ``blocks``. So pid 1 of two containers (pool numbers below 64) never
    share a block while their namespace ids differ by less than a few thousand (the unit test checks
    4096 for the default), and other pairs collide about once in ``blocks``."""
    stride = round(blocks * 0.6180339887498949) or 1
    while math.gcd(stride, blocks) != 1:
        stride += 1
    return (ns_id * stride + pid * 64 + pool) % blocks
