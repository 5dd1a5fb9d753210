"""``execrl bench train --ranks 1,2`` / ``--precision fp32,bf16-mixed``: the update alone, on one batch.

    execrl bench train --ranks 1,2 --json ranks.json                 # one process vs FSDP2 over 2 ranks
    execrl bench train --precision fp32,bf16-mixed --json bf16.json  # the update in fp32 vs bf16-mixed

The batch: SmolLM2-135M-Instruct samples ``--samples`` completions of up to ``--max-new-tokens`` tokens for
each of ``--prompts`` built-in ``functions`` tasks once (temperature 1, seeded; the one rollout loop,
``run_episodes``, then ``episodes_to_batch``), with the engine's
log-probs as the behaviour log-probs and group-normalised random advantages (fixed seed): the shape of
a GRPO step's update. Every configuration then starts from the same initial weights and runs
``--steps`` + 1 updates on that same batch (the first is warm-up, not timed), each in fresh processes
started by ``torch.distributed``'s elastic launcher (one per rank), so peak RSS is each rank's own.

A configuration is (ranks, precision). ``ranks=1`` is ``trainer.strategy=single`` (``policy_update`` in one
process, today's code); ``ranks=N>1`` is ``trainer.strategy=fsdp`` over N ranks (``sharded_policy_update``).
Per rank: the model state it holds (its parameters, their gradients and AdamW's moments, measured at the
last optimizer step: ``sharded.state_bytes``), peak RSS, step times. ``state_bytes_ratio_2_vs_1`` is the
largest rank's model state at 2 ranks over one process's; ``loss_max_abs_diff`` the largest difference
of ``loss/policy`` between a configuration and the one-process fp32 run at the same update. The ranks of
one machine share its cores (each gets ``cores / N`` torch threads), so N ranks on 2 cores are not N
times faster: the point is the memory per rank at the same loss. ``bf16_speedup`` is the fp32 step time
over the bf16-mixed step time (one process), both with the batch's (fp32 rollout) old log-probs.
``bf16_loss_max_rel_diff`` is their largest ``loss/policy`` gap over ``loss_scale`` (the mean |advantage|
over response tokens): GRPO's loss is a sum of advantage x ratio with zero-mean advantages, so it is
near 0 on-policy and a gap relative to the loss itself would mean nothing; relative to the scale of its
terms it is the ratio's relative error. The recipe does the same (the rollout's log-probs are the old
ones in both precisions: ``components.run.rollout_logprobs_exact``).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.bench._report import write_report
from execrl.telemetry.memory import peak_rss_mb

if TYPE_CHECKING:
    from execrl.trainer import TrainBatch, TrainerConfig

__all__ = ["run_scale"]


def run_scale(args: argparse.Namespace) -> int:
    """The ``--ranks`` / ``--precision`` mode of ``execrl bench train``."""
    ranks = _int_list(args.ranks or "1")
    precisions = [p.strip() for p in (args.precision or "fp32").split(",") if p.strip()]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if max(ranks) > cores or min(ranks) < 1:
        raise SystemExit(f"--ranks {args.ranks}: each count must be 1..{cores} (this machine's cores)")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="execrl-bench-scale-") as tmp:
        batch_file = Path(tmp) / "batch.pt"
        loss_scale = _write_batch(args, batch_file)
        configs = [(n, "fp32") for n in ranks] + [(1, p) for p in precisions if p != "fp32" or 1 not in ranks]
        runs = [_run_config(args, n, precision, batch_file, cores) for n, precision in dict.fromkeys(configs)]
    report = _report(args, runs, cores, loss_scale)
    report["wall_s"] = time.perf_counter() - started
    report["host"]["load_avg_1m_before"] = load_before
    _print(report)
    if args.json is not None:
        write_report(args.json, report)
        print(f"wrote {args.json}")
    return 0


def _int_list(text: str) -> list[int]:
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise SystemExit(f"--ranks {text!r}: a comma-separated list of rank counts, e.g. 1,2") from None


def trainer_config(args: argparse.Namespace, precision: str) -> TrainerConfig:
    """The main job's update settings (``execrl train`` defaults: token-mean, clip 0.2/0.28, no KL)."""
    from execrl.trainer import TrainerConfig

    return TrainerConfig(
        learning_rate=args.learning_rate, clip_eps_high=0.28, tokens_per_microbatch=4096, precision=precision
    )


