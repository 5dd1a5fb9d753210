"""Trainer ranks as Ray actors (``execrl train --executor ray --nproc N``): FSDP2 beside the rollout and
sandbox workers.

Rank 0 is the driver (the ``execrl train`` process: the recipe, logging, the run directory); ranks
1..N-1 are ``TrainerRank`` actors placed with one placement group (``PACK``: one bundle per rank of
``trainer.rank_num_cpus`` CPUs and ``trainer.rank_num_gpus`` GPUs), so they are reserved together or
not at all. The ranks form their process group through ``env://`` with the driver's address as
``MASTER_ADDR``: the same ``execrl.components.sharding.follow`` a ``--nproc`` or torchrun rank runs.

Failure: a rank actor that dies makes rank 0's next collective fail (``trainer.ranks.RankFailure`` names
it); on exit the actors are killed and the placement group removed. The rollout workers receive rank
0's gathered weights as before (``RayExecutor.publish_weights``: one object per version).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from execrl.distributed.ray_executor import ensure_ray

if TYPE_CHECKING:
    from execrl.config import TrainConfig

__all__ = ["TrainerRank", "trainer_rank_actors"]

_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


class TrainerRank:
    """One trainer rank 1..N-1 (a Ray actor): joins the process group and follows rank 0's commands."""

    def __init__(self, env: dict[str, str]) -> None:
        os.environ.update(env)

    def follow(self, config: dict[str, Any], parts: Mapping[str, Callable[..., Any]]) -> int:
        from execrl.components import sharding
        from execrl.config import validate_config

        return sharding.follow(validate_config(config), parts)


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def trainer_rank_actors(
    config: TrainConfig, nproc: int, parts: Mapping[str, Callable[..., Any]]
) -> Iterator[None]:
    """Start ranks 1..``nproc``-1 as actors in a placement group and make this process rank 0 (its
    ``RANK``/``MASTER_*`` environment); on exit wait briefly for the actors, kill them, free the group.
    ``parts``: the recipe's module builders (module-level functions, sent by reference)."""
    started = ensure_ray(config.executor.ray_address)
    trainer = config.trainer
    bundle = {
        "CPU": trainer.rank_num_cpus,
        **({"GPU": trainer.rank_num_gpus} if trainer.rank_num_gpus else {}),
    }
    group = placement_group([bundle] * max(nproc - 1, 1), strategy="PACK")
    saved = {k: os.environ.get(k) for k in _ENV}
    actors: list[Any] = []
    try:
        ray.get(group.ready(), timeout=trainer.collective_timeout_s)
        host = ray.util.get_node_ip_address()
        env = {"MASTER_ADDR": host, "MASTER_PORT": str(_free_port(host)), "WORLD_SIZE": str(nproc)}
        # LOCAL_WORLD_SIZE: the ranks may share a machine's cores (sharding._update_threads divides them)
        os.environ.update(env, RANK="0", LOCAL_RANK="0", LOCAL_WORLD_SIZE=str(nproc))
        actor_cls = ray.remote(TrainerRank)
        for rank in range(1, nproc):
            strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=rank - 1)
            rank_env = {**env, "RANK": str(rank), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": str(nproc)}
            options = actor_cls.options(
                scheduling_strategy=strategy, num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0.0)
            )
            actors.append(options.remote(rank_env))
        refs = [actor.follow.remote(config.model_dump(), dict(parts)) for actor in actors]
        yield
        ray.wait(refs, num_returns=len(refs), timeout=30.0)
    finally:
        for actor in actors:
            ray.kill(actor)
        remove_placement_group(group)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if started:
            ray.shutdown()
