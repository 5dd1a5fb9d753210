"""execrl.memory: glibc's thresholds are set (or left alone when the user set their own)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from execrl.memory import return_freed_memory_to_os

_PROBE = """
from execrl.memory import return_freed_memory_to_os
print(return_freed_memory_to_os())
import torch
# a freed 30 MiB block raises glibc's default (dynamic) threshold past 8 MiB; then 40 blocks of 8 MiB are
# heap blocks, freed under a small block kept at the heap's top (so trimming the top cannot return them)
big = torch.ones(30 << 18)
del big
blocks = [torch.ones(2 << 20) for _ in range(40)]
keep = torch.ones(1 << 16)
del blocks
with open('/proc/self/statm') as f:
    print(int(f.read().split()[1]) * 4096 >> 20)
"""


def _run(env_extra: dict[str, str]) -> tuple[str, int]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "EXECRL_MALLOC"}
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**env, **env_extra}, capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    return out[0], int(out[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_freed_blocks_leave_the_resident_set_and_user_settings_win() -> None:
    set_here, rss_mb = _run({})
    assert set_here == "True"
    kept, rss_kept_mb = _run({"EXECRL_MALLOC": "default"})
    assert kept == "False"
    assert _run({"MALLOC_MMAP_THRESHOLD_": "65536"})[0] == "False"
    # 320 MiB were allocated and freed: returned with the thresholds set, kept (mostly) without them
    assert rss_kept_mb - rss_mb > 150, (rss_mb, rss_kept_mb)


def test_returns_false_when_told_to_leave_the_allocator_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXECRL_MALLOC", "default")
    assert return_freed_memory_to_os() is False