def _write_batch(args: argparse.Namespace, path: Path) -> float:
    """Sample the benchmark's batch once with the initial weights and save it; returns the loss's scale,
    the mean |advantage| over response tokens (what a token-mean loss of same-signed advantages is)."""
    import torch

    from execrl.bench._tasks import pick_tasks
    from execrl.bench.long_context import SyntheticReward
    from execrl.episodes import LocalBackend, episodes_to_batch, run_episodes
    from execrl.rollout import SamplingParams, create_engine, load_model_and_tokenizer
    from execrl.rollout.models import default_model_dir
    from execrl.tasks import load_suite

    torch.manual_seed(args.seed)
    model_dir = args.model_dir or default_model_dir()
    model, tokenizer = load_model_and_tokenizer(model_dir)
    tasks = pick_tasks(load_suite("functions", "train"), args.prompts)
    params = SamplingParams(samples_per_prompt=args.samples, max_new_tokens=args.max_new_tokens, temperature=1.0,
                            top_p=1.0, top_k=0, seed=args.seed)  # fmt: skip
    backend = LocalBackend(create_engine("hf", model=model, tokenizer=tokenizer), tokenizer)
    episodes = run_episodes(SyntheticReward(), backend, tasks, params=params).episodes  # the one rollout loop
    gen = torch.Generator().manual_seed(args.seed)
    scores = torch.randn(args.prompts, args.samples, generator=gen)
    advantages = ((scores - scores.mean(1, keepdim=True)) / (scores.std(1, keepdim=True) + 1e-6)).flatten()
    batch = episodes_to_batch(  # the recipes' batch builder; old log-probs: the engine's (fp32 sampler)
        episodes, advantages, torch.ones(advantages.numel(), dtype=torch.bool),
        pad_token_id=backend.pad_token_id, old_logprobs_from_rollout=True,
    )  # fmt: skip
    torch.save({"batch": batch, "model_dir": str(model_dir)}, path)
    mask = batch.response_mask.bool()
    return float(advantages[:, None].expand_as(mask)[mask].abs().mean())


