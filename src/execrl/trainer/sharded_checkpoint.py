"""Checkpoints of the sharded trainer (``trainer.strategy=fsdp``): ``torch.distributed.checkpoint`` shards.

Layout: the ``step_NNNNNN`` directories of ``checkpoint.py`` (same names, same atomic rename), holding

* ``shards/``: ``.metadata`` plus one ``__<rank>_0.distcp`` per rank (DCP's file-system format): the
  trainable parameters of the policy (``policy.<name>``; with LoRA the adapters) and of PPO's value head
  (``value_head.<name>``), and AdamW's state, each rank writing its own shard;
* ``scheduler.pt`` (the LR schedule), ``rng_rank<R>.pt`` (each rank's RNG states), ``trainer_state.pt``
  (step, the loop's ``data_state``, metrics) and ``meta.json`` (``"format": "dcp"``, the world size);
* with LoRA also the PEFT adapter directory (``adapter_config.json`` + ``adapter_model.safetensors``),
  written by rank 0 from its gathered rollout copy, so ``execrl eval``/``serve``/``export`` read it
  as they read a one-process checkpoint. Without LoRA the full weights exist only as shards:
  ``load_full_model_state`` gathers them in one process (``execrl export``).

Resharding: DCP stores each tensor's global shape and every shard's offsets, so a checkpoint written by
N ranks loads at any M (2 -> 1, 1 -> 2 are tested); bit-exact resume holds at the same N (each rank gets
its own RNG state back; at another N the ranks that did not exist keep theirs, which only LoRA dropout
reads). A tensor whose shape differs from the model's (another model, another LoRA rank) is refused
with one line naming it.

Atomic: every rank writes into the ``.tmp-`` directory rank 0 made (on a file system all ranks share:
one machine, or NFS/Lustre for torchrun over nodes); rank 0 renames it once the shards are written. With
``async_checkpoint`` the shards are written by a background thread (DCP ``async_save`` on a process
group of its own) after a copy of the state is taken, and the rename happens when the write completes:
until then ``latest_checkpoint`` sees the previous checkpoint, which is what a crash in between resumes.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.filesystem import FileSystemReader
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import async_save
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from execrl.trainer.checkpoint import (
    CheckpointState,
    _fsync_path,
    _torch_save,
    _trainer_state,
    capture_rng_state,
    restore_rng_state,
)
from execrl.trainer.errors import CheckpointError

__all__ = [
    "check_strategy",
    "SHARDS_DIRNAME",
    "is_sharded_checkpoint",
    "load_full_model_state",
    "load_sharded",
    "save_sharded",
    "write_leader_files",
]

SHARDS_DIRNAME = "shards"
_OPTIONS = StateDictOptions(ignore_frozen_params=True)  # LoRA: the frozen base is model.path, not saved


def is_sharded_checkpoint(path: Path) -> bool:
    """Whether ``path`` is a checkpoint written by the sharded trainer."""
    return (path / SHARDS_DIRNAME / ".metadata").is_file()


def check_strategy(path: Path, *, sharded: bool, data_keys: tuple[str, ...] = ()) -> None:
    """``CheckpointError`` (one line naming the checkpoint and what to set) unless ``path`` was written by
    the trainer that resumes it: the sharded one (``sharded``; any number of ranks) or one process. For
    a sharded checkpoint, also every file rank 0 reads, and ``data_keys`` in its ``data_state``, before
    any rank loads anything."""
    if sharded and not is_sharded_checkpoint(path):
        raise CheckpointError(
            f"{path}: written in one process (no {SHARDS_DIRNAME}/.metadata); resume it without --nproc "
            "(trainer.strategy=single)"
        )
    if not sharded:
        if is_sharded_checkpoint(path):
            raise CheckpointError(
                f"{path}: written by trainer.strategy=fsdp ({SHARDS_DIRNAME}/); resume it with --nproc N "
                "(any N) or trainer.strategy=fsdp"
            )
        return
    for name in ("scheduler.pt", "trainer_state.pt"):
        if not (path / name).is_file():
            raise CheckpointError(f"{path / name}: missing; the checkpoint is damaged (move it away)")
    missing = [key for key in data_keys if key not in _trainer_state(path).data_state]
    if missing:
        raise CheckpointError(f"{path / 'trainer_state.pt'}: its data_state lacks {missing}")


@dataclass
class PendingWrite:
    """An async shard write in flight; ``finish`` runs (on rank 0: the rename) once it completes."""

    future: Future[Any] | None
    finish: Callable[[], None] | None

    def done(self) -> bool:
        return self.future is None or self.future.done()

    def wait(self) -> None:
        if self.future is not None:
            self.future.result()
            self.future = None
        if self.finish is not None:
            finish, self.finish = self.finish, None
            finish()


def save_sharded(
    tmp: Path,
    *,
    root: nn.Module,
    optimizer: torch.optim.Optimizer,
    rank: int,
    group: dist.ProcessGroup,
    use_async: bool,
) -> Future[Any] | None:
    """Write this rank's shard of the model and optimizer state, and its RNG state, into ``tmp`` (every
    rank calls it together). Returns the background write's future with ``use_async``."""
    model_state, optim_state = get_state_dict(root, optimizer, options=_OPTIONS)
    state = {"model": model_state, "optimizer": optim_state}
    _torch_save(capture_rng_state(), tmp / f"rng_rank{rank}.pt")
    checkpoint_id = tmp / SHARDS_DIRNAME
    if use_async:
        future = async_save(state, checkpoint_id=checkpoint_id, process_group=group)
        assert isinstance(future, Future)
        return future
    dcp_save(state, checkpoint_id=checkpoint_id, process_group=group)
    return None


