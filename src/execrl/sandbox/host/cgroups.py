"""A pool of pre-created cgroups (v1 memory+pids+cpuacct here; v2 when it has the controllers).

Why a pool: creating and removing a cgroup costs about 1-4 ms (research notes, section 1), so every
sandbox slot gets its cgroups once, at start, and they are reset and reused between executions. A slot's
cgroup holds at most one execution at a time; ``close()`` removes them all (after killing whatever is
left inside).

What each execution gets from its slot: a memory limit (``memory.limit_in_bytes``, plus
``memory.memsw.limit_in_bytes`` when swap accounting exists, so swap cannot extend it), a process/thread
limit (``pids.max``), CPU time of the whole process tree (``cpuacct.usage``), peak memory
(``memory.max_usage_in_bytes``) and whether the kernel OOM-killed something (the ``oom_kill`` counter of
``memory.oom_control``, compared before/after, or ``memory.events`` on v2): that is how memory_limit is
told apart from runtime_error. Pools of sessions also freeze a slot between cells (``freeze``: v1's
``freezer`` hierarchy when the host mounts it, v2's ``cgroup.freeze``), so that nothing a cell left
running computes while no cell runs (issue 35, class 6). Used by the parent process only (never inside
the jail).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from execrl.sandbox.errors import UnsupportedHostError

V1_CONTROLLERS = ("memory", "pids", "cpuacct")
FD_CACHE_MAX_SLOTS = 64  # slots keep ~8 cgroup files open each; bigger pools open them per use instead


@dataclass(frozen=True)
class CgroupStats:
    cpu_time_s: float
    peak_memory_mb: float
    oom_kills: int


def detect_version(root: Path) -> int:
    """1 if the v1 memory/pids/cpuacct hierarchies are mounted under ``root``, 2 for a usable v2 root."""
    if all((root / c / "cgroup.procs").exists() for c in V1_CONTROLLERS):
        return 1
    controllers = root / "cgroup.controllers"
    if controllers.exists() and {"memory", "pids"} <= set(controllers.read_text().split()):
        return 2
    raise UnsupportedHostError(
        f"no usable cgroup hierarchy under {root}: need v1 memory+pids+cpuacct or v2 with memory and pids; "
        "use backend='unisolated' on this host or set SandboxConfig.cgroup_root"
    )


def _own_path(controller: str) -> str:
    """This process's cgroup path in ``controller`` (v1) or the unified hierarchy ('' key, v2)."""
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(",") or (controller == "" and names == ""):
                return path.lstrip("/")
    return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: Path) -> str:
    with open(path) as fh:
        return fh.read()


