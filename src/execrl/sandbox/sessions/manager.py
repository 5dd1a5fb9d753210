"""Every session of one ``Sandbox``: their worker pools, their registry, a watchdog, and opening them.

Sessions live in pools of their own (one per Python runtime, started on the first session that needs
it), so a sandbox that never opens a session pays nothing, and sessions never take a slot from the
pool that runs requests. Each pool has ``SandboxConfig.max_sessions`` slots (a slot is one cgroup set
and one uid: a session, a template and each fork take one). A watchdog thread ends sessions that died,
or passed their lifetime, CPU or idle time while no cell ran; ``close`` kills every session.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from execrl.sandbox.errors import InvalidRequestError, SandboxFailure, UnsupportedHostError
from execrl.sandbox.host.pool import WorkerPool
from execrl.sandbox.host.workers import Worker
from execrl.sandbox.langs.runtimes import DEFAULT_RUNTIME, resolve_runtime
from execrl.sandbox.sessions import driver
from execrl.sandbox.sessions.api import Session, _SessionBase, encode_files
from execrl.sandbox.sessions.forks import SLOT_TIMEOUT_S
from execrl.sandbox.sessions.template import SessionTemplate
from execrl.sandbox.sessions.types import CellResult, SessionClosedError, SessionLimits
from execrl.sandbox.types import Limits, work_path_problems, workdir_space_problems

__all__ = ["SessionManager"]

T = TypeVar("T")
WATCH_INTERVAL_S = 0.1
FORGET_AFTER_S = 600.0  # an ended session nobody closed is forgotten this long after it ended


class SessionManager:
    """The sessions of one sandbox. ``isolate``/``cgroup_root``/``seccomp_policy`` are the sandbox's."""

    def __init__(
        self, *, max_sessions: int, cgroup_root: Path | None, seccomp_policy: str, isolate: bool
    ) -> None:
        if not isolate:
            raise UnsupportedHostError(
                "sessions need the namespace backend (SandboxConfig(backend='namespace'))"
            )
        self.max_sessions = max_sessions
        self._cgroup_root = cgroup_root
        self._seccomp_policy = seccomp_policy
        self._pools: dict[str, WorkerPool] = {}
        self._sessions: dict[str, _SessionBase] = {}
        self._lock = threading.Lock()  # the registry's: held for a few field reads, never while waiting
        self._pool_lock = threading.Lock()  # one session pool is started at a time
        self._closed = False
        # One thread per session running a call and one per session opening: enough when each session's
        # async calls come one at a time (the HTTP service queues them per session, ``service.sessions``).
        self._executor = ThreadPoolExecutor(
            max_workers=2 * max_sessions + 4, thread_name_prefix="execrl-session"
        )
        self._stop = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, name="execrl-session-watchdog", daemon=True)
        self._watchdog.start()

    # -- opening ---------------------------------------------------------------------------------------
    def open_session(
        self, *, runtime: str | None = None, limits: SessionLimits | None = None,
        files: Mapping[str, str | bytes] | None = None,
    ) -> Session:  # fmt: skip
        limits = limits or SessionLimits()
        pool, endpoint = self._start("session", runtime, limits, files or {})
        session = Session(self, pool, endpoint, limits)
        self.adopt([session])
        return session

    def open_template(
        self, *, setup: Sequence[str] = (), runtime: str | None = None, limits: SessionLimits | None = None,
        files: Mapping[str, str | bytes] | None = None,
    ) -> tuple[SessionTemplate, list[CellResult]]:  # fmt: skip
        """A template and the results of its ``setup`` cells, run in order (all of them, even after one
        fails: read the results)."""
        limits = limits or SessionLimits()
        pool, endpoint = self._start("template", runtime, limits, files or {})
        template = SessionTemplate(self, pool, endpoint, limits)
        self.adopt([template])
        try:
            results = [template.run_setup(code) for code in setup]
        except BaseException:
            template.close()
            raise
        return template, results

    def _start(
        self, role: str, runtime: str | None, limits: SessionLimits, files: Mapping[str, str | bytes]
    ) -> tuple[WorkerPool, driver.Endpoint]:
        if not isinstance(limits, SessionLimits):
            raise InvalidRequestError(f"limits must be a SessionLimits, got {type(limits).__name__}")
        _check_files(files, limits)
        pool = self._pool(runtime)
        worker = pool.spawn_dedicated((limits.workdir_mb, limits.workdir_inodes), role, SLOT_TIMEOUT_S)
        slot = pool.slot(worker)
        try:
            if slot is not None:
                slot.set_limits(memory_mb=limits.memory_mb, max_processes=limits.max_processes + 2)
            endpoint = driver.Endpoint(worker, slot, _zygote_status(pool, worker))
            opening = {"op": "open", "limits": limits.jail_limits(), **encode_files(files)}
            _write_line(worker, opening)
            endpoint.wait_ready()
        except BaseException:
            pool.release(worker)
            raise
        if slot is not None:
            slot.reset()
        return pool, endpoint

    def _pool(self, runtime: str | None) -> WorkerPool:
        """The runtime's session pool, started on first use (its zygote starts outside the registry's
        lock: ``get``/``count`` answer meanwhile, as the HTTP service's event loop calls them)."""
        name = runtime or DEFAULT_RUNTIME
        resolved = resolve_runtime("python", runtime)
        with self._pool_lock:
            with self._lock:
                if self._closed:
                    raise SessionClosedError("the sandbox is closed")
                pool = self._pools.get(name)
            if pool is None:
                pool = WorkerPool(
                    workers=0,
                    slots=self.max_sessions,
                    default_key=(Limits().workdir_mb, Limits().workdir_inodes),
                    isolate=True,
                    cgroup_root=self._cgroup_root,
                    seccomp_policy=self._seccomp_policy,
                    warm_start=False,
                    packages_dir=resolved.packages_dir,
                    preload=resolved.preload,
                    freezer=True,
                )
                with self._lock:
                    closed = self._closed
                    if not closed:
                        self._pools[name] = pool
                if closed:
                    pool.close()
                    raise SessionClosedError("the sandbox is closed")
            return pool

    # -- registry --------------------------------------------------------------------------------------
    def adopt(self, sessions: Iterable[_SessionBase]) -> None:
        with self._lock:
            for session in sessions:
                self._sessions[session.id] = session

    def forget(self, session: _SessionBase) -> None:
        with self._lock:
            self._sessions.pop(session.id, None)

    def get(self, session_id: str) -> _SessionBase | None:
        with self._lock:
            return self._sessions.get(session_id)

    def count(self, *, alive_only: bool = False, holding_slots: bool = False) -> int:
        """Sessions of this sandbox: all, the ``alive`` ones, or those ``holding_slots`` (a closed
        template whose forks live holds its slot; an ended session holds none)."""
        with self._lock:
            sessions = list(self._sessions.values())
        if holding_slots:
            return sum(1 for s in sessions if s.holds_slot)
        return sum(1 for s in sessions if s.alive or not alive_only)

    def pools(self) -> list[WorkerPool]:
        with self._lock:
            return list(self._pools.values())

    async def in_thread(self, function: Callable[..., T], *args: Any) -> T:
        """Run a blocking session call on the manager's threads (the async twins)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(function, *args))

    # -- watchdog and shutdown -------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            with self._lock:
                sessions = list(self._sessions.values())
            now = time.monotonic()
            for session in sessions:
                session.watch(now)
                if session.ended_for(now) > max(FORGET_AFTER_S, session.limits.idle_timeout_s):
                    session.close()  # nobody asked for its ending: forget it (its slot is long free)

    def close(self) -> None:
        """Kill every session (forks first, then templates) and stop the session pools."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions = sorted(self._sessions.values(), key=lambda s: s.kind == "template")
        self._stop.set()
        self._watchdog.join(timeout=5)
        for session in sessions:
            with contextlib.suppress(SessionClosedError):
                session.close()
        for session in sessions:
            session._release()  # a template whose forks were not all closed
        self._executor.shutdown(wait=False, cancel_futures=True)
        for pool in self._pools.values():
            pool.close()


