"""Parent side of the zygote: start it, keep a pool of parked isolated workers, refill in the background.

Slots: each worker (parked or running) holds one slot = one cgroup set + one unprivileged uid, so two
sandboxes never share either. ``workers`` slots are kept parked for the default work-directory size;
a request with another size gets a worker spawned on demand (the tmpfs size is fixed when the worker is
built, before it drops privileges). A reader thread receives finished workers from the zygote and moves
each into its slot's cgroups; the zygote itself never has threads. A janitor thread waits for finished
sandboxes to leave their cgroup before the slot is reused, off the caller's critical path: first for
the killed worker's pidfd (no polling), then it checks that the cgroup is empty. The zygote also
reports each worker's exit status (``wait_exit``), which inline runs need (``testgroups.runs_inline``). If the zygote
dies it is restarted on the next ``acquire``.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from execrl.sandbox.errors import SandboxFailure
from execrl.sandbox.host.cgroups import CgroupPool, CgroupSlot
from execrl.sandbox.host.uids import uid_block_base
from execrl.sandbox.host.workers import Worker, WorkerExit, WorkerKey
from execrl.sandbox.langs import gocache
from execrl.sandbox.zygote import jail, warm
from execrl.sandbox.zygote import server as zygote

SRC_DIR = str(Path(__file__).resolve().parents[3])
JANITOR_WAIT_S = 2.0  # how long the janitor waits for a killed worker's pid 1 to exit
EXITS_KEPT = 4096  # exit statuses nobody asked for are dropped oldest first


def base_python() -> str:
    """The real interpreter behind a venv (the jail binds its prefix, not the venv's site-packages)."""
    return getattr(sys, "_base_executable", None) or sys.executable


class WorkerPool:
    def __init__(
        self,
        *,
        workers: int,
        slots: int,
        default_key: WorkerKey,
        isolate: bool,
        cgroup_root: Path | None,
        seccomp_policy: str = "allow",
        warm_start: bool = True,
        packages_dir: str | None = None,
        preload: tuple[str, ...] = (),
        freezer: bool = False,
    ) -> None:
        """``packages_dir``/``preload``: a Python runtime's packages and the modules its zygote imports
        before forking (``runtimes.py``); the default runtime has neither. ``warm_start``: hint new
        workers what to pre-start (``warm.py``; never in the unisolated backend). ``freezer``: slots
        that can be frozen (``CgroupSlot.freeze``; sessions' pools)."""
        self.seccomp_policy = seccomp_policy
        self.packages_dir = packages_dir
        self.preload = preload
        self.workers = workers
        self.slots = slots
        self.default_key = default_key
        self.isolate = isolate
        self.uid_base = uid_block_base(slots)
        self.cgroups = CgroupPool(cgroup_root, slots, freezer=freezer) if cgroup_root is not None else None
        self.free_slots = collections.deque(range(slots))
        self.ready: dict[WorkerKey, collections.deque[Worker]] = collections.defaultdict(collections.deque)
        self.pending: dict[int, tuple[int, WorkerKey]] = {}
        self.spawn_errors: collections.deque[str] = collections.deque(maxlen=10)
        self.exits: dict[int, WorkerExit] = {}  # worker pid -> how it ended, as the zygote reaped it
        self.cond = threading.Condition()
        self.tokens = itertools.count(1)
        self.closed = False
        self.warm = warm.WarmChooser(workers) if warm_start and isolate else None
        self.unhinted: set[int] = set()  # tokens of workers spawned for a request no parked one fits
        self.claims: dict[int, Worker | str | None] = {}  # dedicated workers (``spawn_dedicated``) by token
        self.waiting = 0  # requests in ``acquire`` waiting for a worker
        self.warm_starts = 0  # requests handed a worker committed to their shape (``warm.py``)
        self.python_prefix = os.path.realpath(sys.base_prefix)
        self.janitor_queue: queue.SimpleQueue[Worker | None] = queue.SimpleQueue()
        self.janitor = threading.Thread(target=self._janitor, name="execrl-janitor", daemon=True)
        self.janitor.start()
        self._start_zygote()

    # -- zygote process ---------------------------------------------------------------------------------
    def _start_zygote(self) -> None:
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = zygote.bootstrap_code(
            SRC_DIR,
            child_sock.fileno(),
            self.isolate,
            self.python_prefix,
            self.slots,
            self.seccomp_policy,
            self.packages_dir,
            self.preload,
            gocache.bind_dirs() if self.isolate else (),
        )
        self.process = subprocess.Popen(
            [base_python(), *zygote.ARGS],
            pass_fds=[child_sock.fileno()],
            env=dict(jail.ENV),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",
        )
        assert self.process.stdin is not None
        try:
            with self.process.stdin:  # far below a pipe's buffer: never blocks
                self.process.stdin.write(code.encode())
        except BrokenPipeError as exc:
            child_sock.close()
            parent_sock.close()
            raise SandboxFailure(f"the zygote exited before reading its code ({base_python()})") from exc
        child_sock.close()
        self.sock = parent_sock
        self.reader = threading.Thread(
            target=self._read_loop, args=(parent_sock,), name="execrl-zygote", daemon=True
        )
        self.reader.start()
        with self.cond:
            self._fill()

    def _read_loop(self, sock: socket.socket) -> None:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(sock, 1 << 16, zygote.WORKER_FDS + 1)
            except OSError:
                message, fds = b"", []
            reply = json.loads(message) if message else {}
            attach_error = self._join_cgroups(reply, len(fds))  # slow (cgroup migration): not under the lock
            with self.cond:
                if not message:
                    self.pending.clear()
                    self.cond.notify_all()
                    return
                self._receive(reply, fds, attach_error)
                self.cond.notify_all()

    def _join_cgroups(self, reply: dict[str, object], fd_count: int) -> str | None:
        """Move a new worker's pid 1 into its slot before any job (everything it starts inherits it);
        returns why that failed (the worker died during set-up: its ready record will say why)."""
        if self.cgroups is None or "pid" not in reply or fd_count < zygote.WORKER_FDS:
            return None
        try:
            self.cgroups.slots[int(str(reply["slot"]))].attach(int(str(reply["pid"])))
        except OSError as exc:
            return str(exc)
        return None

    def _receive(self, reply: dict[str, object], fds: list[int], attach_error: str | None) -> None:
        if "exited" in reply:
            hard = reply.get("cpu_hard_s")
            cpu_hard_s = hard if isinstance(hard, int) else None
            self.exits[int(str(reply["exited"]))] = WorkerExit(int(str(reply["status"])), cpu_hard_s)
            while len(self.exits) > EXITS_KEPT:
                self.exits.pop(next(iter(self.exits)))
            return
        token = int(str(reply["token"]))
        slot, key = self.pending.pop(token)
        unhinted = token in self.unhinted
        self.unhinted.discard(token)
        if "error" in reply or len(fds) not in (zygote.WORKER_FDS, zygote.WORKER_FDS + 1):
            error = str(reply.get("error", "worker arrived without its descriptors"))
            self.spawn_errors.append(error)
            if token in self.claims:
                self.claims[token] = error
            for fd in fds:
                os.close(fd)
            self._free_slot(slot)
            return
        job_w, res_r, out_r, err_r, pidfd, *control = fds
        worker = Worker(token, int(str(reply["pid"])), key, slot, job_w, res_r, out_r, err_r, pidfd)
        worker.control = control[0] if control else -1
        if self.closed:
            worker.kill()
            worker.close()
            return
        if attach_error is not None:
            self.spawn_errors.append(f"could not move worker {worker.pid} into its cgroups: {attach_error}")
            if token in self.claims:
                self.claims[token] = self.spawn_errors[-1]
            self._discard(worker)
            return
        if token in self.claims:
            self._hint(worker, True)
            self.claims[token] = worker
            return
        self._hint(worker, unhinted)
        self.ready[key].append(worker)

    def _hint(self, worker: Worker, unhinted: bool) -> None:
        """Tell a new worker what to pre-start (``warm.py``), now that it is in its cgroups: everything it
        starts from here on is inside them. Every worker waits for this line before it reports ready.
        At most ``PIPE_BUF`` bytes into an empty pipe: one write, which never blocks."""
        # A request already waits: it takes this worker at once, and a warm start would only add the
        # runtime's start-up before its ``ready`` (without this rule: 0.78-0.88x the cold executions/s for
        # Bash with 2 in flight, ``warm.py``).
        if self.warm is not None and not unhinted and not self.waiting:
            worker.hint = self.warm.choice(collections.Counter(w.hint for w in self.ready[worker.key]))
        with contextlib.suppress(OSError):  # it died while being built: ``acquire`` discards it
            os.write(worker.job_w, worker.hint)

    def _take(self, key: WorkerKey, hint: bytes) -> Worker | None:
        """Remove and return the first parked worker committed to ``hint``, else the first unhinted one."""
        parked = self.ready[key]
        for wanted in dict.fromkeys((hint, warm.NO_HINT)):
            for worker in parked:
                if worker.hint == wanted:
                    parked.remove(worker)
                    return worker
        return None

    def _retire_stale(self, key: WorkerKey) -> None:
        """Kill parked workers committed to a shape that has more of them than recent requests ask for
        (``warm.WarmChooser.quota``): a committed worker runs nothing else, so after a switch of
        language it would stay parked for good. The janitor frees their slots; ``_fill`` refills."""
        if self.warm is None:
            return
        parked = collections.Counter(w.hint for w in self.ready[key])
        for worker in list(self.ready[key]):
            if worker.hint != warm.NO_HINT and parked[worker.hint] > self.warm.quota(worker.hint):
                parked[worker.hint] -= 1
                self.ready[key].remove(worker)
                self.release(worker)

    def _spawn(self, key: WorkerKey, unhinted: bool = False, role: str = "run") -> int:
        """Ask the zygote for a worker (caller holds ``cond`` and a free slot exists); ``unhinted``: it
        gets no warm-start hint, whatever the chooser would say (``acquire``); ``role``: what its pid 1
        becomes (``jail.JailSpec.role``). Returns the request's token (-1 if the zygote is gone)."""
        slot = self.free_slots.popleft()
        token = next(self.tokens)
        if unhinted:
            self.unhinted.add(token)
        spec = {
            "isolate": self.isolate,
            "uid": self.uid_base + slot,
            "slot": slot,
            "workdir_mb": key[0],
            "workdir_inodes": key[1],
            "role": role,
        }
        self.pending[token] = (slot, key)
        command: dict[str, Any] = {"op": "spawn", "token": token, "spec": spec}
        if role == "template":  # the uids its user namespace maps: the block's (``zygote/session_userns.py``)
            command["uids"] = [self.uid_base, self.slots]
        try:
            self.sock.send(json.dumps(command).encode())
        except OSError:
            self.pending.pop(token, None)
            self.unhinted.discard(token)
            self.free_slots.append(slot)
            return -1
        return token

    def _fill(self) -> None:
        waiting = sum(1 for _, key in self.pending.values() if key == self.default_key)
        while (
            self.free_slots and len(self.ready[self.default_key]) + waiting < self.workers and not self.closed
        ):
            self._spawn(self.default_key)
            waiting += 1

    def _free_slot(self, slot: int) -> None:
        self.free_slots.append(slot)
        self._fill()

    def _discard(self, worker: Worker) -> None:
        """A parked worker that died (killed from outside, OOM): drop it and free its slot."""
        worker.kill()
        worker.close()
        slot = self.slot(worker)
        if slot is not None:
            slot.kill_all()
        self._free_slot(worker.slot)

    def alive(self) -> bool:
        return self.process.poll() is None and self.reader.is_alive()

    def _restart(self) -> None:
        """The zygote died: start a new one (its workers died with it or are discarded on acquire)."""
        self.sock.close()
        self.process.kill()
        self.process.wait()
        for token in list(self.pending):
            slot, _ = self.pending.pop(token)
            self.free_slots.append(slot)
        self.unhinted.clear()
        self.cond.release()
        try:
            self._start_zygote()
        finally:
            self.cond.acquire()

    # -- public ----------------------------------------------------------------------------------------
    def observe(self, job: dict[str, Any]) -> bytes:
        """Count ``job``'s warm-start shape towards the hints new workers get (``warm.WarmChooser``);
        returns the hint line of a worker that can run it, for ``acquire``."""
        if self.warm is None:
            return warm.NO_HINT
        with self.cond:
            return self.warm.observe(job)

    def slot(self, worker: Worker) -> CgroupSlot | None:
        return self.cgroups.slots[worker.slot] if self.cgroups else None

    def wait_settled(self, timeout_s: float) -> bool:
        """Wait until no worker runs, none is being built, every finished one is cleaned up (every
        slot free or parked, ``workers`` parked) and every parked one reported ready (``warm.py``: its
        runtime parked): True when that happened within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                parked = sum(len(queue) for queue in self.ready.values())
                at_rest = not self.pending and len(self.free_slots) + parked == self.slots
                at_rest = at_rest and all(w.reported() for queue in self.ready.values() for w in queue)
                refilled = len(self.ready[self.default_key]) >= self.workers or not self.free_slots
                if at_rest and refilled:
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return False
                self.cond.wait(min(left, 0.01))

    def acquire(self, key: WorkerKey, hint: bytes = warm.NO_HINT, timeout_s: float = 30.0) -> Worker:
        """A parked worker for a job with work-directory ``key`` whose warm-start shape is ``hint``
        (``observe``): one committed to that shape, else an unhinted one (a committed worker runs no
        other shape, ``warm.py``); if every parked worker is committed elsewhere, an unhinted one is
        built for this request."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                if self.closed:
                    raise SandboxFailure("the sandbox is closed")
                if not self.alive():
                    self._restart()
                while (worker := self._take(key, hint)) is not None:
                    if worker.alive():
                        self.warm_starts += worker.hint != warm.NO_HINT
                        self._fill()
                        return worker
                    self._discard(worker)
                coming = [token for token, (_, k) in self.pending.items() if k == key]
                if key != self.default_key:
                    needed = not coming
                else:  # parked ones are all committed to another shape: build one that takes any job
                    needed = bool(self.ready[key]) and not self.unhinted.intersection(coming)
                    self._retire_stale(key)
                if needed and self.free_slots:
                    self._spawn(key, unhinted=True)
                left = deadline - time.monotonic()
                if left <= 0:
                    errors = "; ".join(self.spawn_errors) or "no worker became ready"
                    raise SandboxFailure(f"no sandbox worker within {timeout_s:.0f} s: {errors}")
                self.waiting += 1
                try:
                    self.cond.wait(min(left, 0.5))
                finally:
                    self.waiting -= 1

    def spawn_dedicated(
        self, key: WorkerKey, role: str, slot_timeout_s: float = 30.0, build_timeout_s: float = 30.0
    ) -> Worker:
        """A worker built for one caller, never parked nor hinted: a session's pid 1 (``sessions/``,
        ``role`` ``"session"`` or ``"template"``). Waits up to ``slot_timeout_s`` for a free slot, then
        up to ``build_timeout_s`` for the worker."""
        deadline = time.monotonic() + slot_timeout_s
        with self.cond:
            while not self.free_slots:
                self._wait_or_fail(
                    deadline, f"no free sandbox slot within {slot_timeout_s:g} s ({self.slots} in all)"
                )
            deadline = time.monotonic() + build_timeout_s
            if not self.alive():
                self._restart()
            token = self._spawn(key, unhinted=True, role=role)
            if token < 0:
                raise SandboxFailure("the zygote is gone")
            self.claims[token] = None
            try:
                while self.claims[token] is None:
                    if token not in self.pending:
                        raise SandboxFailure("the zygote exited while building a session worker")
                    self._wait_or_fail(deadline, f"no session worker within {build_timeout_s:g} s")
                claim = self.claims[token]
            finally:
                self.claims.pop(token, None)
            if not isinstance(claim, Worker):
                raise SandboxFailure(f"could not build a session worker: {claim}")
            return claim

    def _wait_or_fail(self, deadline: float, message: str) -> None:
        left = deadline - time.monotonic()
        if self.closed:
            raise SandboxFailure("the sandbox is closed")
        if left <= 0:
            raise SandboxFailure(message)
        self.cond.wait(min(left, 0.5))

    def take_slot(self, timeout_s: float = 30.0) -> int:
        """A free slot (its cgroups and uid ``uid_base + slot``) for a process the pool did not build: a
        fork of a session template (``sessions/``). Give it back with ``release`` of a ``Worker`` for
        that process, or ``return_slot`` if none was made."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not self.free_slots:
                self._wait_or_fail(
                    deadline, f"no free sandbox slot within {timeout_s:g} s ({self.slots} in all)"
                )
            return self.free_slots.popleft()

    def return_slot(self, slot: int) -> None:
        """Give back a slot from ``take_slot`` whose process never started (or is dead)."""
        cgroup = self.cgroups.slots[slot] if self.cgroups else None
        if cgroup is not None and not cgroup.kill_all():
            with self.cond:
                self.spawn_errors.append(f"processes survive in cgroup slot {slot}: {cgroup.pids()}")
            return
        with self.cond:
            self._free_slot(slot)
            self.cond.notify_all()

    def wait_exit(self, worker: Worker, timeout_s: float) -> WorkerExit | None:
        """How the worker's pid 1 ended, once the zygote reaped it (``None`` on timeout)."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while worker.pid not in self.exits:
                left = deadline - time.monotonic()
                if left <= 0 or not self.reader.is_alive():
                    return None
                self.cond.wait(left)
            return self.exits.pop(worker.pid)

    def release(self, worker: Worker) -> None:
        """Kill what is left of the worker's sandbox and give the slot back, off the caller's critical
        path (the janitor thread waits for the sandbox's last process to leave the cgroup)."""
        worker.kill()
        worker.close(keep_pidfd=True)
        with self.cond:
            self.exits.pop(worker.pid, None)
        self.janitor_queue.put(worker)

    def _janitor(self) -> None:
        while True:
            worker = self.janitor_queue.get()
            if worker is None:
                return
            worker.wait_dead(JANITOR_WAIT_S)
            worker.close()
            slot = self.slot(worker)
            if slot is not None and not slot.kill_all():
                with self.cond:
                    self.spawn_errors.append(f"processes survive in cgroup slot {worker.slot}: {slot.pids()}")
                continue  # the slot stays out of the pool: never reuse a cgroup that is not empty
            with self.cond:
                self._free_slot(worker.slot)
                self.cond.notify_all()

    def close(self) -> None:
        """Stop the zygote (it kills and reaps every sandbox it built), then remove the cgroups."""
        self.janitor_queue.put(None)
        self.janitor.join(timeout=10)
        with self.cond:
            self.closed = True
            parked = [w for waiting in self.ready.values() for w in waiting]
            self.ready.clear()
        for worker in parked:
            worker.kill()
            worker.close()
        with contextlib.suppress(OSError):
            self.sock.send(json.dumps({"op": "exit"}).encode())
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.sock.close()
        self.reader.join(timeout=5)
        if self.cgroups is not None:
            self.cgroups.close()