def _run_config(
    args: argparse.Namespace, nproc: int, precision: str, batch_file: Path, cores: int
) -> dict[str, Any]:
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    print(f"[bench train] {nproc} rank(s), {precision} ...", flush=True)
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nproc, rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0",
        max_restarts=0, monitor_interval=0.5, start_method="spawn", run_id=f"bench-{nproc}-{precision}",
    )  # fmt: skip
    threads = max(1, cores // nproc)
    options = {"steps": args.steps, "precision": precision, "threads": threads, "lr": args.learning_rate}
    results = elastic_launch(config, rank_main)(str(batch_file), options)
    per_rank = [results[r] for r in sorted(results)]
    steps = [max(r["step_times_s"][i] for r in per_rank) for i in range(len(per_rank[0]["step_times_s"]))]
    return {
        "ranks": nproc, "precision": precision, "threads_per_rank": threads,
        "strategy": "single" if nproc == 1 else "fsdp",
        "step_s": statistics.median(steps[1:]), "step_times_s": steps, "warmup_steps_excluded": 1,
        "losses": per_rank[0]["losses"], "grad_norms": per_rank[0]["grad_norms"],
        "state_bytes_max_rank": max(r["state_bytes"]["total"] for r in per_rank),
        "peak_rss_mb_max_rank": max(r["peak_rss_mb"] for r in per_rank), "per_rank": per_rank,
    }  # fmt: skip


def rank_main(batch_file: str, options: dict[str, Any]) -> dict[str, Any]:
    """One rank of one configuration (run by the elastic launcher in its own process)."""
    from execrl.memory import configure_allocator

    configure_allocator()  # as the CLI does first thing in every rank (glibc's thresholds, execrl.memory)
    import torch

    from execrl.rollout import load_model_and_tokenizer

    torch.set_num_threads(int(options["threads"]))
    saved = torch.load(batch_file, weights_only=False)
    batch: TrainBatch = saved["batch"]
    model, _ = load_model_and_tokenizer(Path(saved["model_dir"]))
    if torch.cuda.is_available():  # one GPU per rank; the single process trains on its GPU too
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        model.to(torch.device("cuda", torch.cuda.current_device()))
        batch = _to_device(batch, torch.device("cuda", torch.cuda.current_device()))
    args = argparse.Namespace(learning_rate=options["lr"])
    config = trainer_config(args, options["precision"])
    world = int(os.environ.get("WORLD_SIZE", "1"))
    update, holder = _single(model, config) if world == 1 else _sharded(model, config)
    times, losses, norms, state = [], [], [], {}
    for step in range(int(options["steps"]) + 1):
        if step == 1:
            peak_rss_mb(reset=True)  # the timed updates' peak, without loading and warm-up
        start = time.perf_counter()
        metrics = update(batch)
        times.append(time.perf_counter() - start)
        losses.append(metrics["loss/policy"])
        norms.append(metrics.get("train/grad_norm", float("nan")))
        state = dict(holder["state"])
    state["total"] = sum(state.values())
    update_peak, lifetime = peak_rss_mb(reset=False)
    return {"rank": int(os.environ.get("RANK", "0")), "step_times_s": times, "losses": losses,
            "grad_norms": norms, "state_bytes": state, "peak_rss_mb": update_peak, "peak_rss_is_lifetime": lifetime,
            "peak_rss_lifetime_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "cuda_max_allocated_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None}  # fmt: skip


def _to_device(batch: TrainBatch, device: Any) -> TrainBatch:
    import dataclasses

    fields = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}
    return dataclasses.replace(batch, **{k: v.to(device) for k, v in fields.items() if v is not None})


