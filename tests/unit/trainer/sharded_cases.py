"""Helpers of the sharded-trainer tests: start N ranks (verl's pattern: spawned processes, gloo on CPU,
NCCL on GPUs), a tiny random Llama with tied embeddings, rollout-like batches, and the runs compared.

Importable by the spawned ranks (``spawn`` passes ``sys.path``), so the rank functions live here.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp
from transformers import LlamaConfig, LlamaForCausalLM

from execrl.trainer import LoraSettings, TrainBatch, TrainerConfig, ValueHead
from execrl.trainer.lora import add_adapters

VOCAB, HIDDEN = 64, 32
STEPS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn_ranks(
    fn: Callable[..., Any], world: int, out_dir: Path, *args: Any, gpus: bool = False, timeout_s: float = 300
) -> list[Any]:
    """``fn(rank, world, *args)`` in ``world`` spawned processes joined by env:// (``MASTER_*``, ``RANK``);
    returns each rank's result (a rank's exception fails the call with its traceback). Without ``gpus``
    the ranks see no GPU (a CPU mesh on gloo, as pytorch/pytorch#132471 advises where GPUs exist); with
    it they train on cuda:RANK over NCCL (one GPU per rank)."""
    port = free_port()
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_rank_main, args=(fn, r, world, port, out_dir, args, gpus)) for r in range(world)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout_s)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join()
    errors = [(out_dir / f"error{r}.txt") for r in range(world)]
    messages = [e.read_text() for e in errors if e.exists()]
    assert not messages, "\n".join(messages)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return [torch.load(out_dir / f"rank{r}.pt", weights_only=False) for r in range(world)]


def _rank_main(
    fn: Callable[..., Any], rank: int, world: int, port: int, out_dir: Path, args: tuple[Any, ...], gpus: bool
) -> None:
    import torch.distributed as dist

    if not gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before the first CUDA call: torch sees no GPU
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
    )  # fmt: skip
    torch.set_num_threads(1)
    try:
        result = fn(rank, world, *args)
        torch.save(result, out_dir / f"rank{rank}.pt")
    except BaseException:
        (out_dir / f"error{rank}.txt").write_text(f"rank {rank}:\n{traceback.format_exc()}")
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def tiny_policy(*, lora: bool = False) -> LlamaForCausalLM:
    """2 layers, tied embeddings (SmolLM2's layout); with ``lora`` adapters whose B is non-zero."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    if lora:
        add_adapters(model, LoraSettings(rank=4, alpha=8, target_modules=("q_proj", "v_proj", "down_proj")))
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0, 0.1)  # B = 0 would give A no gradient
    return model


def value_head() -> ValueHead:
    torch.manual_seed(7)
    return ValueHead(HIDDEN)


def step_batch(step: int, *, ppo: bool) -> TrainBatch:
    """8 rows: 4 groups of 2 sharing a prompt, left padding, ragged responses, one invalid row."""
    gen = torch.Generator().manual_seed(100 + step)
    rows, width = 8, 14
    ids = torch.randint(1, VOCAB, (rows, width), generator=gen)
    for group in range(4):
        ids[2 * group + 1, :6] = ids[2 * group, :6]
    attention = torch.ones_like(ids)
    attention[0:2, :2] = 0  # group 0's prompt is left-padded
    attention[3, 10:] = 0
    attention[6, 12:] = 0
    response = torch.zeros_like(ids)
    response[:, 6:] = 1
    response = response * attention
    ids = ids * attention
    valid = torch.ones(rows, dtype=torch.bool)
    valid[5] = False
    extra = {}
    if ppo:
        extra = {"old_values": torch.randn(rows, width, generator=gen) * response,
                 "returns": torch.randn(rows, width, generator=gen) * response}  # fmt: skip
    return TrainBatch(ids, attention, response, None, torch.randn(rows, generator=gen), valid=valid, **extra)


CASES: dict[str, dict[str, Any]] = {
    "grpo": {"gradient_checkpointing": True},
    "ppo": {"ppo": True},
    "lora": {"lora": True, "kl_coef": 0.1},
}


def trainer_config(case: str, precision: str = "fp32") -> TrainerConfig:
    spec = CASES[case]
    return TrainerConfig(
        learning_rate=1e-4, tokens_per_microbatch=40, optimizer_steps_per_epoch=2,
        gradient_checkpointing=spec.get("gradient_checkpointing", False), kl_coef=spec.get("kl_coef", 0.0),
        precision=precision,
    )  # fmt: skip


def build(case: str) -> tuple[LlamaForCausalLM, ValueHead | None]:
    spec = CASES[case]
    return tiny_policy(lora=spec.get("lora", False)), value_head() if spec.get("ppo") else None


@dataclasses.dataclass
class Trace:
    metrics: list[dict[str, float]]  # per update
    grads: list[dict[str, torch.Tensor]]  # per optimizer step, full gradients
    params: dict[str, torch.Tensor]  # after the last update, full, root names


def record_grads(
    optimizer: torch.optim.Optimizer, named: list[tuple[str, torch.Tensor]], into: list[Any]
) -> None:
    """Keep the full gradients of ``named`` at every ``optimizer.step`` (DTensor gradients gathered)."""

    def hook(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
        grads = {}
        for name, param in named:
            if param.grad is not None:
                grad = param.grad
                grads[name] = (grad.full_tensor() if hasattr(grad, "full_tensor") else grad).detach().clone()
        into.append(grads)

    optimizer.register_step_pre_hook(hook)


def run_single(case: str, device: str = "cpu") -> Trace:
    """Three ``policy_update`` calls in this process (the reference), on ``device``."""
    from execrl.trainer import build_optimizer, build_scheduler, policy_update

    model, head = build(case)
    model.to(device)
    if head is not None:
        head.to(device)
    config = trainer_config(case)
    optimizer = build_optimizer(model, config, extra_modules=(head,) if head is not None else ())
    named = [(f"policy.{n}", p) for n, p in model.named_parameters()]
    named += [(f"value_head.{n}", p) for n, p in head.named_parameters()] if head is not None else []
    grads: list[dict[str, torch.Tensor]] = []
    record_grads(optimizer, named, grads)
    scheduler = build_scheduler(optimizer, config)
    reference = model if CASES[case].get("lora") else None
    metrics = []
    for s in range(STEPS):
        batch = _on(step_batch(s, ppo=head is not None), device)
        metrics.append(
            policy_update(model, optimizer, scheduler, batch, config, ref_model=reference, value_model=head)
        )
    cpu = [{k: v.cpu() for k, v in g.items()} for g in grads]
    return Trace(metrics, cpu, {n: p.detach().cpu().clone() for n, p in named})


def _on(batch: TrainBatch, device: str) -> TrainBatch:
    fields = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}
    return dataclasses.replace(batch, **{k: v.to(device) for k, v in fields.items() if v is not None})


def run_sharded(
    rank: int, world: int, cases: list[str], checkpoint_dir: Path | None
) -> dict[str, Any] | None:
    """Each case on ``world`` ranks (FSDP2), three updates; with ``checkpoint_dir`` the GRPO case also
    goes through checkpoints written at 2 ranks and read at 1, and back (see ``reshard_round_trip``)."""
    from execrl.trainer import build_optimizer, build_scheduler
    from execrl.trainer.sharded import ShardingSettings, gather_full_weights, init_ranks, shard_policy
    from execrl.trainer.sharded_step import shard_batch, sharded_policy_update

    group = init_ranks(collective_timeout_s=120)
    out: dict[str, Any] = {}
    for case in cases:
        model, head = build(case)
        config = trainer_config(case)
        root = shard_policy(model, head, group, ShardingSettings())
        optimizer = build_optimizer(root, config)
        grads: list[dict[str, torch.Tensor]] = []
        record_grads(optimizer, list(root.named_parameters()), grads)
        scheduler = build_scheduler(optimizer, config)
        metrics = []
        for s in range(STEPS):
            shard = shard_batch(step_batch(s, ppo=head is not None), config, world)[rank]
            metrics.append(sharded_policy_update(root, optimizer, scheduler, shard, config, group))
        full = {n: torch.empty(p.shape) for n, p in root.named_parameters()}
        gather_full_weights(root, group, into=full if rank == 0 else None, bucket_mb=1, trainable_only=False)
        out[case] = Trace(metrics, [{k: v.cpu() for k, v in g.items()} for g in grads], full)
        if checkpoint_dir is not None and case == "grpo":
            out["reshard"] = reshard_round_trip(
                rank, group, root, optimizer, scheduler, config, checkpoint_dir
            )
    return out if rank == 0 else None


def _load_into_other_shape(path: Path, group: Any, config: TrainerConfig) -> str:
    """The error of loading ``path`` into a model whose MLP is narrower (every layer's shapes differ)."""
    from execrl.trainer import build_optimizer
    from execrl.trainer.sharded import ShardingSettings, shard_policy
    from execrl.trainer.sharded_checkpoint import load_sharded

    torch.manual_seed(0)
    other = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True,
        )
    )  # fmt: skip
    root = shard_policy(other, None, group, ShardingSettings())
    try:
        load_sharded(path, root=root, optimizer=build_optimizer(root, config), scheduler=None, rank=0,
                     group=group.checkpoints)  # fmt: skip
    except ValueError as exc:
        return str(exc)
    return "loaded"