class CgroupSlot:
    """The cgroup(s) of one sandbox slot. The parent writes a worker's pid into ``procs_files``."""

    def __init__(self, base_dirs: dict[str, Path], version: int, *, cache_fds: bool = False) -> None:
        self.dirs = base_dirs
        self.version = version
        for directory in self.dirs.values():
            directory.mkdir()
        if version == 2 and (self.dirs["unified"] / "memory.swap.max").exists():
            _write(self.dirs["unified"] / "memory.swap.max", "0")
        self._freezer = _freezer_file(self.dirs, version)
        self._oom_base = 0
        self._cpu_base_s = 0.0
        self._limits: tuple[int, int] | None = None
        # Open descriptors of the files read or written per execution: opening a cgroup file costs ~0.1 ms
        # (six per execution were ~0.5 ms of the parent's CPU); re-reading one at offset 0 is cheap.
        self._cache_fds = cache_fds
        self._fds: dict[tuple[str, str, int], int] = {}
        self._fds_lock = threading.Lock()

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def _fd(self, controller: str, name: str, mode: int) -> int:
        key = (controller, name, mode)
        with self._fds_lock:
            fd = self._fds.get(key)
            if fd is None:
                fd = self._fds[key] = os.open(self.dirs[controller] / name, mode | os.O_CLOEXEC)
            return fd

    def _rd(self, controller: str, name: str) -> str:
        if not self._cache_fds:
            return _read(self.dirs[controller] / name)
        return os.pread(self._fd(controller, name, os.O_RDONLY), 1 << 20, 0).decode()

    def _wr(self, controller: str, name: str, value: str) -> None:
        if not self._cache_fds:
            _write(self.dirs[controller] / name, value)
        else:
            os.pwrite(self._fd(controller, name, os.O_WRONLY), value.encode(), 0)

    @property
    def can_freeze(self) -> bool:
        return self._freezer is not None

    def freeze(self) -> None:
        """Stop every process of the slot where it is (it runs again at ``thaw``; v1 freezes
        asynchronously, a task in the middle of a system call stops when it returns). No-op without a
        freezer."""
        if self._freezer is not None:
            controller, name, frozen, _ = self._freezer
            self._wr(controller, name, frozen)

    def thaw(self) -> None:
        if self._freezer is not None:
            controller, name, _, thawed = self._freezer
            self._wr(controller, name, thawed)

    def attach(self, pid: int) -> None:
        """Move ``pid`` into every cgroup of the slot (everything it starts later inherits them)."""
        for controller in self.dirs:
            self._wr(controller, "cgroup.procs", str(pid))

    def set_limits(self, *, memory_mb: int, max_processes: int) -> None:
        """Apply an execution's limits (writes only what changed since the last execution of the slot)."""
        if self._limits != (memory_mb, max_processes):
            self._write_limits(memory_mb, max_processes)
            self._limits = (memory_mb, max_processes)
        self._oom_base = self._oom_kills()

    def _write_limits(self, memory_mb: int, max_processes: int) -> None:
        limit = str(memory_mb << 20)
        if self.version == 2:
            _write(self.dirs["unified"] / "memory.max", limit)
            _write(self.dirs["unified"] / "pids.max", str(max_processes))
            return
        mem = self.dirs["memory"]
        memsw = mem / "memory.memsw.limit_in_bytes"
        # memsw must stay >= the memory limit: raise whichever side first keeps that true.
        current = int(_read(mem / "memory.limit_in_bytes"))
        if memsw.exists() and int(limit) > current:
            _write(memsw, limit)
            _write(mem / "memory.limit_in_bytes", limit)
        else:
            _write(mem / "memory.limit_in_bytes", limit)
            if memsw.exists():
                _write(memsw, limit)
        _write(self.dirs["pids"] / "pids.max", str(max_processes))

    def _oom_kills(self) -> int:
        if self.version == 1:
            text = self._rd("memory", "memory.oom_control")
        else:
            text = self._rd("unified", "memory.events")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def stats(self) -> CgroupStats:
        if self.version == 1:
            cpu_ns = int(self._rd("cpuacct", "cpuacct.usage"))
            peak = int(self._rd("memory", "memory.max_usage_in_bytes"))
            return CgroupStats(cpu_ns / 1e9, peak / (1 << 20), self._oom_kills() - self._oom_base)
        unified = self.dirs["unified"]
        usage_us = 0
        for line in _read(unified / "cpu.stat").splitlines():
            if line.startswith("usage_usec "):
                usage_us = int(line.split()[1])
        peak_file = unified / "memory.peak"
        peak = int(_read(peak_file)) if peak_file.exists() else int(_read(unified / "memory.current"))
        cpu_s = usage_us / 1e6 - self._cpu_base_s
        return CgroupStats(cpu_s, peak / (1 << 20), self._oom_kills() - self._oom_base)

    def memory_mb(self) -> float:
        """Memory charged to the slot now (``memory.usage_in_bytes``, v2 ``memory.current``)."""
        if self.version == 1:
            return int(self._rd("memory", "memory.usage_in_bytes")) / (1 << 20)
        return int(_read(self.dirs["unified"] / "memory.current")) / (1 << 20)

    def cpu_time_s(self) -> float:
        if self.version == 1:
            return int(self._rd("cpuacct", "cpuacct.usage")) / 1e9
        return self.stats().cpu_time_s

    def pids(self) -> list[int]:
        """Processes in the slot. Every sandbox process joins all of the slot's cgroups (it inherits them
        from the worker), so the first hierarchy is enough."""
        # Opened afresh each time: re-reading cgroup.procs at offset 0 through a kept descriptor returns a
        # stale list (its task iterator is not restarted).
        directory = next(iter(self.dirs.values()))
        return sorted(int(x) for x in _read(directory / "cgroup.procs").split())

    def kill_all(self, *, timeout_s: float = 2.0) -> bool:
        """SIGKILL everything left in the slot; True once it is empty."""
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.thaw()  # a frozen process dies only once it runs again (cgroup v1's freezer)
            time.sleep(0.001)

    def reset(self) -> None:
        """Start the CPU and peak-memory counters of an execution (at dispatch, so that the worker's own
        set-up is not billed to the program). v2 has no writable counters: keep a CPU baseline."""
        if self.version == 1:
            self._wr("memory", "memory.max_usage_in_bytes", "0")
            self._wr("cpuacct", "cpuacct.usage", "0")
        else:
            self._cpu_base_s = 0.0
            self._cpu_base_s = self.stats().cpu_time_s

    def remove(self) -> None:
        self.kill_all()
        with self._fds_lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
        for directory in self.dirs.values():
            self.remove_dir(directory)

    @staticmethod
    def remove_dir(directory: Path, timeout_s: float = 2.0) -> None:
        """rmdir a cgroup, killing what is inside; EBUSY while dying tasks leave, so retry briefly."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                directory.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                for pid in _read(directory / "cgroup.procs").split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                for name, thawed in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
                    if (directory / name).exists():  # frozen (a session between cells), it cannot die
                        _write(directory / name, thawed)
                time.sleep(0.005)


def _freezer_file(dirs: dict[str, Path], version: int) -> tuple[str, str, str, str] | None:
    """(controller, file, frozen, thawed) of the slot's freezer, or ``None`` if it has none."""
    if version == 1:
        return ("freezer", "freezer.state", "FROZEN", "THAWED") if "freezer" in dirs else None
    if (dirs["unified"] / "cgroup.freeze").exists():
        return ("unified", "cgroup.freeze", "1", "0")
    return None


