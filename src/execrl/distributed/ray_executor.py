"""The Ray executor: rollout workers and sandbox workers as Ray actors; the only module importing ``ray``.

Roles (research notes A.1-A.4: verl, OpenRLHF, SkyRL and NeMo-RL all drive workers with Ray):

* trainer driver: the ``execrl train`` process; it holds the policy, the optimizer and the loop;
* rollout workers (``executor.rollout_workers``): an engine and a model replica each;
  ``num_cpus``/``num_gpus`` per actor from ``executor.rollout_num_*``;
* sandbox workers (``executor.sandbox_workers``): a ``Sandbox`` each, and the reward code next to it, so
  completions go out and scores come back (programs and results never cross to the driver).

Weights: after each update the driver puts a CPU state dict into Ray's object store once, as version
``v`` (with LoRA the adapters' tensors only: each worker's replica loads the same frozen base itself); a rollout worker loads a version (by reference, one copy per node) before generating when the one
it holds is outside the staleness bound, and the worker itself refuses to generate with older weights
(``versions.py`` states the rule; staleness is counted at consumption, step minus version used). Versions
used are logged per step (``executor/weight_version_used_min``, ``executor/weight_staleness_max``). A GPU
path (NCCL broadcast) would replace ``publish_weights``/``load_weights`` only; not implemented.

Loops: the serial loop calls the executor and waits; the one-step-off loop (``algorithm.async_steps=1``)
calls it from its rollout thread with a pinned version (step t+1 sampled with version t while the driver
trains step t and publishes t+1), which needs ``max_weight_staleness >= 1``. A streaming sampler
(``rollout.stream_scoring``) makes one generate call per group; here those calls go out to the rollout
workers together and each group's scoring goes to a sandbox worker as soon as its generation returns.

Faults: a worker that dies (``ray.kill``, a SIGKILL, a lost node) or hangs past ``task_timeout_s`` is
killed, replaced by a fresh actor (a rollout replica gets its weights first) and its in-flight task
retried, with bounded attempts and backoff (``faults.RetryPolicy``). A scoring task that fails on every
attempt becomes invalid scores with the reason; a generate call that does raises ``TaskFailed`` (the step
cannot complete; ``--resume`` continues from the last checkpoint). Results are taken only from a
successful attempt, so nothing is lost or counted twice. Retries are ``executor/*`` metrics of the step
whose samples they were for, and the default alarm ``executor_retries`` fires when
``executor/retry_rate`` passes its threshold.

Deterministic by construction: each generate call runs whole on one worker with the driver's seed and
the version the in-process run would use, so a run's metrics equal the in-process run's step for step
(serial loop with ``max_weight_staleness=0``; async loop with ``max_weight_staleness=1``; streaming
either way). Generation is not split across rollout workers within a call (that would change the sampled
sequences); several workers serve successive (or, streaming, concurrent) calls round robin.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from execrl.components.sampling import GenerateCall, GroupSampler, ScoredGroups, concat_groups
from execrl.config import build
from execrl.distributed.faults import FaultCounters, RetryPolicy, StepLog, TaskFailed
from execrl.distributed.ray_workers import RolloutWorker, SandboxWorker
from execrl.distributed.versions import WeightVersions

if TYPE_CHECKING:
    import torch

    from execrl.config import TrainConfig
    from execrl.rewards import Score
    from execrl.rollout.engine import Engine
    from execrl.rollout.types import RolloutBatch
    from execrl.tasks.schema import Task

log = logging.getLogger("execrl.distributed")
_DIED = (RayActorError, GetTimeoutError)  # ActorDiedError and ActorUnavailableError are RayActorErrors


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


@dataclasses.dataclass(frozen=True)
class Attempt:
    index: int  # which actor slot
    actor: Any  # the actor handle the task went to (a replacement is a different handle)
    ref: Any  # the task's ObjectRef


class ActorGroup:
    """``count`` actors of one role; calls go round robin; a dead or hung actor is replaced and retried.

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
    ) -> Any:
        """``ray.get`` of the task with bounded retries; ``first`` is an attempt already submitted."""
        counters.count(tasks=1)
        reasons: list[str] = []
        for number in range(1, self.policy.max_attempts + 1):
            attempt = first if number == 1 and first is not None else self.start(submit)
            try:
                return ray.get(attempt.ref, timeout=self.timeout_s)
            except _DIED as exc:  # infrastructure: the worker is gone or hung; replace it
                reasons.append(f"{self.role} worker {attempt.index} {type(exc).__name__}")
                self.replace(attempt, reasons[-1], counters)
            except RayTaskError as exc:  # the task raised inside a live worker
                cause = exc.cause if exc.cause is not None else exc
                reasons.append(f"{type(cause).__name__}: {str(cause)[:200]}")
            if number < self.policy.max_attempts:
                counters.count(retries=1)
                time.sleep(self.policy.delay(number))
        counters.count(failed_tasks=1)
        raise TaskFailed(what, reasons)

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)