def _measure(root: Any, optimizer: Any, holder: dict[str, Any]) -> None:
    """Model state at each optimizer step (gradients exist then; AdamW's moments after the first)."""
    from execrl.trainer.sharded import state_bytes

    def hook(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
        holder["state"] = state_bytes(root, optimizer)

    optimizer.register_step_pre_hook(hook)


def _single(model: Any, config: TrainerConfig) -> tuple[Any, dict[str, Any]]:
    from execrl.trainer import build_optimizer, build_scheduler, policy_update

    optimizer = build_optimizer(model, config)
    scheduler = build_scheduler(optimizer, config)
    holder: dict[str, Any] = {"state": {}}
    _measure(model, optimizer, holder)

    def update(batch: TrainBatch) -> dict[str, float]:
        return policy_update(model, optimizer, scheduler, batch, config)

    return update, holder


def _sharded(model: Any, config: TrainerConfig) -> tuple[Any, dict[str, Any]]:
    from execrl.trainer import build_optimizer, build_scheduler
    from execrl.trainer.sharded import ShardingSettings, init_ranks, shard_policy
    from execrl.trainer.sharded_step import shard_batch, sharded_policy_update

    group = init_ranks(collective_timeout_s=1800)
    root = shard_policy(model, None, group, ShardingSettings(precision=config.precision))
    optimizer = build_optimizer(root, config)
    scheduler = build_scheduler(optimizer, config)
    holder: dict[str, Any] = {"state": {}}
    _measure(root, optimizer, holder)

    def update(batch: TrainBatch) -> dict[str, float]:
        shard = shard_batch(batch, config, group.world_size)[group.rank]
        return sharded_policy_update(root, optimizer, scheduler, shard, config, group)

    return update, holder


def _report(args: argparse.Namespace, runs: list[dict[str, Any]], cores: int, scale: float) -> dict[str, Any]:
    import torch

    base = next((r for r in runs if r["ranks"] == 1 and r["precision"] == "fp32"), None)
    out: dict[str, Any] = {
        "benchmark": "train-scale", "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "prompts": args.prompts, "samples_per_prompt": args.samples, "max_new_tokens": args.max_new_tokens,
        "steps_timed": args.steps, "learning_rate": args.learning_rate, "runs": runs,
    }  # fmt: skip
    two = next((r for r in runs if r["ranks"] == 2 and r["precision"] == "fp32"), None)
    if base is not None and two is not None:
        out["state_bytes_ratio_2_vs_1"] = two["state_bytes_max_rank"] / base["state_bytes_max_rank"]
        out["peak_rss_ratio_2_vs_1"] = two["peak_rss_mb_max_rank"] / base["peak_rss_mb_max_rank"]
        out["step_s_ratio_2_vs_1"] = two["step_s"] / base["step_s"]
    if base is not None:
        same = [r for r in runs if r["precision"] == "fp32" and r is not base]
        diffs = [abs(a - b) for r in same for a, b in zip(r["losses"], base["losses"], strict=True)]
        out["loss_max_abs_diff"] = max(diffs) if diffs else None
    bf16 = next((r for r in runs if r["ranks"] == 1 and r["precision"] == "bf16-mixed"), None)
    if base is not None and bf16 is not None:
        out["bf16_speedup"] = base["step_s"] / bf16["step_s"]
        gap = max(abs(a - b) for a, b in zip(bf16["losses"], base["losses"], strict=True))
        out["bf16_loss_max_abs_diff"] = gap
        out["loss_scale"] = scale
        out["bf16_loss_max_rel_diff"] = gap / scale
    out["host"] = {"cpus": cores, "machine": platform.machine(), "cpu": _cpu_name(),
                   "bf16_instructions": _has_flag("avx512_bf16"), "amx": _has_flag("amx_bf16"),
                   "torch": torch.__version__, "load_avg_1m_after": os.getloadavg()[0]}  # fmt: skip
    return out


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _cpu_name() -> str:
    for line in _cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def _has_flag(flag: str) -> bool:
    return any(line.startswith("flags") and f" {flag}" in line for line in _cpuinfo().splitlines())


def _print(report: dict[str, Any]) -> None:
    print(f"execrl bench train (update only): {report['prompts']} prompts x {report['samples_per_prompt']} samples "
          f"x {report['max_new_tokens']} new tokens, {report['steps_timed']} timed updates (+1 warm-up)")  # fmt: skip
    print(
        f"{'ranks':>5} {'precision':<10} {'step_s':>7} {'state MB/rank':>13} {'peak RSS MB/rank':>16} losses"
    )
    for r in report["runs"]:
        losses = ", ".join(f"{x:.7f}" for x in r["losses"])
        print(f"{r['ranks']:>5} {r['precision']:<10} {r['step_s']:>7.2f} {r['state_bytes_max_rank'] / 2**20:>13.1f} "
              f"{r['peak_rss_mb_max_rank']:>16.0f} {losses}")  # fmt: skip
    for key in ("state_bytes_ratio_2_vs_1", "peak_rss_ratio_2_vs_1", "step_s_ratio_2_vs_1", "loss_max_abs_diff",
                "bf16_speedup", "bf16_loss_max_abs_diff", "bf16_loss_max_rel_diff"):  # fmt: skip
        if report.get(key) is not None:
            print(f"{key}: {report[key]:.6g}")
    host = report["host"]
    print(f"cpu: {host['cpu']} ({host['cpus']} cores, avx512_bf16={host['bf16_instructions']}, amx={host['amx']}); "
          f"load average (1 min): {host['load_avg_1m_before']:.1f} before, {host['load_avg_1m_after']:.1f} after")  # fmt: skip
