"""FSDP2 for the update (``trainer.strategy=fsdp``): the ranks, the sharded policy, full weights out by bucket.

Map of the sharded trainer (``docs/sharded.md`` has the picture):

* ``sharded.py`` (here): join the process group (``init_ranks``), shard the policy (``shard_policy``:
  ``fully_shard`` on each decoder layer and on a root holding the policy and PPO's value head), and
  gather the full weights into rank 0's rollout copy bucket by bucket (``gather_full_weights``);
* ``sharded_step.py``: one update on every rank, on its shard of the step's sequences, with the loss
  normalised over the whole step (token counts all-reduced), so the update is one process's update;
* ``sharded_checkpoint.py``: ``torch.distributed.checkpoint`` (one shard per rank, resumable at any N);
* ``ranks.py``: rank 0 (the recipe) commands the other ranks (update, save, load, gather, stop).

Why a root module (``ShardRoot``) around the policy: the update never calls the Hugging Face model's own
``forward`` (``logprobs.policy_forward`` runs the decoder trunk, then ``lm_head`` in chunks), and FSDP2
gathers a group's parameters in the forward hook of the module ``fully_shard`` was applied to. The root's
``forward(fn, *args)`` just calls ``fn``: every pass of the update goes through it, so the parameters
outside the decoder layers (embeddings, final norm, an ``lm_head`` tied to the embeddings, the value
head) are gathered around the whole pass, and the decoder layers gather their own as usual.

Gradients: FSDP2 averages gradients over the ranks by default; here each rank's loss is already its
share of the step's loss (global denominators), so the reduction is a plain sum (divide factor 1, sum
reduction: gloo has no pre-multiplied sum). PyTorch caveat (pytorch/pytorch#132471): ``fully_shard`` on
a gloo group moves the model to CUDA when GPUs are visible; the mesh here is on the device the ranks
train on (CUDA with NCCL when GPUs exist, else CPU with gloo), never a CPU mesh with GPUs visible.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed import distributed_c10d
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)
from torch.distributed.tensor import DTensor

from execrl.trainer.checkpointing import decoder_layers
from execrl.trainer.precision import compute_dtype

__all__ = [
    "RankGroup",
    "ShardRoot",
    "ShardingSettings",
    "gather_full_weights",
    "init_ranks",
    "shard_policy",
    "state_bytes",
]

CONTROL_TIMEOUT = timedelta(days=7)  # a follower waits this long for rank 0's next command (rollout, eval)


@dataclass(frozen=True)
class ShardingSettings:
    """The FSDP knobs (built from ``[trainer]`` by name)."""

    precision: str = "fp32"
    cpu_offload: bool = False
    async_checkpoint: bool = False
    weight_sync_bucket_mb: int = 64
    collective_timeout_s: float = 600.0
    inject_hang_rank: int | None = None  # fault injection (tests): this rank stops answering in its update

    def __post_init__(self) -> None:
        compute_dtype(self.precision)  # raises on an unknown name
        if self.weight_sync_bucket_mb < 1:
            raise ValueError(f"weight_sync_bucket_mb must be >= 1, got {self.weight_sync_bucket_mb}")
        if not (self.collective_timeout_s > 0 and math.isfinite(self.collective_timeout_s)):
            raise ValueError(
                f"collective_timeout_s must be a finite number > 0, got {self.collective_timeout_s}"
            )


@dataclass(frozen=True)
class RankGroup:
    """This process's place among the trainer ranks."""

    rank: int
    world_size: int
    device: torch.device  # where the sharded model trains: cuda:LOCAL_RANK with NCCL, else cpu with gloo
    mesh: DeviceMesh  # 1-D, all ranks: FSDP's data-parallel mesh
    control: dist.ProcessGroup  # gloo, long timeout: rank 0's commands
    checkpoints: dist.ProcessGroup  # gloo, long timeout: checkpoint writes (an async write has its own)
    store: distributed_c10d.Store  # progress marks, read when a collective times out (``ranks.py``)
    timeout_s: float  # the update's collectives time out after this

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    def mark_pass(self) -> None:
        """Count a forward pass of this rank (before its collectives): a rank that hung or died has the
        lowest count when another rank's collective times out (``ranks.RankFailure`` names it)."""
        self.store.add(f"passes/{self.rank}", 1)

    def passes(self, rank: int) -> int:
        """``rank``'s pass count (0 before its first)."""
        return int(self.store.add(f"passes/{rank}", 0))


