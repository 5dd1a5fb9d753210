"""The Ray executor: the one rollout loop (``execrl.episodes``) with its engine calls on rollout actors and
its environment on sandbox actors. Only ``execrl.distributed`` imports ``ray``.

Roles (research notes A.1-A.4: verl, OpenRLHF, SkyRL and NeMo-RL all drive workers with Ray):

* trainer driver: the ``execrl train`` process; it holds the policy, the optimizer and the loop, and runs
  the rollout loop itself (``run_episodes``: cheap bookkeeping, token appending, budgets);
* rollout workers (``executor.rollout_workers``, ``RolloutWorker``): an engine and a model replica each;
  ``num_cpus``/``num_gpus`` per actor from ``executor.rollout_num_*``. The loop's backend is
  ``RayBackend`` (``ray_backend.py``): the local backend whose engine calls go to these actors;
* sandbox workers (``executor.sandbox_workers``, ``SandboxWorker``): a sandbox each and the run's
  environment over it. The loop's environment is ``RemoteEnvironment`` (``ray_environment.py``): each
  rollout call's tasks are partitioned over these actors, so a tool episode's session lives on the actor
  that runs its cells and judges its answer (programs and their output never cross to the driver).

One rollout call (``RaySampler``, a ``StepSampler`` whose call binds the step): ``RemoteEnvironment.start``
(partitions started in parallel) -> each turn's engine call on a rollout actor (``RayBackend.wait``) ->
``respond`` fanned out to the partitions -> ... -> ``close`` -> ``judge`` fanned out -> ``report``.

Weights: after each update the driver puts a CPU state dict into Ray's object store once, as version
``v`` (with LoRA the adapters' tensors only: each worker's replica loads the same frozen base itself); a
rollout worker loads a version (by reference, one copy per node) before an engine call when the one it
holds is outside the staleness bound, and the worker itself refuses to generate with older weights
(``versions.py`` states the rule; staleness is counted at consumption, step minus version used). Versions
used are logged per step (``executor/weight_version_used_min``, ``executor/weight_staleness_max``). A GPU
path (NCCL broadcast) would replace ``publish_weights``/``load_weights`` only; not implemented.

Loops: the serial loop samples through ``executor.sampler``; the one-step-off loop
(``algorithm.async_steps=1``) through ``behaviour_sampler(version=t)`` from its rollout thread (step t+1
sampled with version t while the driver trains step t and publishes t+1), which needs
``max_weight_staleness >= 1``. With ``rollout.stream_scoring`` each group is its own engine call: those go
out to the rollout actors together, and each finished group is judged on the sandbox actors meanwhile.

Faults (``ray_actors.ActorGroup``, ``faults.py``): a worker that dies (``ray.kill``, a SIGKILL, a lost
node) or hangs past ``task_timeout_s`` is killed and replaced by a fresh actor (a rollout replica gets its
weights first). An engine call is retried on another rollout actor (stateless); one failing every attempt
raises ``TaskFailed`` (the step cannot complete; ``--resume`` continues from the last checkpoint). A dead
sandbox actor's partition is restored where that is exact, else its episodes end as errors, counted in
``executor/lost_episodes`` (``ray_environment.py``); a judgement failing every attempt gives invalid
verdicts with the reason. Results are taken only from a successful attempt, so nothing is counted twice.
Retries are ``executor/*`` metrics of the step whose samples they were for, and the default alarm
``executor_retries`` fires when ``executor/retry_rate`` passes its threshold.

Deterministic by construction: the Ray run makes the in-process run's engine calls (same prompts, same
parameters and seeds, same weight version, in the same order, each whole on one actor, a multi-turn
call's turns on one actor with the same prefix-cache session), and the environment answers each episode
as in process, so a run's metrics equal the in-process run's step for step, for every environment (serial
loop with ``max_weight_staleness=0``; async loop with ``max_weight_staleness=1``; streaming either way).
Limits: a call retried after a rollout actor died runs without the dead actor's prefix cache (exact up to
float rounding of the reused keys/values); with streaming multi-turn episodes over several rollout actors
each actor's cache holds only its groups' turns, where in process one cache holds all (the same bound).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any

import ray

from execrl.components.sampling import StepSampler
from execrl.config import build
from execrl.distributed.faults import RetryPolicy, StepLog
from execrl.distributed.ray_actors import ActorGroup, Attempt, check_resources, ensure_ray
from execrl.distributed.ray_backend import RayBackend, RolloutCalls
from execrl.distributed.ray_environment import RemoteEnvironment
from execrl.distributed.ray_workers import RolloutWorker, SandboxWorker
from execrl.distributed.versions import WeightVersions

if TYPE_CHECKING:
    import torch

    from execrl.config import TrainConfig
    from execrl.episodes import RolloutResult
    from execrl.rollout.engine import Engine
    from execrl.tasks.schema import Task

__all__ = [
    "ActorGroup",
    "Attempt",
    "RayExecutor",
    "RaySampler",
    "ensure_ray",
    "ray_sampler",
    "time_weight_pushes",
]


def time_weight_pushes(config: TrainConfig, model: torch.nn.Module, pushes: int) -> list[dict[str, float]]:
    """Start one rollout worker actor (as ``RayExecutor`` does) and push ``model``'s weights ``pushes`` times
    the way ``publish_weights`` + the worker's ``load_weights`` do: a CPU state dict through the object store,
    into the replica and, with ``rollout.engine=vllm``, on into its engine by the verified sync. Every weight
    is nudged by 1e-4 (relative) before each push. Per push: its wall seconds (``push_s``) and the worker's
    ``sync/*`` metrics (``execrl bench engines``, side ``ray``)."""
    import torch

    owns = ensure_ray(None, num_cpus=2)
    try:
        actor = ray.remote(RolloutWorker).options(num_cpus=1).remote(config)
        out = []
        for version in range(pushes):
            with torch.no_grad():
                for param in model.parameters():
                    param.mul_(1.0 + 1e-4 * (-1) ** version)
            start = time.perf_counter()
            state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
            ray.get(actor.load_weights.remote(version, ray.put(state)))
            out.append({"push_s": time.perf_counter() - start, **ray.get(actor.sync_metrics.remote())})
        ray.get(actor.close.remote())
        return out
    finally:
        if owns:
            ray.shutdown()


@dataclasses.dataclass(frozen=True)
class RaySampler(StepSampler):
    """A ``StepSampler`` whose rollout calls run on ``executor``'s actors (with weights ``version`` when
    pinned); everything else (``sample_step``'s DAPO refill, seeds, caps, budgets) is the driver's."""

    executor: RayExecutor = dataclasses.field(kw_only=True)
    version: int | None = dataclasses.field(default=None, kw_only=True)  # pinned weights (async loop)

    def __call__(self, step: int, tasks: list[Task], round_: int) -> RolloutResult:
        on_ray = dataclasses.replace(
            StepSampler(**_fields(self)), environment=self.executor.environment(step),
            backend=self.executor.backend(step, self.version),
        )  # fmt: skip
        return on_ray(step, tasks, round_)


def _fields(sampler: StepSampler) -> dict[str, Any]:
    return {f.name: getattr(sampler, f.name) for f in dataclasses.fields(StepSampler)}


def ray_sampler(sampler: StepSampler, executor: RayExecutor, version: int | None = None) -> RaySampler:
    """``sampler`` (the driver's) with its rollout calls on ``executor``'s actors."""
    return RaySampler(**_fields(sampler), executor=executor, version=version)


class RayExecutor:
    """Rollout actors and sandbox actors under the driver's rollout loop; see the module docstring."""

    def __init__(self, config: TrainConfig, sampler: StepSampler) -> None:
        section = config.executor
        self.driver_sampler = sampler  # its environment (metrics), params, seed and caps make each call
        local = sampler.backend
        self.tokenizer: Any = local.tokenizer  # type: ignore[attr-defined]  # a LocalBackend: token space
        self.reuse_kv_max_bytes: int = getattr(local, "reuse_kv_max_bytes", 0)
        self.sampler: StepSampler = ray_sampler(sampler, self)
        self.versions = WeightVersions(section.max_weight_staleness)
        self._owns_ray = ensure_ray(section.ray_address)
        check_resources(config)
        policy = build(
            RetryPolicy,
            section,
            backoff_s=section.retry_backoff_s,
            backoff_max_s=max(5.0, section.retry_backoff_s),
        )
        rollout_cls = ray.remote(RolloutWorker).options(
            num_cpus=section.rollout_num_cpus, num_gpus=section.rollout_num_gpus
        )
        # Two calls at once: the loop's ``respond`` while its judging thread judges finished episodes.
        sandbox_cls = ray.remote(SandboxWorker).options(num_cpus=section.sandbox_num_cpus, max_concurrency=2)
        tokenizer = ray.put(self.tokenizer)
        timeout_s = section.task_timeout_s
        self.rollout = ActorGroup(
            "rollout",
            lambda: rollout_cls.remote(config),
            section.rollout_workers,
            policy=policy,
            timeout_s=timeout_s,
        )
        self.sandbox = ActorGroup(
            "sandbox", lambda: sandbox_cls.remote(config, tokenizer), section.sandbox_workers, policy=policy,
            timeout_s=timeout_s,
        )  # fmt: skip
        self._logs: dict[int, StepLog] = {}  # per sampled step; drained by step_metrics(step)
        self._lock = threading.Lock()
        self._publish_s = 0.0

    # -- what a rollout call of step ``step`` runs on ---------------------------------------------------
    def backend(self, step: int, version: int | None = None) -> RayBackend:
        calls = RolloutCalls(self.rollout, self.versions, self._log(step), step, version)
        return RayBackend(calls, self.tokenizer, reuse_kv_max_bytes=self.reuse_kv_max_bytes)

    def environment(self, step: int) -> RemoteEnvironment:
        return RemoteEnvironment(self.driver_sampler.environment, self.sandbox, self._log(step).counters)

    # -- weights -----------------------------------------------------------------------------------------
    def publish_weights(self, model: torch.nn.Module, *, version: int) -> None:
        from execrl.trainer.lora import adapter_state_dict, has_adapters

        start = time.perf_counter()
        # With LoRA only the adapters change: they are the version (the workers hold the same frozen base).
        source = adapter_state_dict(model) if has_adapters(model) else model.state_dict()
        state = {k: v.detach().to("cpu", copy=True) for k, v in source.items()}
        self.versions.publish(version, ray.put(state))
        self._publish_s += time.perf_counter() - start  # outside perf/step_s: reported on its own

    def behaviour_sampler(self, *, engine: Engine, version: int) -> StepSampler:
        """The rollout workers generate with published ``version`` (``engine`` is the driver's copy)."""
        return ray_sampler(self.driver_sampler, self, version)

    # -- telemetry and lifetime ---------------------------------------------------------------------------
    def _log(self, step: int) -> StepLog:
        with self._lock:
            return self._logs.setdefault(step, StepLog())

    def step_metrics(self, step: int) -> dict[str, float]:
        with self._lock:
            log_ = self._logs.pop(step, StepLog())
            publish_s, self._publish_s = self._publish_s, 0.0
        metrics = log_.metrics()
        metrics["executor/weight_version"] = float(self.versions.latest)
        metrics["executor/publish_weights_s"] = publish_s
        return metrics

    def close(self) -> None:
        # An engine apart from its worker (vLLM) stops and removes its /dev/shm files before the kill; a dead
        # or hung worker is killed anyway (its engine exits when the socket closes).
        with contextlib.suppress(Exception):
            ray.get([actor.close.remote() for actor in self.rollout.actors], timeout=60)
        self.rollout.close()
        self.sandbox.close()
        if self._owns_ray:
            ray.shutdown()
