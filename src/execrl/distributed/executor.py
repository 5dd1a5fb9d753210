"""The executor: where a step's rollout (generation, the environment's answers, the judge) runs. The recipe
talks only to this interface.

    executor = build_executor(config, sampler)        # in-process (default) or Ray (executor.kind="ray")
    groups = executor.sampler.sample_step(step, ...)  # a recipe's step samples its episodes through it
    executor.publish_weights(model, version=step + 1) # after each update
    metrics.update(executor.step_metrics(step))       # executor/* : versions used, retries, replacements

The one-step-off recipe (``recipes/pipeline.py``) samples step t+1 with the weights of step t while step t
trains, through ``executor.behaviour_sampler(engine=..., version=t)``: in-process the behaviour copy's
engine, with Ray the rollout workers loaded with published version t (``versions.py`` states the rule).

``executor.sampler`` is a ``StepSampler`` (``components/sampling.py``: the one rollout loop over the run's
environment and backend): in-process the recipe's own; with Ray one whose backend is the rollout actors and
whose environment answers on the sandbox actors (the driver keeps its own sandbox for the reward audit and
the final evaluation).

In-process: the engine shares the trainer's model object, so weights are always current and a debugger
steps straight through; an engine with weights of its own (``rollout.engine=vllm``: another process) gets
them in ``publish_weights``, through its verified ``sync_weights`` (except in the one-step-off loop, whose
rollout thread holds the engine while the update publishes: ``OneStepOff`` syncs the behaviour copy into it
before each rollout), and the step's ``sync/*`` metrics come back from ``step_metrics``. Ray
(``ray_executor.py`` and its ``ray_*`` modules, the only ones that import ``ray``): rollout worker actors
with their own engine and model replica (a vLLM engine each, synced when the replica loads a version),
sandbox worker actors holding the run's environment (tool sessions, feedback, the judge) next to their
sandboxes, and the trainer driver (the ``execrl train`` process, placed where you start it) running the
rollout loop between them. Resources are declared per role in ``executor.*`` (CPUs, GPUs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

    from execrl.components.sampling import StepSampler
    from execrl.config import TrainConfig
    from execrl.rollout.engine import Engine

__all__ = ["Executor", "InProcessExecutor", "build_executor"]


class Executor(Protocol):
    sampler: StepSampler  # what the loop samples through (see the module docstring)

    def behaviour_sampler(self, *, engine: Engine, version: int) -> StepSampler:
        """A sampler generating with weights ``version``, which ``engine`` holds in this process."""
        ...

    def publish_weights(self, model: torch.nn.Module, *, version: int) -> None: ...

    def step_metrics(self, step: int) -> dict[str, float]:
        """The ``executor/*`` metrics of the calls that sampled step ``step``."""
        ...

    def close(self) -> None: ...


@dataclass
class InProcessExecutor:
    """Runs the ``StepSampler`` in this process (the default; nothing to move, nothing to retry, unless the
    engine holds weights of its own: then ``publish_weights`` syncs them, when ``syncs_engine``)."""

    sampler: StepSampler
    version: int = 0
    syncs_engine: bool = True  # False in the one-step-off loop (module docstring)
    sync_metrics: dict[str, float] = dataclasses.field(default_factory=dict)

    def behaviour_sampler(self, *, engine: Engine, version: int) -> StepSampler:
        from execrl.episodes import LocalBackend

        backend = LocalBackend(engine, self.sampler.backend.tokenizer)  # type: ignore[attr-defined]
        return dataclasses.replace(self.sampler, backend=backend)  # ``engine`` holds ``version`` already

    def publish_weights(self, model: torch.nn.Module, *, version: int) -> None:
        """Nothing to send when the engine generates with ``model`` itself; an engine with a ``sync_weights``
        (vLLM's process) gets the weights, verified (``vllm_sync.SyncError`` stops the run)."""
        self.version = version
        engine = getattr(getattr(self.sampler, "backend", None), "engine", None)  # a LocalBackend's
        sync = getattr(engine, "sync_weights", None)
        if sync is not None and self.syncs_engine:
            self.sync_metrics = sync(model, version).metrics()

    def step_metrics(self, step: int) -> dict[str, float]:
        """The last sync's ``sync/*`` metrics (an engine of its own), else none: nothing moved or retried."""
        metrics, self.sync_metrics = self.sync_metrics, {}
        return metrics

    def close(self) -> None:
        """Nothing to release."""


def build_executor(config: TrainConfig, sampler: StepSampler) -> Executor:
    """``executor.kind``: ``inprocess`` (default) or ``ray`` (imports ray only then)."""
    if config.executor.kind == "inprocess":
        return InProcessExecutor(sampler, syncs_engine=not config.algorithm.async_steps)
    from execrl.distributed.ray_executor import RayExecutor

    return RayExecutor(config, sampler)