def init_ranks(*, collective_timeout_s: float) -> RankGroup:
    """Join the trainer's process group: ``env://`` when a launcher set ``RANK``/``WORLD_SIZE``/``MASTER_*``
    (``execrl train --nproc``, torchrun, the Ray executor), else a group of one in this process (a run
    with ``trainer.strategy=fsdp`` and no launcher, e.g. resuming a 2-rank run on one rank)."""
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        timeout = timedelta(seconds=collective_timeout_s)
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            if cuda:
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            dist.init_process_group(backend="cpu:gloo,cuda:nccl" if cuda else "gloo", timeout=timeout)
        else:
            local = dist.HashStore()  # type: ignore[attr-defined]
            dist.init_process_group(backend="gloo", store=local, rank=0, world_size=1, timeout=timeout)
            cuda = False
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    mesh = init_device_mesh(device.type, (world,))
    control = dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT)
    checkpoints = dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT)
    store = distributed_c10d.PrefixStore("execrl/", _default_store())
    return RankGroup(rank, world, device, mesh, control, checkpoints, store, collective_timeout_s)


def _default_store() -> distributed_c10d.Store:
    return distributed_c10d._get_default_store()


class ShardRoot(nn.Module):
    """The FSDP root: the policy and (PPO) its value head. ``root(fn, *args, **kwargs)`` runs ``fn`` under
    the root's FSDP hooks (see the module docstring); ``fn`` reaches the modules through ``root.policy``."""

    def __init__(self, policy: nn.Module, value_head: nn.Module | None = None) -> None:
        super().__init__()
        self.policy = policy
        self.value_head = value_head

    def forward(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)


def shard_policy(
    policy: nn.Module, value_head: nn.Module | None, group: RankGroup, settings: ShardingSettings
) -> ShardRoot:
    """``fully_shard`` each decoder layer of ``policy``, then a ``ShardRoot`` over it and ``value_head``.

    Parameters move to ``group.device`` and keep their dtype (the master weights); with ``bf16-mixed``
    the gathered parameters are bf16 for compute and gradients are reduced in float32. LoRA: the adapters
    sit in the decoder layers, so they are sharded with their layer's frozen base weights (only they get
    gradients). A frozen model (the KL reference) is sharded the same way; it is only run forward.
    """
    dtype = compute_dtype(settings.precision)
    mixed = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32 if dtype else None)
    offload: OffloadPolicy = CPUOffloadPolicy() if settings.cpu_offload else OffloadPolicy()
    if settings.cpu_offload and group.device.type != "cuda":
        raise ValueError(
            "trainer.cpu_offload=true needs GPUs: on CPU the parameters are in CPU memory already"
        )
    root = ShardRoot(policy, value_head)
    if not settings.cpu_offload:
        root.to(group.device)
    layers = decoder_layers(policy)
    if not layers:
        raise ValueError(f"{type(policy).__name__} has no transformers decoder layers to shard")
    for layer in layers:
        fully_shard(layer, mesh=group.mesh, mp_policy=mixed, offload_policy=offload)
    fully_shard(root, mesh=group.mesh, mp_policy=mixed, offload_policy=offload)
    for module in root.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)  # each rank's loss is its share of the step's: sum
            module.set_force_sum_reduction_for_comms(True)  # gloo has no PREMUL_SUM
            module.set_reduce_scatter_unused_params(True, recurse=False)  # a parameter without gradient: 0
    return root


def state_bytes(root: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, int]:
    """Bytes of model state this rank holds: its parameter shards, their gradients, the optimizer's state
    (a plain module counts whole; ``bench train --ranks``)."""

    def local(t: Tensor) -> Tensor:
        return t.to_local() if isinstance(t, DTensor) else t

    params = [local(p) for p in root.parameters()]
    grads = [local(p.grad) for p in root.parameters() if p.grad is not None]
    states = [] if optimizer is None else list(optimizer.state.values())
    moments = [local(v) for state in states for v in state.values() if isinstance(v, Tensor)]

    def size(tensors: list[Tensor]) -> int:
        return sum(t.numel() * t.element_size() for t in tensors)

    return {"weights": size(params), "grads": size(grads), "optimizer": size(moments)}


