"""The Ray executor: rollout workers and sandbox workers as Ray actors; the only module importing ``ray``.

Roles (research notes A.1-A.4: verl, OpenRLHF, SkyRL and NeMo-RL all drive workers with Ray):

* trainer driver: the ``execrl train`` process; it holds the policy, the optimizer and the loop;
* rollout workers (``executor.rollout_workers``): an engine and a model replica each;
  ``num_cpus``/``num_gpus`` per actor from ``executor.rollout_num_*``;
* sandbox workers (``executor.sandbox_workers``): a ``Sandbox`` each, and the reward code next to it, so
  completions go out and scores come back (programs and results never cross to the driver).

Weights: after each update the driver puts a CPU state dict into Ray's object store once, as version
``v``; a rollout worker loads it (by reference, one copy per node) before generating whenever it is more
than ``executor.max_weight_staleness`` versions behind, and the worker itself refuses to generate with
older weights. Versions used are logged (``executor/weight_version_used_min``, ``..._staleness_max``).
A GPU path (NCCL broadcast) would replace ``publish_weights``/``load_weights`` only; not implemented.

Faults: a worker that dies (``ray.kill``, a SIGKILL, a lost node) or hangs past ``task_timeout_s`` is
killed, replaced by a fresh actor (a rollout replica gets the latest weights first) and its in-flight
task retried, with bounded attempts and backoff (``faults.RetryPolicy``). A scoring task that fails on
every attempt becomes invalid scores with the reason; a generate call that does raises ``TaskFailed``
(the step cannot complete; ``--resume`` continues from the last checkpoint). Results are taken only from
a successful attempt, so nothing is lost or counted twice. Retries are ``executor/*`` metrics, and the
default alarm ``executor_retries`` fires when ``executor/retry_rate`` passes its threshold.

Synchronous by construction: each call runs whole on one worker with the driver's seed, so with
``max_weight_staleness=0`` a run's metrics equal the in-process run's step for step. Generation is not
split across rollout workers within a call (that would change the sampled sequences); several workers
serve successive calls round robin.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from execrl.distributed.faults import FaultCounters, RetryPolicy, TaskFailed
from execrl.distributed.ray_workers import RolloutWorker, SandboxWorker

if TYPE_CHECKING:
    import torch

    from execrl.config import TrainConfig
    from execrl.recipes.sampling import GroupSampler
    from execrl.rewards import Score
    from execrl.rollout.types import RolloutBatch
    from execrl.tasks.schema import Task

log = logging.getLogger("execrl.distributed")
_DIED = (RayActorError, GetTimeoutError)  # ActorDiedError and ActorUnavailableError are RayActorErrors


def ensure_ray(address: str | None, *, num_cpus: int | None = None) -> bool:
    """Connect to ``address`` or start a local Ray; True when this call started it (and should stop it).

    A local start passes the driver's ``sys.path`` to the workers, so they import the same execrl (and the
    same user verifier modules) as the driver; on a cluster execrl must be installed on every node.
    """
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
        return True
    path = os.pathsep.join(p for p in sys.path if p)
    ray.init(
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    return True


def check_resources(config: TrainConfig) -> None:
    """Refuse to start when the cluster lacks the CPUs/GPUs the roles declare (an actor that cannot be
    placed would otherwise wait forever), naming the keys to lower."""
    section = config.executor
    needed = {
        "CPU": section.rollout_workers * section.rollout_num_cpus
        + section.sandbox_workers * section.sandbox_num_cpus,
        "GPU": section.rollout_workers * section.rollout_num_gpus,
    }
    free = ray.available_resources()
    for name, amount in needed.items():
        if amount > free.get(name, 0.0) + 1e-9:
            raise ValueError(
                f"the Ray executor's actors need {amount:g} {name} but the cluster has {free.get(name, 0.0):g} "
                "free; lower executor.rollout_workers/sandbox_workers or executor.*_num_cpus/_num_gpus, "
                "or add nodes (ray start --address)"
            )


class ActorGroup:
    """``count`` actors of one role; calls go round robin; a dead or hung actor is replaced and retried."""

    def __init__(
        self,
        role: str,
        make: Callable[[], Any],
        count: int,
        *,
        policy: RetryPolicy,
        counters: FaultCounters,
        timeout_s: float,
    ) -> None:
        self.role = role
        self._make = make
        self.actors = [make() for _ in range(count)]
        self.generation = [0] * count  # bumped on each replacement (a fresh actor holds no state)
        self.policy, self.counters, self.timeout_s = policy, counters, timeout_s
        self._turn = 0

    def next_index(self) -> int:
        self._turn += 1
        return self._turn % len(self.actors)

    def replace(self, index: int, reason: str) -> None:
        log.warning("%s worker %d replaced: %s", self.role, index, reason)
        ray.kill(self.actors[index], no_restart=True)
        self.actors[index] = self._make()
        self.generation[index] += 1
        self.counters.replaced_workers += 1

    def call(
        self, what: str, submit: Callable[[int], Any], *, first_ref: Any = None, first_index: int = -1
    ) -> Any:
        """``ray.get(submit(index))`` with bounded retries; ``first_ref`` is an attempt already submitted."""
        self.counters.tasks += 1
        reasons: list[str] = []
        for attempt in range(1, self.policy.max_attempts + 1):
            index = first_index if attempt == 1 and first_ref is not None else self.next_index()
            ref = first_ref if attempt == 1 and first_ref is not None else submit(index)
            try:
                return ray.get(ref, timeout=self.timeout_s)
            except _DIED as exc:  # infrastructure: the worker is gone or hung; replace it
                reasons.append(f"{self.role} worker {index} {type(exc).__name__}")
                self.replace(index, reasons[-1])
            except RayTaskError as exc:  # the task raised inside a live worker
                cause = exc.cause if exc.cause is not None else exc
                reasons.append(f"{type(cause).__name__}: {str(cause)[:200]}")
            if attempt < self.policy.max_attempts:
                self.counters.retries += 1
                time.sleep(self.policy.delay(attempt))
        self.counters.failed_tasks += 1
        raise TaskFailed(what, reasons)

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)


def remote_sampler(sampler: GroupSampler, executor: RayExecutor) -> GroupSampler:
    """A ``GroupSampler`` whose generate-and-score call runs on ``executor``'s actors; everything else
    (``sample_step``'s DAPO refill, the driver-side ``sandbox``/``reward`` for the audit) is unchanged."""
    from execrl.recipes.sampling import GroupSampler

    @dataclasses.dataclass(frozen=True)
    class RaySampler(GroupSampler):
        def __call__(self, step: int, tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]:
            return executor(step, tasks, round_)

    fields = {f.name: getattr(sampler, f.name) for f in dataclasses.fields(GroupSampler)}
    return RaySampler(**fields)


class RayExecutor:
    """Generate on rollout actors, score on sandbox actors; see the module docstring."""

    def __init__(self, config: TrainConfig, sampler: GroupSampler) -> None:
        section = config.executor
        self.driver_sampler = sampler  # its tokenizer, params and seed make each call's inputs
        self.sampler = remote_sampler(sampler, self)
        self.max_staleness = section.max_weight_staleness
        self.counters = FaultCounters()
        self._owns_ray = ensure_ray(section.ray_address)
        check_resources(config)
        policy = RetryPolicy(section.max_attempts, section.retry_backoff_s, max(5.0, section.retry_backoff_s))
        rollout_cls = ray.remote(RolloutWorker).options(
            num_cpus=section.rollout_num_cpus, num_gpus=section.rollout_num_gpus
        )
        sandbox_cls = ray.remote(SandboxWorker).options(num_cpus=section.sandbox_num_cpus)
        timeout_s = section.task_timeout_s
        self.rollout = ActorGroup(
            "rollout", lambda: rollout_cls.remote(config), section.rollout_workers,
            policy=policy, counters=self.counters, timeout_s=timeout_s,
        )  # fmt: skip
        self.sandbox = ActorGroup(
            "sandbox", lambda: sandbox_cls.remote(config), section.sandbox_workers,
            policy=policy, counters=self.counters, timeout_s=timeout_s,
        )  # fmt: skip
        self._loaded: dict[tuple[int, int], int] = {}  # (worker, its generation) -> weight version it holds
        self._latest: tuple[int, Any] | None = None  # (version, ObjectRef of the state dict)
        self._used: list[int] = []  # weight versions the step's generate calls used
        self._staleness: list[int] = []  # newest published version minus the one used, per call
        self._pushes = 0
        self._publish_s = 0.0

    # -- weights -----------------------------------------------------------------------------------------
    def publish_weights(self, model: torch.nn.Module, *, version: int) -> None:
        start = time.perf_counter()
        state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        self._latest = (version, ray.put(state))
        self._publish_s += time.perf_counter() - start  # outside perf/step_s: reported on its own

    def _submit_generate(self, index: int, prompts: Any, params: Any) -> Any:
        if self._latest is None:
            raise RuntimeError("publish_weights must be called before the first generate call")
        version, ref = self._latest
        actor, key = self.rollout.actors[index], (index, self.rollout.generation[index])
        if version - self._loaded.get(key, -1) > self.max_staleness:
            actor.load_weights.remote(version, ref)  # actor calls run in order: loaded before generate
            self._loaded[key] = version
            self._pushes += 1
        return actor.generate.remote(prompts, params, version - self.max_staleness)

    # -- one generate-and-score call ------------------------------------------------------------------------
    def __call__(self, step: int, tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]:
        prompts, params = self.driver_sampler.generation_inputs(step, tasks, round_)
        rollout, used = self.rollout.call(
            f"generate (step {step}, round {round_})", lambda i: self._submit_generate(i, prompts, params)
        )
        self._used.append(used)
        self._staleness.append(self._latest[0] - used if self._latest is not None else 0)
        row_tasks = [tasks[g] for g in rollout.group_index.tolist()]
        return rollout, self._score(row_tasks, list(rollout.texts))

    def _score(self, tasks: Sequence[Task], completions: Sequence[str]) -> list[Score]:
        """Contiguous chunks, one per sandbox worker, in flight together; each retried on its own."""
        from execrl.rewards import Score

        count = len(self.sandbox.actors)
        bounds = [len(tasks) * k // count for k in range(count + 1)]
        chunks = [(bounds[k], bounds[k + 1]) for k in range(count) if bounds[k] < bounds[k + 1]]

        def submit(index: int, lo: int, hi: int) -> Any:
            return self.sandbox.actors[index].score.remote(list(tasks[lo:hi]), list(completions[lo:hi]))

        first = [(k % count, submit(k % count, lo, hi)) for k, (lo, hi) in enumerate(chunks)]
        scores: list[Score] = []
        for (index, ref), (lo, hi) in zip(first, chunks, strict=True):
            try:
                part = self.sandbox.call(
                    f"scoring of rows {lo}..{hi - 1}",
                    lambda i, lo=lo, hi=hi: submit(i, lo, hi),
                    first_ref=ref,
                    first_index=index,
                )
            except TaskFailed as exc:
                part = [Score.invalid(f"executor_error: {exc}") for _ in range(lo, hi)]
            scores.extend(part)
        return scores

    # -- telemetry and lifetime ---------------------------------------------------------------------------
    def step_metrics(self) -> dict[str, float]:
        latest = self._latest[0] if self._latest is not None else -1
        metrics = self.counters.drain()
        metrics["executor/weight_version"] = float(latest)
        if self._used:
            metrics["executor/weight_version_used_min"] = float(min(self._used))
            metrics["executor/weight_staleness_max"] = float(max(self._staleness))
        metrics["executor/weight_pushes"] = float(self._pushes)
        metrics["executor/publish_weights_s"] = self._publish_s
        self._used, self._staleness, self._pushes, self._publish_s = [], [], 0, 0.0
        return metrics

    def close(self) -> None:
        self.rollout.close()
        self.sandbox.close()
        if self._owns_ray:
            ray.shutdown()