def write_leader_files(
    tmp: Path,
    *,
    step: int,
    world_size: int,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    data_state: dict[str, Any],
    metrics: dict[str, float],
    extra_files: list[str],
) -> None:
    """Rank 0's part: LR schedule, the loop's state and ``meta.json``, then every file fsync'ed."""
    files = [SHARDS_DIRNAME, *extra_files]
    if scheduler is not None:
        _torch_save(scheduler.state_dict(), tmp / "scheduler.pt")
        files.append("scheduler.pt")
    _torch_save({"step": step, "data_state": data_state, "metrics": metrics}, tmp / "trainer_state.pt")
    files += [f"rng_rank{r}.pt" for r in range(world_size)] + ["trainer_state.pt"]
    meta = {"format_version": 1, "format": "dcp", "world_size": world_size, "step": step,
            "metrics": metrics, "files": files}  # fmt: skip
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (shards written by other ranks included)."""
    for directory, _, names in os.walk(root):
        for name in names:
            _fsync_path(Path(directory) / name)
        _fsync_path(Path(directory))


def load_sharded(
    path: Path,
    *,
    root: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    rank: int,
    group: dist.ProcessGroup,
) -> CheckpointState:
    """Restore the sharded model, optimizer, LR schedule and this rank's RNG state from ``path`` (every
    rank calls it together; the checkpoint may come from any number of ranks)."""
    if not is_sharded_checkpoint(path):
        what = "model.safetensors" if (path / "model.safetensors").is_file() else "no shards/.metadata"
        raise ValueError(
            f"checkpoint {path} was not written by trainer.strategy=fsdp ({what}); resume it with the "
            "strategy that wrote it"
        )
    model_state, optim_state = get_state_dict(root, optimizer, options=_OPTIONS)
    state: dict[str, Any] = {"model": model_state, "optimizer": optim_state}
    try:
        dcp_load(state, checkpoint_id=path / SHARDS_DIRNAME, process_group=group)
    except (CheckpointException, RuntimeError, ValueError) as exc:  # DCP wraps each rank's error
        raise ValueError(f"checkpoint {path} does not fit this model: {_first_line(exc)}") from None
    set_state_dict(
        root,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optimizer"],
        options=_OPTIONS,
    )
    if scheduler is not None:
        scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    rng = path / f"rng_rank{rank}.pt"
    if rng.is_file():  # a rank the writing run did not have keeps its own RNG state
        restore_rng_state(torch.load(rng, weights_only=True))
    trainer = torch.load(path / "trainer_state.pt", weights_only=True)
    return CheckpointState(path, int(trainer["step"]), dict(trainer["data_state"]), dict(trainer["metrics"]))


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "size" in line.lower() or "shape" in line.lower() or "missing" in line.lower():
            return line
    return lines[0] if lines else type(exc).__name__


def load_full_model_state(
    path: Path, names: dict[str, Tensor], *, prefix: str = "policy.", complete: bool = False
) -> None:
    """Fill ``names`` (a plain model's ``state_dict()``, keys without ``prefix``) with the full tensors of a
    sharded checkpoint, in this one process (no process group: ``execrl export``, ``eval``). ``complete``:
    every tensor must be in the checkpoint (full fine-tuning); otherwise the ones it lacks keep their
    values (LoRA: the frozen base). A missing tensor or another shape raises ``ValueError``."""
    reader = FileSystemReader(str(path / SHARDS_DIRNAME))
    stored = reader.read_metadata().state_dict_metadata
    keys = {name: f"model.{prefix}{name}" for name in names}
    missing = [name for name, key in keys.items() if key not in stored]
    if len(missing) == len(keys) or (complete and missing):
        raise ValueError(
            f"checkpoint {path}: its shards lack {missing[0]!r} ({len(missing)} of {len(keys)} tensors)"
        )
    wanted = {keys[name]: tensor for name, tensor in names.items() if keys[name] in stored}
    for key, tensor in wanted.items():
        size = tuple(getattr(stored[key], "size", ()))
        if size != tuple(tensor.shape):
            name = key[len("model.") :]
            raise ValueError(
                f"checkpoint {path}: {name} is {list(size)}, the model's is {list(tensor.shape)}"
            )
    with warnings.catch_warnings():  # "assuming the intent is to load in a single process": it is
        warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
        dcp_load(
            wanted, storage_reader=reader, planner=DefaultLoadPlanner(allow_partial_load=True), no_dist=True
        )
