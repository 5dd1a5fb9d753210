"""Ray plumbing of the executor: connecting to (or starting) Ray, checking the cluster can place the
actors, and ``ActorGroup``: actors of one role, a dead or hung one replaced and its task retried.

Taxonomy (``faults.py``): ``RayActorError`` (the actor died: ``ray.kill``, a SIGKILL, a lost node) and
``GetTimeoutError`` (it ran past ``executor.task_timeout_s``: hung) mean the worker is gone, so it is killed
and replaced and the task retried; ``RayTaskError`` means the task raised inside a live worker, retried on
the same terms only where the caller says repeating it is harmless (``retry_raised``). A caller whose work
lived on the dead actor (a sandbox worker's open environment) is told through ``replaced`` and either
restores it on the replacement or gives it up (raises).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from execrl.distributed.faults import FaultCounters, RetryPolicy, TaskFailed

if TYPE_CHECKING:
    from execrl.config import TrainConfig

__all__ = ["ActorGroup", "Attempt", "check_resources", "ensure_ray"]

log = logging.getLogger("execrl.distributed")
DIED = (RayActorError, GetTimeoutError)  # ActorDiedError and ActorUnavailableError are RayActorErrors


def ensure_ray(address: str | None, *, num_cpus: int | None = None) -> bool:
    """Connect to ``address`` or start a local Ray; True when this call started it (and should stop it).

    A local start passes the driver's ``sys.path`` to the workers, so they import the same execrl (and the
    same user verifier modules) as the driver; on a cluster execrl must be installed on every node.

    A local Ray listens on 127.0.0.1 only (its GCS, raylet and workers otherwise bind every interface:
    anyone on the network could submit tasks to this machine). Ray 2.60 binds loopback when the node's
    address is 127.0.0.1, which it chooses itself only on macOS and Windows (``ray.init``'s
    ``_node_ip_address="127.0.0.1"`` is replaced by the machine's address); so ``_bind_loopback`` asks for
    that behaviour through Ray's own switch, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (for the processes it
    starts) and the constant it sets at import (for this one). A cluster (``address``) is not changed.
    """
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
        return True
    _bind_loopback()
    path = os.pathsep.join(p for p in sys.path if p)
    ray.init(
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    return True


def _bind_loopback() -> None:
    from ray._private import ray_constants  # pinned ray==2.60.0; tests/integration checks the binding

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def check_resources(config: TrainConfig) -> None:
    """Refuse to start when the cluster lacks the CPUs/GPUs the roles declare (an actor that cannot be
    placed would otherwise wait forever), naming the keys to lower."""
    section = config.executor
    needed = {
        "CPU": section.rollout_workers * section.rollout_num_cpus
        + section.sandbox_workers * section.sandbox_num_cpus,
        "GPU": section.rollout_workers * section.rollout_num_gpus,
    }
    free = ray.available_resources()  # type: ignore[no-untyped-call]
    for name, amount in needed.items():
        if amount > free.get(name, 0.0) + 1e-9:
            raise ValueError(
                f"the Ray executor's actors need {amount:g} {name} but the cluster has {free.get(name, 0.0):g} "
                "free; lower executor.rollout_workers/sandbox_workers or executor.*_num_cpus/_num_gpus, "
                "or add nodes (ray start --address)"
            )


@dataclasses.dataclass(frozen=True)
class Attempt:
    index: int  # which actor slot
    actor: Any  # the actor handle the task went to (a replacement is a different handle)
    ref: Any  # the task's ObjectRef


class ActorGroup:
    """``count`` actors of one role; calls go round robin (or to a named slot); a dead or hung actor is
    replaced and the call retried.

    Thread-safe: submissions and replacements hold the group's lock (submitting is quick, the waiting
    is not under it), and a dead actor is replaced once even when several threads saw it die."""

    def __init__(
        self, role: str, make: Callable[[], Any], count: int, *, policy: RetryPolicy, timeout_s: float
    ) -> None:
        self.role = role
        self._make = make
        self.actors = [make() for _ in range(count)]
        self.generation = [0] * count  # bumped on each replacement (a fresh actor holds no state)
        self.policy, self.timeout_s = policy, timeout_s
        self._turn = 0
        self._lock = threading.Lock()

    def start(self, submit: Callable[[int], Any], index: int | None = None) -> Attempt:
        """Submit to actor ``index`` (default: the next, round robin); ``submit(index)`` sends the task."""
        with self._lock:
            if index is None:
                self._turn += 1
                index = self._turn % len(self.actors)
            return Attempt(index, self.actors[index], submit(index))

    def replace(self, attempt: Attempt, reason: str, counters: FaultCounters) -> None:
        with self._lock:
            if self.actors[attempt.index] is not attempt.actor:
                return  # another thread already replaced it
            log.warning("%s worker %d replaced: %s", self.role, attempt.index, reason)
            ray.kill(attempt.actor, no_restart=True)
            self.actors[attempt.index] = self._make()
            self.generation[attempt.index] += 1
        counters.count(replaced_workers=1)

    def call(
        self,
        what: str,
        submit: Callable[[int], Any],
        *,
        counters: FaultCounters,
        first: Attempt | None = None,
        index: int | None = None,
        retry_raised: bool = True,
        replaced: Callable[[str], None] | None = None,
    ) -> Any:
        """``ray.get`` of the task with bounded retries; ``first`` is an attempt already submitted. Retries go
        round robin, or to slot ``index`` (its replacement, once it died). ``retry_raised=False``: a task
        that raised inside a live worker fails at once (repeating it would repeat its side effects).
        ``replaced(reason)`` runs after the worker died and was replaced, before the retry (it may raise
        to give the call up)."""
        counters.count(tasks=1)
        reasons: list[str] = []
        for number in range(1, self.policy.max_attempts + 1):
            attempt = first if number == 1 and first is not None else self.start(submit, index)
            try:
                return ray.get(attempt.ref, timeout=self.timeout_s)
            except DIED as exc:  # infrastructure: the worker is gone or hung; replace it
                reasons.append(f"{self.role} worker {attempt.index} {type(exc).__name__}")
                self.replace(attempt, reasons[-1], counters)
                if replaced is not None:
                    replaced(reasons[-1])
            except RayTaskError as exc:  # the task raised inside a live worker
                cause = exc.cause if exc.cause is not None else exc
                reasons.append(f"{type(cause).__name__}: {str(cause)[:200]}")
                if not retry_raised:
                    break
            if number < self.policy.max_attempts:
                counters.count(retries=1)
                time.sleep(self.policy.delay(number))
        counters.count(failed_tasks=1)
        raise TaskFailed(what, reasons)

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
