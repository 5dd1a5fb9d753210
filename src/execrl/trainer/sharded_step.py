"""One update over the FSDP2 ranks, equal to one process's ``policy_update`` on the whole batch.

    shards = shard_batch(batch, config, world_size)        # rank 0: each rank's rows (ranks.py sends them)
    metrics = sharded_policy_update(root, optimizer, scheduler, shards[rank], config, group)   # every rank

Split: each optimizer step's mini-batch (the same contiguous rows one process uses) is divided between
the ranks group by group (rows sharing a prompt stay on one rank, so the shared-prompt forward still
computes each prompt once), balancing tokens greedily. Each rank keeps its rows of every mini-batch, in
order (``RankBatch.minibatch_sizes``).

Exactness: the loss denominators of each optimizer step (``LossNormaliser``: response tokens and
sequences summed, the longest response maxed) are all-reduced before the first micro-batch, so each
rank's loss is its rows' share of the step's loss and the summed gradient (FSDP's reduce-scatter, a sum
here) is the step's gradient. The gradient norm is the norm over every rank's shard, so clipping and the
non-finite guard decide the same on every rank. The metrics are the same sums and maxima all-reduced.
What differs from one process is float summation order (about 1e-7 relative in float32); the parity
tests hold it to 1e-6 after three steps.

Lockstep: FSDP gathers parameters in every forward and reduce-scatters gradients in every backward, so
all ranks must run the same number of passes. A rank with fewer micro-batches (or rows that have no
response token) runs filler passes: one real token of one of its rows, the loss multiplied by 0, so its
gradient is exactly 0 and its metrics are not counted. Limits: LoRA dropout draws different masks than
one process would (each rank has its own RNG); a separate ``Critic`` is not sharded (the recipes use the
``ValueHead``); the filler passes cost a little compute when the ranks' work is uneven.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.tensor import DTensor

from execrl.trainer.batching import masked_batch, minibatch_rows, split_groups
from execrl.trainer.checkpointing import activation_checkpointing
from execrl.trainer.config import TrainerConfig, needs_reference
from execrl.trainer.kl import kl_per_token
from execrl.trainer.logprobs import compute_logprobs, scored_positions, shared_layout
from execrl.trainer.lora import adapter_dropout, adapters_disabled, has_adapters
from execrl.trainer.losses import POLICY_LOSSES, LossNormaliser, loss_normaliser
from execrl.trainer.prefix import find_shared_prefix
from execrl.trainer.sharded import RankGroup, ShardRoot
from execrl.trainer.step import (
    _GAP,
    PreparedBatch,
    TrainBatch,
    _microbatch_loss,
    _microbatches,
    _StepOutcome,
    _summarise,
    padding_counts,
)

__all__ = ["RankBatch", "shard_batch", "sharded_policy_update"]


@dataclass(frozen=True)
class RankBatch:
    """One rank's rows of a rollout batch: its rows of mini-batch 0, then of mini-batch 1, ..."""

    batch: TrainBatch
    minibatch_sizes: tuple[int, ...]  # this rank's rows in each of the step's mini-batches (0 allowed)

    def __post_init__(self) -> None:
        if sum(self.minibatch_sizes) != self.batch.num_sequences or self.batch.num_sequences < 1:
            raise ValueError(
                f"RankBatch: {self.batch.num_sequences} rows (at least 1) but mini-batches of "
                f"{self.minibatch_sizes}"
            )

    def minibatches(self) -> list[Tensor]:
        """Row indices of each mini-batch (possibly empty), in order."""
        bounds = torch.tensor([0, *self.minibatch_sizes]).cumsum(0).tolist()
        return [torch.arange(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def shard_batch(batch: TrainBatch, config: TrainerConfig, world_size: int) -> list[RankBatch]:
    """Each rank's rows of ``batch`` (see the module docstring). A rank left without rows (fewer groups
    than ranks) gets one row with no response token, for its filler passes."""
    per_rank: list[list[Tensor]] = [[] for _ in range(world_size)]
    for rows in minibatch_rows(batch.num_sequences, config.optimizer_steps_per_epoch):
        part = batch.take(rows)
        shared = find_shared_prefix(
            part.input_ids, part.attention_mask, scored_positions(part.attention_mask, part.response_mask)
        )
        groups = shared.inverse if shared is not None else torch.arange(part.num_sequences)
        cost = part.attention_mask.sum(dim=-1)  # [n] tokens per row
        for rank, local in enumerate(split_groups(groups, cost, world_size)):
            per_rank[rank].append(rows[local])
    return [_rank_batch(batch, parts) for parts in per_rank]


def _rank_batch(batch: TrainBatch, parts: list[Tensor]) -> RankBatch:
    sizes = tuple(int(p.numel()) for p in parts)
    if sum(sizes) == 0:  # no rows for this rank: a row without response tokens (filler passes only)
        filler = batch.take(torch.tensor([0]))
        filler = dataclasses.replace(
            filler,
            response_mask=torch.zeros_like(filler.response_mask),
            valid=torch.zeros(1, dtype=torch.bool),
        )
        return RankBatch(filler, (1, *sizes[1:]))
    return RankBatch(batch.take(torch.cat(parts)), sizes)


def sharded_policy_update(
    root: ShardRoot,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    shard: RankBatch,
    config: TrainerConfig,
    group: RankGroup,
    *,
    reference: ShardRoot | None = None,
) -> dict[str, float]:
    """``policy_update`` on this rank's shard; every rank calls it together and gets the same metrics.

    ``root`` holds the policy and (PPO) the value head; ``reference`` is the sharded KL reference when
    the KL is in the loss and the policy has no LoRA adapters (with adapters the reference is the policy
    with them switched off, as in one process).
    """
    started = time.perf_counter()
    POLICY_LOSSES.get(config.policy_loss)  # fail before any work on an unknown name
    batch = _prepare(root, shard.batch, config, group, reference)
    learning_rate = float(optimizer.param_groups[0]["lr"])
    filler = batch.take(torch.tensor([0]))
    outcomes = [
        _optimizer_step(root, optimizer, batch.take(rows), filler, config, group)
        for _ in range(config.ppo_epochs)
        for rows in shard.minibatches()
    ]
    optimizer.zero_grad(set_to_none=True)
    if scheduler is not None:
        scheduler.step()
    metrics = _summarise(outcomes)
    minibatches = [rows for rows in shard.minibatches() if rows.numel()]
    padded, computed = padding_counts(root.policy, batch, config, minibatches)
    local = [padded, computed, float(batch.attention_mask.sum().item())]
    (padded_all, computed_all, tokens), _ = _all_reduce(group, local, [])
    metrics.update(_batch_metrics(batch, config, group))
    metrics["train/lr"] = learning_rate
    metrics["train/padding_share"] = padded_all / computed_all if computed_all else 0.0
    metrics["perf/tokens_per_s"] = tokens * config.ppo_epochs / max(time.perf_counter() - started, 1e-9)
    return metrics


def _all_reduce(group: RankGroup, sums: list[float], maxima: list[float]) -> tuple[list[float], list[float]]:
    """Sums and maxima over the ranks (float64, one collective each)."""
    out: list[list[float]] = []
    for values, op in ((sums, dist.ReduceOp.SUM), (maxima, dist.ReduceOp.MAX)):
        if not values:
            out.append([])
            continue
        tensor = torch.tensor(values, dtype=torch.float64, device=group.device)
        dist.all_reduce(tensor, op=op)
        out.append(tensor.tolist())
    return out[0], out[1]


def _prepare(
    root: ShardRoot, batch: TrainBatch, config: TrainerConfig, group: RankGroup, reference: ShardRoot | None
) -> PreparedBatch:
    """``prepare_batch`` on this rank's rows, its forward passes in lockstep with the other ranks."""
    policy = root.policy
    batch = masked_batch(batch)
    if batch.old_logprobs is None:
        batch = dataclasses.replace(batch, old_logprobs=_logprobs(root, policy, batch, config, group))
    if needs_reference(config) and not config.kl_in_reward and batch.ref_logprobs is None:
        if reference is not None:
            ref = _logprobs(reference, reference.policy, batch, config, group)
        elif has_adapters(policy):
            with adapters_disabled(policy):  # LoRA: the policy with its adapters off is the reference
                ref = _logprobs(root, policy, batch, config, group)
        else:
            raise ValueError("the KL in the loss needs reference log-probs: pass the sharded reference")
        batch = dataclasses.replace(batch, ref_logprobs=ref)
    if root.value_head is not None and (batch.old_values is None or batch.returns is None):
        raise ValueError("a value head is sharded but TrainBatch.old_values / returns are missing")
    return PreparedBatch(**{f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)})


def _logprobs(
    root: ShardRoot, policy: torch.nn.Module, batch: TrainBatch, config: TrainerConfig, group: RankGroup
) -> Tensor:
    """No-grad log-probs of ``batch`` [N, S], micro-batched like the update, passes in lockstep."""
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
    parts = _microbatches(policy, batch, config)
    filler = _filler(batch.take(torch.tensor([0])))
    with torch.no_grad():
        for index in range(_lockstep_count(len(parts), group)):
            rows, columns = parts[index] if index < len(parts) else (None, slice(None))
            part = (
                filler
                if rows is None or not _scores(batch.take(rows, columns))
                else batch.take(rows, columns)
            )
            part = _uniform(policy, part, config)
            group.mark_pass()
            logp, _ = root(
                compute_logprobs, policy, _to(part.input_ids, group), _to(part.attention_mask, group),
                token_mask=_to(part.response_mask, group), temperature=config.logprob_temperature,
                chunk_tokens=config.logprob_chunk_tokens, share_prompt=config.share_prompt_forward,
            )  # fmt: skip
            if rows is not None:
                out = out.to(logp.dtype)
                out[rows, columns] = logp[: rows.numel()].to("cpu", out.dtype)  # a twin row is dropped
    return out


def _to(tensor: Tensor, group: RankGroup) -> Tensor:
    return tensor if tensor.device == group.device else tensor.to(group.device)


def _lockstep_count(local: int, group: RankGroup) -> int:
    """The most passes any rank needs (every rank runs this many)."""
    _, (most,) = _all_reduce(group, [], [float(local)])
    return int(most)


def _filler(row: TrainBatch) -> TrainBatch:
    """Two columns of ``row`` around its last real token, that token scored with zero advantage: a pass
    that reaches every parameter the real passes reach (its loss is then multiplied by 0)."""
    present = row.attention_mask[0].nonzero()
    last = max(int(present[-1]) if present.numel() else 1, 1)
    part = row.take(torch.tensor([0]), slice(last - 1, last + 1))
    ones = torch.ones_like(part.attention_mask)
    scored = torch.zeros_like(part.response_mask, dtype=torch.bool)
    scored[0, -1] = True
    return dataclasses.replace(
        part, input_ids=part.input_ids, attention_mask=ones, response_mask=scored,
        advantages=torch.zeros_like(part.advantages), valid=None,
    )  # fmt: skip


def _scores(batch: TrainBatch) -> bool:
    """Whether any position of ``batch`` is scored (a response token after a real token)."""
    return bool(scored_positions(batch.attention_mask, batch.response_mask).any())


def _uniform(policy: torch.nn.Module, part: TrainBatch, config: TrainerConfig) -> TrainBatch:
    """``part`` made to run the same kind of pass on every rank. FSDP's collectives per pass depend on its
    kind: the shared-prompt pass runs each decoder layer twice (context, then the rest), the plain pass
    once. With the shared pass on (and a model that can share), a micro-batch whose rows share no context
    gets a twin of its first row without response tokens, whose loss and gradient are exactly 0, so
    every pass is a shared one."""
    if not config.share_prompt_forward:
        return part
    share = config.share_prompt_forward
    if (
        shared_layout(policy, part.input_ids, part.attention_mask, part.response_mask, share=share)
        is not None
    ):
        return part
    twin = part.take(torch.tensor([0]))
    twin = dataclasses.replace(
        twin,
        response_mask=torch.zeros_like(twin.response_mask),
        advantages=torch.zeros_like(twin.advantages),
        valid=None if twin.valid is None else torch.zeros_like(twin.valid),
    )
    joined = _concat(part, twin)
    found = shared_layout(policy, joined.input_ids, joined.attention_mask, joined.response_mask, share=share)
    return part if found is None else joined  # None: this model never shares, on any rank


def _concat(a: TrainBatch, b: TrainBatch) -> TrainBatch:
    updates = {
        f.name: torch.cat([getattr(a, f.name), getattr(b, f.name)])
        for f in dataclasses.fields(a)
        if getattr(a, f.name) is not None
    }
    return dataclasses.replace(a, **updates)


def _optimizer_step(
    root: ShardRoot,
    optimizer: torch.optim.Optimizer,
    minibatch: TrainBatch,
    filler_row: TrainBatch,
    config: TrainerConfig,
    group: RankGroup,
) -> _StepOutcome:
    """One optimizer step on this rank's rows of a mini-batch, with the step's global normalisers."""
    normaliser = _global_normaliser(minibatch, config, group)
    if normaliser.total_tokens == 0:
        return _StepOutcome(status="empty", metrics={}, grad_norm=math.nan)
    optimizer.zero_grad(set_to_none=True)
    with adapter_dropout(root.policy):  # LoRA's dropout, if any, in the gradient passes only
        metrics = _accumulate(root, minibatch, _filler(filler_row), normaliser, config, group)
    params = [p for g in optimizer.param_groups for p in g["params"]]
    grad_norm = _clip_grad_norm(params, config.max_grad_norm, group)
    if not math.isfinite(grad_norm):
        optimizer.zero_grad(set_to_none=True)  # never write NaN/inf into the weights or Adam moments
        return _StepOutcome(status="skipped", metrics=metrics, grad_norm=grad_norm)
    optimizer.step()
    return _StepOutcome(status="ok", metrics=metrics, grad_norm=grad_norm)


def _global_normaliser(minibatch: TrainBatch, config: TrainerConfig, group: RankGroup) -> LossNormaliser:
    """The step's ``LossNormaliser`` from every rank's rows: tokens and sequences summed, longest maxed."""
    local = loss_normaliser(minibatch.response_mask, sum_norm_length=config.loss_sum_norm_length)
    lengths = minibatch.response_mask.to(torch.float64).sum(dim=-1)
    longest = float(lengths.max()) if lengths.numel() else 0.0
    (tokens, sequences), (most,) = _all_reduce(group, [local.total_tokens, local.num_sequences], [longest])
    length = config.loss_sum_norm_length if config.loss_sum_norm_length is not None else int(most)
    return LossNormaliser(total_tokens=tokens, num_sequences=int(sequences), sum_norm_length=length)


def _accumulate(
    root: ShardRoot,
    minibatch: TrainBatch,
    filler: TrainBatch,
    normaliser: LossNormaliser,
    config: TrainerConfig,
    group: RankGroup,
) -> dict[str, float]:
    """``accumulate_gradients`` in lockstep: this rank's micro-batches, then filler passes up to the most
    any rank runs; the metrics are summed (the log-prob gap maxed) over the ranks."""
    policy = root.policy
    loss_fn = POLICY_LOSSES.get(config.policy_loss)
    parts = _microbatches(policy, minibatch, config) if minibatch.num_sequences else []
    totals: dict[str, float] = {}
    with activation_checkpointing(policy, enabled=config.gradient_checkpointing):
        for index in range(_lockstep_count(len(parts), group)):
            mb = minibatch.take(*parts[index]) if index < len(parts) else None
            real = mb is not None and _scores(mb)
            part = _device_batch(_uniform(policy, mb if mb is not None and real else filler, config), group)
            group.mark_pass()
            terms = root(_microbatch_loss, policy, part, normaliser, config, loss_fn, root.value_head)
            (terms.total if real else terms.total * 0.0).backward()
            for name, value in terms.metrics.items():
                contribution = float(value.item()) if real else 0.0
                totals[name] = max(totals.get(name, 0.0), contribution) if name == _GAP else (
                    totals.get(name, 0.0) + contribution
                )  # fmt: skip
    names = sorted(n for n in totals if n != _GAP)
    sums, maxima = _all_reduce(group, [totals[n] for n in names], [totals[_GAP]] if _GAP in totals else [])
    reduced = dict(zip(names, sums, strict=True))
    if maxima:
        reduced[_GAP] = maxima[0]
    return reduced


def _device_batch(batch: TrainBatch, group: RankGroup) -> TrainBatch:
    if group.device.type == "cpu":
        return batch
    updates: dict[str, Any] = {
        f.name: getattr(batch, f.name).to(group.device)
        for f in dataclasses.fields(batch)
        if getattr(batch, f.name) is not None
    }
    return dataclasses.replace(batch, **updates)


def _clip_grad_norm(params: list[Tensor], max_norm: float, group: RankGroup) -> float:
    """``clip_grad_norm_`` over the sharded gradients: the norm of every rank's shards, the same clip
    coefficient (``max_norm / (norm + 1e-6)``, at most 1) applied on every rank."""
    grads = [p.grad for p in params if p.grad is not None]
    local = [g.to_local() if isinstance(g, DTensor) else g for g in grads]
    squares = sum(float(torch.linalg.vector_norm(g, dtype=torch.float32).double() ** 2) for g in local)
    (total_sq,), _ = _all_reduce(group, [squares], [])
    total = math.sqrt(total_sq) if math.isfinite(total_sq) else math.nan
    if math.isfinite(total):
        coefficient = torch.tensor(min(max_norm / (total + 1e-6), 1.0), dtype=torch.float32)
        for g in local:
            g.mul_(coefficient.to(g.device, g.dtype))
    return total


def _batch_metrics(batch: TrainBatch, config: TrainerConfig, group: RankGroup) -> dict[str, float]:
    """``step._batch_metrics`` over every rank's rows: advantage statistics, the KL to the reference."""
    mask = batch.response_mask
    adv = batch.advantages[mask].double()  # [K]
    has_kl = batch.ref_logprobs is not None and batch.old_logprobs is not None
    kl_sum = 0.0
    if has_kl:
        assert batch.ref_logprobs is not None and batch.old_logprobs is not None
        kl = kl_per_token(batch.old_logprobs.double(), batch.ref_logprobs.double(), config.kl_estimator)
        kl_sum = float(torch.where(mask, kl, 0.0).sum())
    count = float(adv.numel())
    sums = [count, float(adv.sum()), float((adv * adv).sum()), kl_sum]
    inf = math.inf
    maxima = [float(adv.max()) if count else -inf, float(-adv.min()) if count else -inf]
    (n, total, squares, kl_total), (high, neg_low) = _all_reduce(group, sums, maxima)
    metrics: dict[str, float] = {}
    if n:
        mean = total / n
        metrics["advantage/mean"] = mean
        metrics["advantage/std"] = math.sqrt(max(squares - n * mean * mean, 0.0) / (n - 1)) if n > 1 else 0.0
        metrics["advantage/min"] = -neg_low
        metrics["advantage/max"] = high
    if has_kl:
        metrics["kl/ref_mean"] = kl_total / max(n, 1.0)
    return metrics
