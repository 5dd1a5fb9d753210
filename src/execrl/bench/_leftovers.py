"""Count what sandbox executions leave behind: processes, mounts, cgroups and temp files.

Used by ``execrl bench sandbox --soak`` and by ``tests/integration/test_sandbox_soak.py``: take a
``snapshot()`` before starting a sandbox, run, close the sandbox, take another and ``leftovers(before,
after)`` must be all zeros.

Scope, chosen so that other processes on a shared machine do not count:
* processes: live or zombie descendants of this process (the sandbox's zygote and workers are children;
  after ``close()`` none may remain);
* mounts: entries of this process's mount namespace (``/proc/self/mountinfo``) that were not there
  before; the sandbox mounts only inside private namespaces, so any new entry here is a leak (or another
  program mounting in the host namespace at the same time, which this machine's other users do not do);
* cgroups: directories whose name starts with ``execrl-<this pid>-`` (the sandbox's per-pool naming)
  anywhere under the cgroup hierarchies this process belongs to, that were not there before (a sandbox
  open before the snapshot, such as the process-wide ``default_sandbox``, keeps its own);
* temp files: everything inside a private temp directory when ``private_tempdir()`` was used (the
  sandbox and its children create temp files there through ``TMPDIR``), plus entries of the shared temp
  directories (``/tmp``, ``/dev/shm``, ``/var/tmp``) named with ``leak_marker()``, which is what the
  soak's hostile programs name the files they try to leave behind. Other ``execrl*`` names in the
  shared directories are not counted: on a shared machine they belong to other processes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
TEMP_DIRS: tuple[Path, ...] = (Path(tempfile.gettempdir()), Path("/dev/shm"), Path("/var/tmp"))


@dataclass(frozen=True)
class Snapshot:
    """What exists at one moment; compare two with ``leftovers``."""

    pid: int
    descendants: frozenset[int]
    mounts: frozenset[str]
    temp_entries: frozenset[str]
    private_tempdir: Path | None
    cgroups: frozenset[Path] = frozenset()


def descendants(pid: int) -> set[int]:
    """PIDs of all live or zombie processes below ``pid`` (walks ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # exited while scanning
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def mount_entries() -> frozenset[str]:
    """Mount points (with their mount IDs) of this process's mount namespace."""
    with open("/proc/self/mountinfo") as fh:
        return frozenset(" ".join(line.split()[:5]) for line in fh)


def execrl_cgroups(pid: int) -> list[Path]:
    """Cgroup directories named ``execrl-<pid>-*`` under every hierarchy this process is in."""
    prefix = leak_marker(pid)
    found: list[Path] = []
    with open("/proc/self/cgroup") as fh:
        own = {line.rstrip("\n").split(":", 2)[2].lstrip("/") for line in fh}
    roots = [CGROUP_ROOT / c for c in os.listdir(CGROUP_ROOT)] if CGROUP_ROOT.is_dir() else []
    for root in [*roots, CGROUP_ROOT]:
        for path in own:
            base = root / path
            if base.is_dir():
                found += [p for p in base.iterdir() if p.is_dir() and p.name.startswith(prefix)]
    return sorted(set(found))


def leak_marker(pid: int | None = None) -> str:
    """Name prefix of everything attributable to process ``pid`` (the sandbox's cgroups use it too)."""
    return f"execrl-{os.getpid() if pid is None else pid}-"


def _temp_entries(pid: int) -> frozenset[str]:
    marker = leak_marker(pid)
    names: set[str] = set()
    for directory in TEMP_DIRS:
        with contextlib.suppress(FileNotFoundError):
            names.update(str(directory / name) for name in os.listdir(directory) if name.startswith(marker))
    return frozenset(names)


def snapshot(private: Path | None = None) -> Snapshot:
    """The current state; ``private`` is a temp directory that must be empty after the run."""
    pid = os.getpid()
    cgroups = frozenset(execrl_cgroups(pid))
    return Snapshot(pid, frozenset(descendants(pid)), mount_entries(), _temp_entries(pid), private, cgroups)


def leftovers(before: Snapshot, after: Snapshot | None = None) -> dict[str, int]:
    """Counts of what exists now but did not at ``before``: all four must be 0 after a clean run."""
    after = after or snapshot(before.private_tempdir)
    private = before.private_tempdir
    private_count = len(list(private.iterdir())) if private is not None and private.exists() else 0
    return {
        "processes": len(after.descendants - before.descendants),
        "mounts": len(after.mounts - before.mounts),
        # A sandbox already open at ``before`` (e.g. the process-wide ``default_sandbox``) is not a leftover.
        "cgroups": len(after.cgroups - before.cgroups),
        "temp_files": len(after.temp_entries - before.temp_entries) + private_count,
    }


@contextlib.contextmanager
def private_tempdir() -> Iterator[Path]:
    """Point ``tempfile`` and ``TMPDIR`` (inherited by children) at a fresh directory while inside.

    Anything the sandbox creates through the temp directory lands there and is counted by ``leftovers``.
    The directory itself is removed on exit only if empty, so a leak stays visible for inspection.
    """
    path = Path(tempfile.mkdtemp(prefix="soak-"))
    saved_dir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = str(path), str(path)
    try:
        yield path
    finally:
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        with contextlib.suppress(OSError):
            path.rmdir()
