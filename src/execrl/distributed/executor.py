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
steps straight through. Ray (``ray_executor.py`` and its ``ray_*`` modules, the only ones that import
``ray``): rollout worker actors with their own engine and model replica, sandbox worker actors holding the
run's environment (tool sessions, feedback, the judge) next to their sandboxes, and the trainer driver
(the ``execrl train`` process, placed where you start it) running the rollout loop between them.
Resources are declared per role in ``executor.*`` (CPUs, GPUs).
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
    """Runs the ``StepSampler`` in this process (the default; nothing to move, nothing to retry)."""

    sampler: StepSampler
    version: int = 0

    def behaviour_sampler(self, *, engine: Engine, version: int) -> StepSampler:
        from execrl.episodes import LocalBackend

        backend = LocalBackend(engine, self.sampler.backend.tokenizer)  # type: ignore[attr-defined]
        return dataclasses.replace(self.sampler, backend=backend)  # ``engine`` holds ``version`` already

    def publish_weights(self, model: torch.nn.Module, *, version: int) -> None:
        self.version = version  # the engine generates with ``model`` itself: nothing to send

    def step_metrics(self, step: int) -> dict[str, float]:
        return {}  # nothing moved, nothing retried: the in-process run's metrics stay as they were

    def close(self) -> None:
        """Nothing to release."""


def build_executor(config: TrainConfig, sampler: StepSampler) -> Executor:
    """``executor.kind``: ``inprocess`` (default) or ``ray`` (imports ray only then)."""
    if config.executor.kind == "inprocess":
        return InProcessExecutor(sampler)
    from execrl.distributed.ray_executor import RayExecutor

    return RayExecutor(config, sampler)
