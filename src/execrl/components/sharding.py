"""The sharded trainer of a run (``trainer.strategy=fsdp``), built the same way on every rank.

Rank 0 builds the run as in one process (``components/run.py``: ``build_run`` chooses the trainer, the
one place that does); its policy stays whole, as the rollout engine's copy, and ``sharded_trainer``
shards a copy of it (and of PPO's value head) over the ranks. The other ranks build the same policy and
the recipe's parts from the config and run ``follow``: they hold their shards and wait for rank 0's
commands (``execrl.trainer.ranks``); rank 0 alone drives the rollout, the run directory and the logs.
Rank 0's initial weights are broadcast to every rank, so a randomly initialised part (LoRA adapters,
the value head) is the same everywhere whatever each rank's RNG did before.
"""

from __future__ import annotations

import copy
import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from execrl.components import setup
from execrl.config import TrainConfig, build

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel

    from execrl.trainer import TrainerConfig
    from execrl.trainer.ranks import ShardedTrainer
    from execrl.trainer.sharded import RankGroup, ShardingSettings, ShardRoot

__all__ = ["follow", "is_follower", "sharded_trainer", "sharding_settings"]

log = logging.getLogger("execrl.train")
SHARDED_PARTS = frozenset({"value_head"})  # the recipe parts the sharded trainer trains with the policy


def sharding_settings(config: TrainConfig) -> ShardingSettings:
    """``[trainer]`` by name (``strategy`` says whether to shard at all)."""
    from execrl.trainer.sharded import ShardingSettings

    return build(ShardingSettings, config.trainer)


def is_follower(config: TrainConfig) -> bool:
    """Whether this process is a trainer rank other than 0 (set by ``--nproc``, torchrun or Ray)."""
    return config.trainer.strategy == "fsdp" and int(os.environ.get("RANK", "0")) > 0


def sharded_trainer(
    config: TrainConfig,
    tcfg: TrainerConfig,
    *,
    model: nn.Module,
    parts: Mapping[str, nn.Module],
    reference: nn.Module | None,
) -> ShardedTrainer:
    """Join the trainer ranks and shard the policy: on rank 0 a copy of ``model`` (which stays whole, the
    rollout copy that ``ShardedTrainer.gather`` refreshes), on the others ``model`` itself; of the
    recipe's ``parts``, PPO's ``value_head`` likewise (no other part is sharded: refused). ``reference``:
    the frozen KL reference when it is a separate model (not with LoRA), sharded too."""
    from execrl.config import ConfigError
    from execrl.trainer import build_optimizer, build_scheduler
    from execrl.trainer.lora import has_adapters
    from execrl.trainer.ranks import ShardedTrainer, replica_tensors
    from execrl.trainer.sharded import init_ranks, shard_policy

    unsharded = sorted(set(parts) - SHARDED_PARTS)
    if unsharded:
        raise ConfigError(f"trainer.strategy=fsdp does not train the recipe parts {unsharded}")
    value_head = parts.get("value_head")
    settings = sharding_settings(config)
    group = init_ranks(collective_timeout_s=settings.collective_timeout_s)
    leader = group.is_leader
    policy = copy.deepcopy(model) if leader else model
    head = copy.deepcopy(value_head) if leader and value_head is not None else value_head
    root = shard_policy(policy, head, group, settings)
    _broadcast_from_leader(root, model if leader else None, value_head if leader else None)
    optimizer = build_optimizer(root, tcfg)
    sharded_reference = None
    if reference is not None and reference is not model and not has_adapters(model):
        frozen = copy.deepcopy(reference) if leader else reference
        sharded_reference = shard_policy(frozen, None, group, settings)
    return ShardedTrainer(
        group, root, optimizer, build_scheduler(optimizer, tcfg), tcfg, settings, reference=sharded_reference,
        replica=replica_tensors(model, value_head) if leader else None,
        adapters_from=model if leader else None, update_threads=_update_threads(config, group),
    )  # fmt: skip


def _update_threads(config: TrainConfig, group: RankGroup) -> int | None:
    """Torch threads per rank in the update: the machine's cores shared by the ranks on it (CPU only)."""
    if group.device.type != "cpu":
        return None
    local = int(os.environ.get("LOCAL_WORLD_SIZE", str(group.world_size)))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(config.model.torch_threads, cores // max(local, 1)))


def _broadcast_from_leader(root: ShardRoot, model: nn.Module | None, value_head: nn.Module | None) -> None:
    """Every rank's shards from rank 0's full weights (``set_model_state_dict`` with
    ``broadcast_from_rank0``)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    full: dict[str, object] = {}
    if model is not None:
        full = {f"policy.{k}": v for k, v in model.state_dict().items()}
        if value_head is not None:
            full.update({f"value_head.{k}": v for k, v in value_head.state_dict().items()})
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(root, full, options=options)  # type: ignore[arg-type]


def follow(config: TrainConfig, parts: Mapping[str, Callable[[PreTrainedModel], nn.Module]]) -> int:
    """Trainer ranks 1..N-1 of a run: build the policy, the KL reference and the recipe's ``parts`` as
    rank 0's ``build_run`` does, join, follow its commands."""
    logging.getLogger("execrl").setLevel(logging.WARNING)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: rank 0 checkpoints, then sends stop
    setup.seed_everything(config.run.seed)
    model, _, path = setup.load_policy(config)
    tcfg = setup.trainer_config(config)
    built = {name: make(model) for name, make in parts.items()}
    reference = setup.reference_model(config, model, path)
    trainer = sharded_trainer(config, tcfg, model=model, parts=built, reference=reference)
    try:
        trainer.follow()
    except ValueError as exc:  # a checkpoint that does not fit: rank 0 hit the same and reports it
        log.error("trainer rank %d: %s", trainer.group.rank, exc)
        return 2
    return 0