def gather_full_weights(
    root: nn.Module,
    group: RankGroup,
    *,
    into: Mapping[str, Tensor] | None,
    bucket_mb: int,
    trainable_only: bool = True,
) -> int:
    """Copy the full (unsharded) parameters of ``root`` into rank 0's tensors ``into`` (name -> tensor of
    the full shape, e.g. the rollout copy's parameters), one ``gather`` per bucket of ``bucket_mb`` of
    shards, not one per tensor (issue 38; bucketing is the common fix for slow weight sync, research
    notes engines_and_scale.md 0.5). Every rank calls it; only rank 0 passes ``into`` (others None).
    ``trainable_only``: only parameters with gradients (LoRA: the adapters; the frozen base never
    changes). The copies run under ``no_grad`` and bump each target's version counter, so a folded LoRA
    copy sees the change (``lora_fold``). Returns the number of buckets sent."""
    params = [(n, p) for n, p in root.named_parameters() if p.requires_grad or not trainable_only]
    if into is not None:
        missing = [n for n, _ in params if n not in into]
        if missing:
            raise KeyError(f"the rollout copy has no parameter {missing[0]!r} (of {len(missing)} missing)")
    buckets = 0
    for bucket in _buckets(params, group.world_size, bucket_mb << 20):
        _gather_bucket(bucket, group, into)
        buckets += 1
    return buckets


@dataclass(frozen=True)
class _Slot:
    name: str
    param: Tensor
    rows: int  # dim-0 rows of the full tensor
    chunk_rows: int  # ceil(rows / world): rows per rank before the last (torch.chunk's split, as FSDP's)
    row_numel: int  # elements per row


def _buckets(params: Sequence[tuple[str, Tensor]], world: int, bucket_bytes: int) -> Iterator[list[_Slot]]:
    """Slots grouped into buckets of one dtype and at most ``bucket_bytes`` per rank (a larger tensor is a
    bucket of its own)."""
    current: list[_Slot] = []
    size = 0
    for name, param in params:
        shape = tuple(param.shape)
        rows = shape[0] if shape else 1
        slot = _Slot(name, param, rows, -(-rows // world), math.prod(shape[1:]) if shape else 1)
        nbytes = slot.chunk_rows * slot.row_numel * param.element_size()
        if current and (size + nbytes > bucket_bytes or current[0].param.dtype != param.dtype):
            yield current
            current, size = [], 0
        current.append(slot)
        size += nbytes
    if current:
        yield current


def _gather_bucket(bucket: list[_Slot], group: RankGroup, into: Mapping[str, Tensor] | None) -> None:
    """One ``dist.gather`` of this rank's shards of ``bucket`` (each padded to its chunk) to rank 0."""
    dtype = bucket[0].param.dtype
    widths = [s.chunk_rows * s.row_numel for s in bucket]
    flat = torch.zeros(sum(widths), dtype=dtype, device=group.device)
    offset = 0
    with torch.no_grad():
        for slot, width in zip(bucket, widths, strict=True):
            shard = slot.param.to_local() if isinstance(slot.param, DTensor) else slot.param
            piece = shard.reshape(-1)
            flat[offset : offset + piece.numel()].copy_(piece)
            offset += width
        gathered = [torch.empty_like(flat) for _ in range(group.world_size)] if into is not None else None
        dist.gather(flat, gather_list=gathered, dst=0)
        if into is None or gathered is None:
            return
        for rank, part in enumerate(gathered):
            offset = 0
            for slot, width in zip(bucket, widths, strict=True):
                lo = min(rank * slot.chunk_rows, slot.rows)
                hi = min(lo + slot.chunk_rows, slot.rows)
                if hi > lo:
                    target = into[slot.name]
                    rows = part[offset : offset + (hi - lo) * slot.row_numel]
                    view = target.view(-1) if target.dim() == 0 else target[lo:hi]
                    view.copy_(rows.view(view.shape))
                offset += width