def _remove_stale_siblings(parent: Path) -> None:
    """Remove ``execrl-<pid>-<n>`` cgroups left by processes that died without ``close()``."""
    if not parent.is_dir():
        return
    for base in parent.glob("execrl-*-*"):
        pid = base.name.split("-")[1]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        for slot_dir in base.glob("slot*"):
            CgroupSlot.remove_dir(slot_dir)
        with contextlib.suppress(OSError):
            base.rmdir()


class CgroupPool:
    """``count`` slots under ``<root>/<controller>/<own cgroup>/execrl-<pid>-<n>/slot<k>``. ``freezer``:
    on v1, also a slot in the ``freezer`` hierarchy when the host mounts it (sessions freeze theirs
    between cells; v2 has ``cgroup.freeze`` in every slot)."""

    _instances = 0

    def __init__(self, root: Path, count: int, *, freezer: bool = False) -> None:
        self.version = detect_version(root)
        CgroupPool._instances += 1
        name = f"execrl-{os.getpid()}-{CgroupPool._instances}"
        if self.version == 1:
            controllers: tuple[str, ...] = V1_CONTROLLERS
            if freezer and (root / "freezer" / "cgroup.procs").exists():
                controllers = (*V1_CONTROLLERS, "freezer")
            self.bases = {c: root / c / _own_path(c) / name for c in controllers}
        else:
            self.bases = {"unified": root / _own_path("") / name}
        for base in self.bases.values():
            _remove_stale_siblings(base.parent)
            base.mkdir(parents=True)
        if self.version == 2:
            _write(self.bases["unified"] / "cgroup.subtree_control", "+memory +pids")
        cache_fds = count <= FD_CACHE_MAX_SLOTS
        self.slots = [
            CgroupSlot({c: b / f"slot{k}" for c, b in self.bases.items()}, self.version, cache_fds=cache_fds)
            for k in range(count)
        ]

    def close(self) -> None:
        for slot in self.slots:
            slot.remove()
        for base in self.bases.values():
            with contextlib.suppress(FileNotFoundError):
                base.rmdir()