def reshard_round_trip(
    rank: int, group: Any, root: Any, optimizer: Any, scheduler: Any, config: TrainerConfig, directory: Path
) -> dict[str, Any]:
    """Save at 2 ranks; load at 1 rank (a one-rank group of rank 0), save again; load at 2 ranks into a fresh
    model. Returns the parameters each world size read and, after one more update, both runs' parameters."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    from execrl.trainer import build_optimizer, build_scheduler
    from execrl.trainer.sharded import RankGroup, ShardingSettings, gather_full_weights, shard_policy
    from execrl.trainer.sharded_checkpoint import load_sharded, save_sharded, write_leader_files
    from execrl.trainer.sharded_step import shard_batch, sharded_policy_update

    def fresh(g: RankGroup) -> tuple[Any, Any, Any]:
        r = shard_policy(build("grpo")[0], None, g, ShardingSettings())
        o = build_optimizer(r, config)
        return r, o, build_scheduler(o, config)

    def leader_files(path: Path, world: int, sched: Any) -> None:
        write_leader_files(
            path, step=0, world_size=world, scheduler=sched, data_state={}, metrics={}, extra_files=[]
        )

    two, one = directory / "two", directory / "one"
    two.mkdir(exist_ok=True)
    save_sharded(two, root=root, optimizer=optimizer, rank=rank, group=group.checkpoints, use_async=False)
    if rank == 0:
        leader_files(two, 2, scheduler)
    solo = dist.new_group([0], backend="gloo")  # every rank must create it; only rank 0 is in it
    read: dict[str, Any] = {}
    if rank == 0:
        mesh = DeviceMesh.from_group(solo, "cpu")
        single = RankGroup(0, 1, torch.device("cpu"), mesh, solo, solo, group.store, 120.0)
        r1, o1, s1 = fresh(single)
        load_sharded(two, root=r1, optimizer=o1, scheduler=s1, rank=0, group=solo)
        read["at_1"] = {n: p.full_tensor().clone() for n, p in r1.named_parameters()}
        read["mismatch"] = _load_into_other_shape(two, single, config)
        one.mkdir(exist_ok=True)
        save_sharded(one, root=r1, optimizer=o1, rank=0, group=solo, use_async=False)
        leader_files(one, 1, s1)
    dist.barrier()
    r2, o2, s2 = fresh(group)
    load_sharded(one, root=r2, optimizer=o2, scheduler=s2, rank=rank, group=group.checkpoints)
    full = {n: torch.empty(p.shape) for n, p in r2.named_parameters()}
    gather_full_weights(r2, group, into=full if rank == 0 else None, bucket_mb=1, trainable_only=False)
    read["at_2"] = full
    after = []
    for r, o, s in ((root, optimizer, scheduler), (r2, o2, s2)):
        shard = shard_batch(step_batch(STEPS, ppo=False), config, group.world_size)[rank]
        sharded_policy_update(r, o, s, shard, config, group)
        params = {n: torch.empty(p.shape) for n, p in r.named_parameters()}
        gather_full_weights(r, group, into=params if rank == 0 else None, bucket_mb=1, trainable_only=False)
        after.append(params)
    read["after_update"] = after
    return read