@dataclasses.dataclass(frozen=True)
class RaySampler(GroupSampler):
    """A ``GroupSampler`` whose generate-and-score call runs on ``executor``'s actors; everything else
    (``sample_step``'s DAPO refill, the driver-side ``sandbox``/``reward`` for the audit) is unchanged."""

    executor: RayExecutor = dataclasses.field(kw_only=True)
    version: int | None = dataclasses.field(default=None, kw_only=True)  # pinned weights (async loop)

    def __call__(self, step: int, tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]:
        return self.executor(step, tasks, round_, version=self.version)


def remote_sampler(sampler: GroupSampler, executor: RayExecutor, version: int | None = None) -> GroupSampler:
    fields = {f.name: getattr(sampler, f.name) for f in dataclasses.fields(GroupSampler)}
    return RaySampler(**fields, executor=executor, version=version)


class RayExecutor:
    """Generate on rollout actors, score on sandbox actors; see the module docstring."""

    def __init__(self, config: TrainConfig, sampler: GroupSampler) -> None:
        section = config.executor
        self.driver_sampler = sampler  # its tokenizer, params and seed make each call's inputs
        self.sampler = remote_sampler(sampler, self)
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
        sandbox_cls = ray.remote(SandboxWorker).options(num_cpus=section.sandbox_num_cpus)
        timeout_s = section.task_timeout_s
        self.rollout = ActorGroup(
            "rollout",
            lambda: rollout_cls.remote(config),
            section.rollout_workers,
            policy=policy,
            timeout_s=timeout_s,
        )
        self.sandbox = ActorGroup(
            "sandbox",
            lambda: sandbox_cls.remote(config),
            section.sandbox_workers,
            policy=policy,
            timeout_s=timeout_s,
        )
        self._logs: dict[int, StepLog] = {}  # per sampled step; drained by step_metrics(step)
        self._lock = threading.Lock()
        self._publish_s = 0.0

    # -- weights -----------------------------------------------------------------------------------------
    def publish_weights(self, model: torch.nn.Module, *, version: int) -> None:
        from execrl.trainer.lora import adapter_state_dict, has_adapters

        start = time.perf_counter()
        # With LoRA only the adapters change: they are the version (the workers hold the same frozen base).
        source = adapter_state_dict(model) if has_adapters(model) else model.state_dict()
        state = {k: v.detach().to("cpu", copy=True) for k, v in source.items()}
        self.versions.publish(version, ray.put(state))
        self._publish_s += time.perf_counter() - start  # outside perf/step_s: reported on its own

    def behaviour_sampler(self, *, engine: Engine, version: int) -> GroupSampler:
        """The rollout workers generate with published ``version`` (``engine`` is the driver's copy)."""
        return remote_sampler(self.driver_sampler, self, version)

    def _submit_generate(
        self, index: int, step: int, call: GenerateCall, pinned: int | None, log_: StepLog
    ) -> Any:
        """Runs under the rollout group's lock (``ActorGroup.start``): the load goes out before the call."""
        actor = self.rollout.actors[index]
        choice = self.versions.choose((index, self.rollout.generation[index]), step=step, pinned=pinned)
        if choice.load is not None:
            actor.load_weights.remote(choice.version, choice.load)  # actor calls run in submission order
            log_.weight_pushes += 1
        return actor.generate.remote(call.prompts, call.params, choice.floor)

    # -- one generate-and-score call ------------------------------------------------------------------------
    def __call__(
        self, step: int, tasks: list[Task], round_: int, *, version: int | None = None
    ) -> tuple[RolloutBatch, list[Score]]:
        calls = self.driver_sampler.generate_calls(step, tasks, round_)
        log_ = self._log(step)
        if len(calls) == 1:
            rollout = self._generate(step, round_, calls[0], version, log_)
            row_tasks = [tasks[g] for g in rollout.group_index.tolist()]
            return rollout, self._score(row_tasks, list(rollout.texts), log_.counters)
        return self._stream(step, round_, tasks, calls, version, log_)

    def _generate(
        self,
        step: int,
        round_: int,
        call: GenerateCall,
        pinned: int | None,
        log_: StepLog,
        first: Attempt | None = None,
    ) -> RolloutBatch:
        what = f"generate (step {step}, round {round_}, from group {call.first_group})"
        rollout, used = self.rollout.call(
            what, self._generate_submitter(step, call, pinned, log_), counters=log_.counters, first=first
        )
        log_.versions_used.append(used)
        log_.staleness.append(step - used)
        return rollout  # type: ignore[no-any-return]

    def _generate_submitter(
        self, step: int, call: GenerateCall, pinned: int | None, log_: StepLog
    ) -> Callable[[int], Any]:
        return lambda index: self._submit_generate(index, step, call, pinned, log_)

    def _stream(
        self,
        step: int,
        round_: int,
        tasks: list[Task],
        calls: list[GenerateCall],
        pinned: int | None,
        log_: StepLog,
    ) -> tuple[RolloutBatch, list[Score]]:
        """Streaming: every group's generate call goes out at once (round robin over the rollout workers);
        as each returns (``ray.wait``), its group's scoring goes out to a sandbox worker. All submissions
        happen from this one thread (Ray orders an actor's tasks by submission; a failed attempt is
        retried by ``ActorGroup.call`` like any other)."""
        from execrl.rewards import Score

        attempts = [self.rollout.start(self._generate_submitter(step, c, pinned, log_)) for c in calls]
        index_of = {attempt.ref: k for k, attempt in enumerate(attempts)}
        waiting = list(index_of)
        rollouts: dict[int, RolloutBatch] = {}
        scoring: dict[int, tuple[list[Task], Attempt, Callable[[int], Any]]] = {}
        while waiting:
            (ready,), waiting = ray.wait(waiting, num_returns=1)
            k = index_of[ready]
            rollouts[k] = self._generate(step, round_, calls[k], pinned, log_, first=attempts[k])
            group_tasks = tasks[calls[k].first_group : calls[k].first_group + rollouts[k].num_prompts]
            row_tasks = [group_tasks[g] for g in rollouts[k].group_index.tolist()]
            texts = list(rollouts[k].texts)
            submit = self._score_submitter(row_tasks, texts)
            scoring[k] = (group_tasks, self.sandbox.start(submit), submit)
        parts = []
        for k in range(len(calls)):
            group_tasks, attempt, submit = scoring[k]
            try:
                what = f"scoring of group {calls[k].first_group} (step {step}, round {round_})"
                scores = self.sandbox.call(what, submit, counters=log_.counters, first=attempt)
            except TaskFailed as exc:
                scores = [Score.invalid(f"executor_error: {exc}") for _ in range(rollouts[k].num_rows)]
            parts.append(ScoredGroups(rollouts[k], group_tasks, scores))
        merged = concat_groups(parts)
        return merged.rollout, merged.scores

    def _score_submitter(self, tasks: Sequence[Task], completions: Sequence[str]) -> Callable[[int], Any]:
        return lambda index: self.sandbox.actors[index].score.remote(list(tasks), list(completions))

    def _score(
        self, tasks: Sequence[Task], completions: Sequence[str], counters: FaultCounters
    ) -> list[Score]:
        """Contiguous chunks, one per sandbox worker, in flight together; each retried on its own."""
        from execrl.rewards import Score

        count = len(self.sandbox.actors)
        bounds = [len(tasks) * k // count for k in range(count + 1)]
        chunks = [(bounds[k], bounds[k + 1]) for k in range(count) if bounds[k] < bounds[k + 1]]

        def submit(index: int, lo: int, hi: int) -> Any:
            return self.sandbox.actors[index].score.remote(list(tasks[lo:hi]), list(completions[lo:hi]))

        first = [self.sandbox.start(lambda i, lo=lo, hi=hi: submit(i, lo, hi)) for lo, hi in chunks]
        scores: list[Score] = []
        for attempt, (lo, hi) in zip(first, chunks, strict=True):
            try:
                what = f"scoring of rows {lo}..{hi - 1}"
                part = self.sandbox.call(
                    what, lambda i, lo=lo, hi=hi: submit(i, lo, hi), counters=counters, first=attempt
                )
            except TaskFailed as exc:
                part = [Score.invalid(f"executor_error: {exc}") for _ in range(lo, hi)]
            scores.extend(part)
        return scores

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
        self.rollout.close()
        self.sandbox.close()
        if self._owns_ray:
            ray.shutdown()
