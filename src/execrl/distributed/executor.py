"""The executor: where a step's generate-and-score work runs. The recipe talks only to this interface.

    executor = build_executor(config, sampler)        # in-process (default) or Ray (executor.kind="ray")
    groups = executor.sampler.sample_step(step, ...)  # a recipe's step samples through executor.sampler
    executor.publish_weights(model, version=step + 1) # after each update
    metrics.update(executor.step_metrics(step))       # executor/* : versions used, retries, replacements

The one-step-off recipe (``recipes/pipeline.py``) samples step t+1 with the weights of step t while step t
trains, through ``executor.behaviour_sampler(engine=..., version=t)``: in-process the behaviour copy's
engine, with Ray the rollout workers loaded with published version t (``versions.py`` states the rule).

``executor.sampler`` is a ``GroupSampler``: in-process the recipe's own; with Ray one whose generate-and-
score call runs on the actors (its ``sandbox`` and ``reward`` stay the driver's, for the reward audit
and the final evaluation, which run on the driver).

In-process: the engine shares the trainer's model object, so weights are always current and a debugger
steps straight through; an engine with weights of its own (``rollout.engine=vllm``: another process) gets
them in ``publish_weights``, through its verified ``sync_weights``, and the step's ``sync/*`` metrics come
back from ``step_metrics``. Ray (``ray_executor.py``, the only module that imports ``ray``): rollout worker
actors with their own engine and model replica, sandbox worker actors that also compute the rewards
next to their sandboxes, and the trainer driver (the ``execrl train`` process, placed where you start
it). Resources are declared per role in ``executor.*`` (CPUs, GPUs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

    from execrl.components.sampling import GroupSampler
    from execrl.config import TrainConfig
    from execrl.rewards import Score
    from execrl.rollout.engine import Engine
    from execrl.rollout.types import RolloutBatch
    from execrl.tasks.schema import Task

__all__ = ["Executor", "InProcessExecutor", "build_executor"]


class Executor(Protocol):
    sampler: GroupSampler  # what the loop samples through (see the module docstring)

    def __call__(self, step: int, tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]: ...

    def behaviour_sampler(self, *, engine: Engine, version: int) -> GroupSampler:
        """A sampler generating with weights ``version``, which ``engine`` holds in this process."""
        ...

    def publish_weights(self, model: torch.nn.Module, *, version: int) -> None: ...

    def step_metrics(self, step: int) -> dict[str, float]:
        """The ``executor/*`` metrics of the calls that sampled step ``step``."""
        ...

    def close(self) -> None: ...


@dataclass
class InProcessExecutor:
    """Runs the ``GroupSampler`` in this process (the default; nothing to move, nothing to retry, unless the
    engine holds weights of its own: then ``publish_weights`` syncs them)."""

    sampler: GroupSampler
    version: int = 0
    sync_metrics: dict[str, float] = dataclasses.field(default_factory=dict)

    def __call__(self, step: int, tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]:
        return self.sampler(step, tasks, round_)

    def behaviour_sampler(self, *, engine: Engine, version: int) -> GroupSampler:
        return dataclasses.replace(self.sampler, engine=engine)  # ``engine`` holds ``version`` already

    def publish_weights(self, model: torch.nn.Module, *, version: int) -> None:
        """Nothing to send when the engine generates with ``model`` itself; an engine with a ``sync_weights``
        (vLLM's process) gets the weights, verified (``vllm_sync.SyncError`` stops the run)."""
        self.version = version
        sync = getattr(getattr(self.sampler, "engine", None), "sync_weights", None)
        if sync is not None:
            self.sync_metrics = sync(model, version).metrics()

    def step_metrics(self, step: int) -> dict[str, float]:
        """The last sync's ``sync/*`` metrics (an engine of its own), else none: nothing moved or retried."""
        metrics, self.sync_metrics = self.sync_metrics, {}
        return metrics

    def close(self) -> None:
        """Nothing to release."""


def build_executor(config: TrainConfig, sampler: GroupSampler) -> Executor:
    """``executor.kind``: ``inprocess`` (default) or ``ray`` (imports ray only then)."""
    if config.executor.kind == "inprocess":
        return InProcessExecutor(sampler)
    from execrl.distributed.ray_executor import RayExecutor

    return RayExecutor(config, sampler)
