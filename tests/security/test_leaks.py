"""Hazards #16 and #21 at scale: after ~300 executions nothing is left behind, and close() removes the rest."""

from __future__ import annotations

import glob
import os

from security_helpers import assert_no_survivors, py, sandbox_processes

from execrl.sandbox import Sandbox, SandboxConfig, Verdict

RUNS = 300
PROGRAMS = [
    "print(sum(range(100)))",
    "import os\nif os.fork() == 0:\n    import time; time.sleep(30)\nprint('x')",  # leaves a child behind
    "open('/tmp/f', 'w').write('x' * 1000)\nprint('y')",
    "import time\ntime.sleep(5)",  # killed by the wall-clock limit
]


def _host_temp_entries() -> set[str]:
    return {p for pattern in ("/tmp/execrl*", "/var/tmp/execrl*", "/dev/shm/*") for p in glob.glob(pattern)}


def _mounts() -> str:
    with open("/proc/mounts") as fh:
        return fh.read()


def _cgroup_dirs() -> list[str]:
    return glob.glob(f"/sys/fs/cgroup/*/**/execrl-{os.getpid()}-*", recursive=True)


def test_no_process_mount_cgroup_or_temp_file_survives() -> None:
    mounts_before = _mounts()
    temp_before = _host_temp_entries()
    cgroups_before = _cgroup_dirs()
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        # Every 20th run sleeps into the wall-clock limit; the others exit, some leaving a child behind.
        requests = [py(PROGRAMS[3 if i % 20 == 3 else i % 3], timeout_s=0.3) for i in range(RUNS)]
        results = sandbox.run_batch(requests)
        assert all(r.verdict is not Verdict.SANDBOX_ERROR for r in results)
        assert [r.verdict for r in results[:4]] == [
            Verdict.PASSED,
            Verdict.PASSED,
            Verdict.PASSED,
            Verdict.TIME_LIMIT,
        ]
        assert_no_survivors(sandbox)
        assert len(_cgroup_dirs()) > len(cgroups_before)  # the slots exist while the sandbox is open
        zygote = sandbox._pool.process
    assert zygote.poll() is not None
    assert sandbox_processes(sandbox._pool) == set()
    assert _mounts() == mounts_before
    assert _host_temp_entries() <= temp_before
    assert _cgroup_dirs() == cgroups_before
