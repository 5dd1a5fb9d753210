"""execrl.memory: big freed blocks leave the resident set at once (8 MiB and up by default, 1 MiB and up with
``EXECRL_MALLOC=eager``), and the allocator is left alone when told to or when the user set glibc's own
variables."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from execrl.memory import configure_allocator, return_freed_memory_to_os

_PROBE = """
import sys
from execrl.memory import configure_allocator
print(configure_allocator())
import torch
# a freed 30 MiB block raises glibc's default (dynamic) threshold to 30 MiB; then 320 MiB of blocks of
# argv[1] MiB are heap blocks unless a threshold below them is fixed, freed under a small block kept at the
# heap's top (so trimming the top cannot return them)
big = torch.ones(30 << 18)
del big
block_mib = int(sys.argv[1])
blocks = [torch.ones(block_mib << 18) for _ in range(320 // block_mib)]
keep = torch.ones(1 << 16)
del blocks
with open('/proc/self/statm') as f:
    print(int(f.read().split()[1]) * 4096 >> 20)
"""

needs_glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


def _run(env_extra: dict[str, str], *, block_mib: int = 4) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "EXECRL_MALLOC"}
    argv = [sys.executable, "-c", _PROBE, str(block_mib)]
    out = subprocess.run(
        argv, env={**env, **env_extra}, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0], int(out[1])


@needs_glibc
def test_big_freed_blocks_leave_the_resident_set_at_once() -> None:
    """320 MiB of 20 MiB blocks, allocated and freed: unmapped under the 8 MiB threshold, kept by glibc's
    own (risen) one."""
    set_here, rss_mb = _run({}, block_mib=20)
    assert set_here == "True"
    left_alone, rss_kept_mb = _run({"EXECRL_MALLOC": "default"}, block_mib=20)
    assert left_alone == "False"
    assert rss_kept_mb - rss_mb > 150, (rss_mb, rss_kept_mb)


@needs_glibc
def test_smaller_blocks_stay_heap_blocks_unless_eager() -> None:
    """4 MiB blocks (a short step's size): glibc reuses them under the default, unmaps them when eager."""
    _, rss_kept_mb = _run({}, block_mib=4)
    set_here, rss_eager_mb = _run({"EXECRL_MALLOC": "eager"}, block_mib=4)
    assert set_here == "True"
    assert rss_kept_mb - rss_eager_mb > 150, (rss_eager_mb, rss_kept_mb)


@needs_glibc
def test_user_settings_win() -> None:
    assert _run({"MALLOC_MMAP_THRESHOLD_": "65536"})[0] == "False"
    assert _run({"EXECRL_MALLOC": "eager", "MALLOC_TRIM_THRESHOLD_": "65536"})[0] == "False"


def test_left_alone_when_told_to(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXECRL_MALLOC", "default")
    assert return_freed_memory_to_os() is False
    assert configure_allocator() is False


def test_an_unknown_mode_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXECRL_MALLOC", "agressive")
    with pytest.raises(ValueError, match="EXECRL_MALLOC='agressive'"):
        configure_allocator()


def test_the_cli_names_a_bad_mode_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from execrl.cli import main

    monkeypatch.setenv("EXECRL_MALLOC", "agressive")
    assert main(["tasks", "ls"]) == 2
    assert "error: EXECRL_MALLOC='agressive'" in capsys.readouterr().err
