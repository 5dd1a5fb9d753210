"""The worker roles, as plain classes; ``ray_executor.py`` makes Ray actors of them (this file has no ray).

Kept free of ray so each role can be unit-tested in this process, and so a worker's behaviour is the
same code the in-process executor runs (``engine.generate``, ``score_batch``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from execrl.config import TrainConfig
    from execrl.rewards import Score
    from execrl.rollout.types import RolloutBatch, SamplingParams
    from execrl.tasks.schema import Task


class StaleWeights(RuntimeError):
    """A rollout worker was asked to generate with weights older than the staleness bound allows."""


class RolloutWorker:
    """An engine with its own model replica; weights arrive by version from the trainer driver."""

    def __init__(self, config: TrainConfig) -> None:
        from execrl.components import setup

        # Architecture, tokenizer (and with LoRA the frozen base plus empty adapters); weights come by version.
        model, tokenizer, _ = setup.load_policy(config)
        model.eval()
        self.model = model
        # With lora.fold_for_sampling: over a folded copy, refolded when load_weights writes new adapters.
        self.engine = setup.rollout_engine(config, model, tokenizer)
        self.version = -1  # no weights received yet: generate refuses until the first load
        self.last_sync: dict[str, float] = {}  # the engine's last verified sync (rollout.engine=vllm)

    def load_weights(self, version: int, state: dict[str, Any]) -> int:
        """Copy ``state`` (a CPU state dict from the object store; with LoRA the adapters' only) into the
        replica, strictly."""
        import torch

        from execrl.trainer.lora import has_adapters, load_adapter_state_dict

        with torch.no_grad():
            if has_adapters(self.model):
                load_adapter_state_dict(self.model, state)
            else:
                self.model.load_state_dict(state, strict=True)
        sync = getattr(self.engine, "sync_weights", None)
        if sync is not None:  # rollout.engine=vllm: the replica's weights go on into this worker's engine
            self.last_sync = sync(self.model, version).metrics()
        self.version = version
        return version

    def generate(self, prompts: Any, params: SamplingParams, min_version: int) -> tuple[RolloutBatch, int]:
        """One generate call; returns the rollout and the weight version it used."""
        if self.version < min_version:
            raise StaleWeights(f"weights version {self.version} < {min_version} (the staleness bound)")
        return self.engine.generate(prompts, params), self.version

    def sync_metrics(self) -> dict[str, float]:
        """The ``sync/*`` metrics of the last verified sync into this worker's engine (none without one)."""
        return dict(self.last_sync)

    def close(self) -> None:
        """Stop an engine that runs apart from this worker (``rollout.engine=vllm``)."""
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()

    def pid(self) -> int:
        return os.getpid()


class SandboxWorker:
    """A sandbox (its own pre-forked workers) and the reward code next to it: completions in, scores out."""

    def __init__(self, config: TrainConfig) -> None:
        from execrl.components import setup

        setup.register_extra_verifiers(config)
        self.sandbox = setup.build_sandbox(config)
        self.reward = setup.reward_config(config)

    def score(self, tasks: Sequence[Task], completions: Sequence[str]) -> list[Score]:
        from execrl.rewards import score_batch

        return score_batch(tasks, completions, sandbox=self.sandbox, config=self.reward)

    def pid(self) -> int:
        return os.getpid()
