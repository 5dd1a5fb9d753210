"""The sharded trainer (FSDP2 over 2 gloo ranks) against one process: verl's parity pattern
(``tests/workers/test_fsdp_gradient_accumulation_sync_on_cpu.py``: spawned gloo processes on a CPU mesh).

One spawn of two ranks runs GRPO (shared-prompt groups, gradient checkpointing, an invalid row), PPO (the
value head sharded with the policy) and LoRA (the KL reference is the policy with its adapters off),
three updates each with two mini-batches per update and token-budget micro-batches, so the ranks run
different numbers of micro-batches (filler passes keep them in lockstep). Every metric (the losses
among them), every optimizer step's gradient and the parameters after three updates agree with
``policy_update`` in one process within 1e-6 (float32; the only difference is summation order). The
checkpoint part writes at 2 ranks, reads at 1, writes at 1, reads at 2 (``torch.distributed.checkpoint``
reshards), and the model read back continues exactly as the one that never left.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from sharded_cases import CASES, Trace, run_sharded, run_single, spawn_ranks

TOLERANCE = 1e-6
TIMING = ("perf/",)  # wall-clock metrics differ between any two runs


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("ranks")
    checkpoints = tmp_path_factory.mktemp("checkpoints")
    result = spawn_ranks(run_sharded, 2, out, list(CASES), checkpoints)[0]
    assert isinstance(result, dict)
    return result


def _close(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_two_ranks_equal_one_process(two_ranks: dict[str, object], case: str) -> None:
    single, sharded = run_single(case), two_ranks[case]
    assert isinstance(sharded, Trace)
    for ours, theirs in zip(sharded.metrics, single.metrics, strict=True):
        keys = {k for k in theirs if not k.startswith(TIMING)}
        assert keys == {k for k in ours if not k.startswith(TIMING)}
        assert all(math.isclose(ours[k], theirs[k], rel_tol=TOLERANCE, abs_tol=TOLERANCE) for k in keys), {
            k: (ours[k], theirs[k])
            for k in keys
            if not math.isclose(ours[k], theirs[k], rel_tol=TOLERANCE, abs_tol=TOLERANCE)
        }
    assert single.metrics[0]["train/optimizer_steps"] == 2  # two mini-batches per update
    assert len(sharded.grads) == len(single.grads) == 2 * 3
    for ours_g, theirs_g in zip(sharded.grads, single.grads, strict=True):
        assert ours_g.keys() == theirs_g.keys()
        assert max(_close(ours_g[k], theirs_g[k]) for k in theirs_g) < TOLERANCE
    assert sharded.params.keys() == single.params.keys()
    assert max(_close(sharded.params[k], single.params[k]) for k in single.params) < TOLERANCE
    moved = max(_close(single.params[k], v) for k, v in _initial(case).items())
    assert moved > 100 * TOLERANCE  # the comparison is not between two untouched models


def _initial(case: str) -> dict[str, torch.Tensor]:
    from sharded_cases import build

    model, head = build(case)
    named = {f"policy.{n}": p.detach() for n, p in model.named_parameters()}
    named.update(
        {f"value_head.{n}": p.detach() for n, p in head.named_parameters()} if head is not None else {}
    )
    return named


@pytest.mark.slow
def test_checkpoint_reshards_between_world_sizes(two_ranks: dict[str, object]) -> None:
    """2 -> 1 and 1 -> 2 read the same parameters (bit for bit), and the optimizer and LR state came along:
    one more update from the twice-resharded copy equals the update of the copy that never left."""
    read = two_ranks["reshard"]
    assert isinstance(read, dict)
    grpo = two_ranks["grpo"]
    assert isinstance(grpo, Trace)
    for world in ("at_1", "at_2"):
        assert read[world].keys() == grpo.params.keys()
        assert all(torch.equal(read[world][k], grpo.params[k]) for k in grpo.params), world
    mismatch = read["mismatch"]  # a checkpoint that does not fit: one line naming a tensor, nothing loaded
    assert "does not fit this model" in mismatch and "mlp" in mismatch and "\n" not in mismatch, mismatch
    kept, resharded = read["after_update"]
    assert all(torch.equal(kept[k], resharded[k]) for k in kept)
    assert any(not torch.equal(kept[k], grpo.params[k]) for k in kept)  # the update moved them


def test_split_keeps_groups_whole_and_balances_tokens() -> None:
    from execrl.trainer.batching import split_groups

    groups = torch.tensor([0, 0, 1, 1, 1, 2, 3, 3])
    cost = torch.tensor([5, 5, 4, 4, 4, 9, 1, 1])
    shares = split_groups(groups, cost, 2)
    assert [s.tolist() for s in shares] == [[2, 3, 4, 6, 7], [0, 1, 5]]  # 12 + 2 vs 10 + 9
    for share in shares:
        for g in groups[share].unique():
            assert set((groups == g).nonzero().flatten().tolist()) <= set(share.tolist())
    one_group = split_groups(torch.zeros(4, dtype=torch.long), torch.tensor([3, 1, 2, 2]), 2)
    assert [s.tolist() for s in one_group] == [[0, 1], [2, 3]]  # fewer groups than ranks: rows dealt out


def test_shard_batch_gives_every_rank_rows_and_keeps_minibatches(tmp_path: Path) -> None:
    from sharded_cases import step_batch, trainer_config

    from execrl.trainer.sharded_step import shard_batch

    batch = step_batch(0, ppo=False)
    shards = shard_batch(batch, trainer_config("grpo"), 3)
    assert sum(s.batch.num_sequences for s in shards) == batch.num_sequences
    assert all(len(s.minibatch_sizes) == 2 for s in shards)  # optimizer_steps_per_epoch=2
    many = shard_batch(batch, trainer_config("grpo"), 16)  # more ranks than rows: fillers
    fillers = [s for s in many if not bool(s.batch.response_mask.any())]
    assert len(fillers) >= 8 and all(s.batch.num_sequences == 1 for s in fillers)


def test_a_checkpoint_of_the_other_strategy_is_refused_naming_what_to_set(tmp_path: Path) -> None:
    """Resume through ``build_run`` (issue 38 on the spine): a sharded checkpoint resumed in one process,
    or a one-process checkpoint resumed over ranks, is one ``CheckpointError`` saying what to set, before
    any rank loads anything; so is a sharded one missing a file rank 0 reads or a ``data_state`` key."""
    from execrl.trainer.errors import CheckpointError
    from execrl.trainer.sharded_checkpoint import SHARDS_DIRNAME, check_strategy

    sharded, single = tmp_path / "sharded", tmp_path / "single"
    (sharded / SHARDS_DIRNAME).mkdir(parents=True)
    (sharded / SHARDS_DIRNAME / ".metadata").write_bytes(b"")
    single.mkdir()
    (single / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="written by trainer.strategy=fsdp.*--nproc N"):
        check_strategy(sharded, sharded=False)
    with pytest.raises(CheckpointError, match="written in one process.*without --nproc"):
        check_strategy(single, sharded=True)
    check_strategy(single, sharded=False)
    with pytest.raises(CheckpointError, match="scheduler.pt: missing"):
        check_strategy(sharded, sharded=True)
    torch.save({}, sharded / "scheduler.pt")
    torch.save({"step": 0, "data_state": {}, "metrics": {}}, sharded / "trainer_state.pt")
    with pytest.raises(CheckpointError, match="lacks \\['next_step'\\]"):
        check_strategy(sharded, sharded=True, data_keys=("next_step",))
    torch.save({"step": 0, "data_state": {"next_step": 1}, "metrics": {}}, sharded / "trainer_state.pt")
    check_strategy(sharded, sharded=True, data_keys=("next_step",))
