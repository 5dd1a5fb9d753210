"""``[trainer]``: where the update runs (one process, or FSDP2 over ranks) and in which precision.

    execrl train trainer.precision=bf16-mixed           # bf16 compute, fp32 master weights (one process)
    execrl train --nproc 2                              # FSDP2 over 2 ranks on this machine (gloo / NCCL)
    torchrun --nnodes 2 --nproc-per-node 8 ... -m execrl train trainer.strategy=fsdp

``single`` is today's update in this process. ``fsdp`` shards the policy (and PPO's value head) over the
ranks with ``torch.distributed.fsdp.fully_shard`` (``execrl.trainer.sharded``): each rank holds 1/N of the
parameters, gradients and optimizer state and trains on 1/N of the step's sequences; rank 0 runs the
recipe (rollout, scoring, logging, the run directory) and the other ranks follow its commands. The
update is the same update (the loss is normalised over the whole step); docs/sharded.md has the limits.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from execrl.config.base import Section


class TrainerSection(Section):
    """The update's strategy (one process or FSDP2) and precision; the FSDP knobs matter with ``fsdp`` only."""

    strategy: Literal["single", "fsdp"] = Field(
        "single",
        description="single: the update in this process (default); fsdp: FSDP2 over the ranks that "
        "`execrl train --nproc N`, torchrun or the Ray executor start (a run without them has 1 rank)",
    )
    precision: Literal["fp32", "bf16-mixed"] = Field(
        "fp32",
        description="fp32; bf16-mixed: bf16 compute with fp32 master weights and fp32 gradient reduction "
        "(autocast in one process, FSDP2's MixedPrecisionPolicy over ranks); rollouts stay in model.dtype",
    )
    cpu_offload: bool = Field(
        False, description="fsdp on GPUs: keep the sharded parameters, gradients and Adam state in CPU memory"
    )
    async_checkpoint: bool = Field(
        False,
        description="fsdp: write checkpoint shards in a background thread (torch.distributed.checkpoint "
        "async_save); the checkpoint appears once every rank's shard is on disk",
    )
    weight_sync_bucket_mb: int = Field(
        64,
        ge=1,
        le=65536,
        description="fsdp: the full weights reach rank 0's rollout copy in buckets of this size",
    )
    collective_timeout_s: float = Field(
        600.0,
        gt=0,
        description="fsdp: a rank that waits this long for another in a collective stops the run, naming "
        "the rank that did not answer",
    )
    rank_num_cpus: float = Field(
        1.0,
        gt=0,
        description="fsdp with --executor ray: CPUs reserved per trainer rank actor (ranks 1..N-1; a "
        "placement group bundle cannot be empty, a fraction is allowed)",
    )
    rank_num_gpus: float = Field(
        0.0,
        ge=0,
        description="fsdp with --executor ray: GPUs reserved per trainer rank actor (1 on GPU nodes)",
    )
    inject_hang_rank: int | None = Field(
        None,
        ge=0,
        description="fault injection for testing: this trainer rank stops answering in its first update",
    )
