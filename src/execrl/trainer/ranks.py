"""Rank 0 commands the other trainer ranks: update, save, load, gather the weights, stop.

    trainer = ShardedTrainer(group, root, optimizer, scheduler, config, settings, replica=model)
    if group.is_leader:                     # rank 0 runs the recipe as in one process ...
        metrics = trainer.update(batch)     # ... and each of these calls runs on every rank
        trainer.gather()                    # the full weights into rank 0's rollout copy, by bucket
        trainer.save(run_dir, step=..., data_state=..., metrics=...)
        trainer.close()                     # the other ranks leave ``follow``
    else:
        trainer.follow()                    # ranks 1..N-1: wait for rank 0's commands and run them

So a recipe keeps ONE update call in its step: rank 0 sends each command (a small frozen dataclass,
``broadcast_object_list`` over a gloo group of its own whose timeout is long: the other ranks wait there
through rank 0's rollout, scoring and evaluation), and the update's own collectives run with
``trainer.collective_timeout_s``. Each rank marks the commands it finished in the process group's
store; when a collective fails on rank 0 (a rank died or hung), the error names the ranks whose mark is
behind (``RankFailure``) and no further command is sent, so the launcher stops every rank.

Threads: while the update runs, rank 0 uses ``update_threads`` torch threads, as the other ranks do, so
N ranks on one machine share its cores instead of oversubscribing them; the rollout keeps rank 0's own.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from execrl.trainer.checkpoint import (
    CheckpointState,
    _check_serialisable,
    _fsync_path,
    _remove_partials,
    checkpoint_path,
    list_checkpoints,
)
from execrl.trainer.config import TrainerConfig
from execrl.trainer.lora import has_adapters, save_adapter_dir
from execrl.trainer.sharded import RankGroup, ShardingSettings, ShardRoot, gather_full_weights
from execrl.trainer.sharded_checkpoint import (
    PendingWrite,
    fsync_tree,
    load_sharded,
    save_sharded,
    write_leader_files,
)
from execrl.trainer.sharded_step import RankBatch, shard_batch, sharded_policy_update
from execrl.trainer.step import TrainBatch

__all__ = ["RankFailure", "ShardedTrainer"]

log = logging.getLogger("execrl.trainer")


class RankFailure(RuntimeError):
    """A trainer rank died or hung; the message names it."""


@dataclass(frozen=True)
class _Command:
    seq: int
    kind: str  # update | save | load | gather | stop
    path: str = ""  # save: the .tmp- directory; load: the checkpoint


class ShardedTrainer:
    """The sharded policy, its optimizer and LR schedule on one rank, and the command channel."""

    def __init__(
        self,
        group: RankGroup,
        root: ShardRoot,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        config: TrainerConfig,
        settings: ShardingSettings,
        *,
        reference: ShardRoot | None = None,
        replica: Mapping[str, Tensor] | None = None,
        adapters_from: nn.Module | None = None,
        update_threads: int | None = None,
    ) -> None:
        self.group, self.root, self.optimizer, self.scheduler = group, root, optimizer, scheduler
        self.config, self.settings, self.reference = config, settings, reference
        self.replica = replica  # rank 0: root parameter name -> the rollout copy's tensor
        self.adapters_from = adapters_from  # rank 0 with LoRA: the rollout copy (PEFT dir in checkpoints)
        self.update_threads = update_threads
        self._seq = 0
        self._failed: str | None = None
        self._pending: PendingWrite | None = None

    # ---- rank 0 -------------------------------------------------------------------------------------

    def update(self, batch: TrainBatch) -> dict[str, float]:
        """``policy_update`` over every rank on ``batch`` (rank 0 splits it, each rank gets its rows)."""
        shards = shard_batch(batch, self.config, self.group.world_size)
        with self._command("update"):
            received: list[Any] = [None]
            dist.scatter_object_list(received, list(shards), src=0, group=self.group.control)
            metrics = self._update(received[0])
        self._finish_async(wait=False)
        return metrics

    def gather(self) -> None:
        """The full weights into rank 0's rollout copy (``replica``), by bucket."""
        with self._command("gather"):
            self._gather()

    def save(
        self,
        run_dir: Path,
        *,
        step: int,
        data_state: dict[str, Any],
        metrics: dict[str, float],
        keep_last: int | None,
    ) -> Path:
        """Write ``run_dir/checkpoints/step_NNNNNN`` from every rank (``sharded_checkpoint``); returns its
        path (with ``async_checkpoint`` it appears once the shards are written)."""
        _check_serialisable(data_state, "data_state")
        self._finish_async(wait=True)
        final = checkpoint_path(run_dir, step)
        final.parent.mkdir(parents=True, exist_ok=True)
        _remove_partials(final.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}.tmp-", dir=final.parent))
        try:
            with self._command("save", str(tmp)):
                future = self._save(tmp)
            extra = self._adapter_files(tmp)
            write_leader_files(tmp, step=step, world_size=self.group.world_size, scheduler=self.scheduler,
                               data_state=data_state, metrics=metrics, extra_files=extra)  # fmt: skip
        except BaseException:  # a rank died mid-save: no half-written directory is left behind
            shutil.rmtree(tmp, ignore_errors=True)
            raise

        def finish() -> None:
            _install(tmp, final, run_dir, keep_last)

        self._pending = PendingWrite(future, finish)
        self._finish_async(wait=not self.settings.async_checkpoint)
        return final

    def load(self, path: Path) -> CheckpointState:
        """Restore every rank from a sharded checkpoint (written at any number of ranks)."""
        with self._command("load", str(path)):
            return self._load(path)

    def close(self) -> None:
        """Finish a pending checkpoint write and let the other ranks leave ``follow``. After a rank failure
        nothing is sent (the launcher stops the ranks)."""
        if self._failed is not None or not self.group.is_leader:
            return
        try:
            self._finish_async(wait=True)
        finally:
            with self._command("stop"):
                pass

    @contextlib.contextmanager
    def _command(self, kind: str, path: str = "") -> Iterator[None]:
        if self._failed is not None:
            raise RankFailure(self._failed)
        self._seq += 1
        command = _Command(self._seq, kind, path)
        try:
            dist.broadcast_object_list([command], src=0, group=self.group.control)
            yield
        except (RuntimeError, dist.DistBackendError) as exc:
            if isinstance(exc, RankFailure):
                raise
            self._failed = self._blame(command, exc)
            raise RankFailure(self._failed) from exc

    def _blame(self, command: _Command, exc: BaseException) -> str:
        """The message of a failed command: the ranks with the fewest forward passes (the rest waited
        for them in a collective), or every other rank when the counts agree (the launcher then names a
        rank that died)."""
        counts = {r: self.group.passes(r) for r in range(self.group.world_size)}
        fewest = min(counts.values())
        behind = [r for r, n in counts.items() if n == fewest] if fewest < max(counts.values()) else []
        if behind:
            who = f"trainer rank {', '.join(str(r) for r in behind)}"
        else:
            who = f"a trainer rank among 1..{self.group.world_size - 1}"
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        seen = text.split(". ")[0].split("] ")[-1]  # gloo's "[file:line] What happened. Advice..."
        return (
            f"{who} did not answer in command {command.seq} ({command.kind}): it died or hung "
            f"(trainer.collective_timeout_s={self.group.timeout_s:g}); rank 0 saw: {seen}"
        )

    def _finish_async(self, *, wait: bool) -> None:
        pending = self._pending
        if pending is not None and (wait or pending.done()):
            self._pending = None
            pending.wait()

    def _adapter_files(self, tmp: Path) -> list[str]:
        if self.adapters_from is None or not has_adapters(self.adapters_from):
            return []
        base = getattr(self.adapters_from, "name_or_path", None) or None
        return save_adapter_dir(self.adapters_from, tmp, base_model=base)

    # ---- ranks 1..N-1 -------------------------------------------------------------------------------

    def follow(self) -> None:
        """Run rank 0's commands until it sends ``stop`` (ranks 1..N-1)."""
        if self.update_threads is not None:
            torch.set_num_threads(self.update_threads)
        while True:
            received: list[Any] = [None]
            dist.broadcast_object_list(received, src=0, group=self.group.control)
            command = received[0]
            assert isinstance(command, _Command)
            if command.kind == "stop":
                self._finish_async(wait=True)
                return
            self._run(command)

    def _run(self, command: _Command) -> None:
        if command.kind == "update":
            received: list[Any] = [None]
            dist.scatter_object_list(received, None, src=0, group=self.group.control)
            self._update(received[0])
            self._finish_async(wait=False)
        elif command.kind == "gather":
            self._gather()
        elif command.kind == "save":
            self._finish_async(wait=True)
            future = self._save(Path(command.path))
            self._pending = PendingWrite(future, None)
            self._finish_async(wait=not self.settings.async_checkpoint)
        elif command.kind == "load":
            self._load(Path(command.path))
        else:
            raise RuntimeError(f"unknown trainer command {command.kind!r}")

    # ---- every rank ---------------------------------------------------------------------------------

    def _update(self, shard: RankBatch) -> dict[str, float]:
        if self.settings.inject_hang_rank == self.group.rank:
            log.warning("trainer rank %d: trainer.inject_hang_rank, not answering", self.group.rank)
            time.sleep(1e9)
        self.group.mark_pass()  # entered its update (a rank stuck before it has the lower count)
        with _threads(self.update_threads):
            return sharded_policy_update(
                self.root, self.optimizer, self.scheduler, shard, self.config, self.group,
                reference=self.reference,
            )  # fmt: skip

    def _gather(self) -> None:
        gather_full_weights(
            self.root, self.group, into=self.replica if self.group.is_leader else None,
            bucket_mb=self.settings.weight_sync_bucket_mb,
        )  # fmt: skip

    def _save(self, tmp: Path) -> Any:
        return save_sharded(
            tmp, root=self.root, optimizer=self.optimizer, rank=self.group.rank,
            group=self.group.checkpoints, use_async=self.settings.async_checkpoint,
        )  # fmt: skip

    def _load(self, path: Path) -> CheckpointState:
        return load_sharded(
            path, root=self.root, optimizer=self.optimizer, scheduler=self.scheduler,
            rank=self.group.rank, group=self.group.checkpoints,
        )  # fmt: skip


def _install(tmp: Path, final: Path, run_dir: Path, keep_last: int | None) -> None:
    """Rank 0, once every shard is on disk: fsync, rename into place, prune old checkpoints."""
    fsync_tree(tmp)
    old: Path | None = None
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f"{final.name}.old-", dir=final.parent))
        final.rename(old / final.name)
    tmp.rename(final)
    _fsync_path(final.parent)
    if old is not None:
        shutil.rmtree(old)
    if keep_last is not None:
        for stale in list_checkpoints(run_dir)[:-keep_last]:
            shutil.rmtree(stale)


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
    if count is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def replica_tensors(policy: nn.Module, value_head: nn.Module | None) -> dict[str, Tensor]:
    """The rollout copy's parameters under the sharded root's names (``policy.``, ``value_head.``)."""
    out: dict[str, Tensor] = {f"policy.{name}": p for name, p in policy.named_parameters()}
    if value_head is not None:
        out.update({f"value_head.{name}": p for name, p in value_head.named_parameters()})
    return out