def _check_files(files: Mapping[str, str | bytes], limits: SessionLimits) -> None:
    if not isinstance(files, Mapping) or not all(isinstance(v, str | bytes) for v in files.values()):
        raise InvalidRequestError("files must map relative paths to str or bytes")
    space = Limits(workdir_mb=limits.workdir_mb, workdir_inodes=limits.workdir_inodes)
    problems = work_path_problems(list(files), None) or workdir_space_problems(files, " ", space)
    if problems:
        raise InvalidRequestError("; ".join(f"{field}: {message}" for field, message in problems))


def _zygote_status(pool: WorkerPool, worker: Worker) -> Callable[[float], int | None]:
    def wait_status(timeout_s: float) -> int | None:
        ended = pool.wait_exit(worker, timeout_s)
        return ended.status if ended is not None else None

    return wait_status


def _write_line(worker: Worker, message: dict[str, Any]) -> None:
    """One line to a sandbox that is starting (blocking: its pid 1 reads it whole before anything else)."""
    data = memoryview(json.dumps(message).encode() + b"\n")
    os.set_blocking(worker.job_w, True)
    try:
        while data:
            data = data[os.write(worker.job_w, data) :]
    except BrokenPipeError as exc:
        raise SandboxFailure("the session sandbox exited before reading its set-up") from exc
