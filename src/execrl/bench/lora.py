"""`execrl bench lora`: GRPO steps with LoRA adapters, execrl vs TRL + PEFT, against full fine-tuning.

One run, five sides on the same model (SmolLM2-135M-Instruct, float32, CPU), prompts, sampling, reward
and trainer settings as ``execrl bench train`` (whose pieces it reuses; see its docstring for what one
step is on each side): execrl full fine-tuning, execrl with LoRA at each ``--ranks`` (default 16 and 64),
and TRL's ``GRPOTrainer`` on a ``peft`` model with the same adapters (same rank, alpha = 2 x rank, the
seven linear projections of each block, no dropout), at each rank. Per side: median step seconds after one
warm-up step, the side's peak RSS, trainable parameters.

Each side runs in its own process (``start_new_session=True``, as every sandboxed run is a new session),
because peak RSS (``ru_maxrss``) only grows within a process: it is measured in the side's process after
its steps, before anything else runs there. The sides run one after the other.

Loss agreement: in each TRL side, TRL's first batch, its loss on it and its adapters' initial weights are
captured; execrl's update (``prepare_batch`` + ``policy_update``) runs on exactly those completions with a
LoRA model holding the same initial adapters (``bench/_trl_side.check_loss_agreement``). With one
iteration the ratio is 1, so the loss value checks advantages and aggregation; the gradient norm (adapters
only on both sides) and per-token log-probs check the LoRA forward/backward.

Goals, printed and in the JSON: LoRA's peak RSS below full fine-tuning's; TRL + PEFT's step seconds over
execrl + LoRA's >= 2 at each rank.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from execrl.bench import train as bench_train
from execrl.bench._report import write_report

__all__ = ["add_arguments", "run", "side_names"]

_FORWARDED = ("steps", "prompts", "samples", "max_new_tokens", "loss_type", "old_logprobs", "learning_rate",
              "threads", "seed")  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    bench_train.add_arguments(parser, scale=False)  # its --ranks are LoRA ranks
    parser.add_argument(
        "--ranks", type=int, nargs="+", default=[16, 64], help="LoRA ranks, each on both sides (16 64)"
    )
    parser.add_argument(
        "--side", default=None, help=argparse.SUPPRESS
    )  # internal: run one side, write --json


def side_names(ranks: list[int]) -> list[str]:
    return ["execrl-full", *(f"execrl-lora-{r}" for r in ranks), *(f"trl-peft-{r}" for r in ranks)]


def run(args: argparse.Namespace) -> int:
    if args.side is not None:
        return _run_side(args)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    sides: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="execrl-bench-lora-") as tmp:
        for name in side_names(args.ranks):
            sides[name] = _spawn_side(name, args, Path(tmp) / f"{name}.json")
    report = _report(args, sides)
    report["wall_s"] = time.perf_counter() - started
    report["host"] = {"cpus": os.cpu_count(), "load_avg_1m_before": load_before,
                      "load_avg_1m_after": os.getloadavg()[0]}  # fmt: skip
    _print_table(report)
    if args.json is not None:
        write_report(args.json, report)
        print(f"wrote {args.json}")
    return 0 if report["loss_agree"] else 1


def _spawn_side(name: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "execrl.cli", "bench", "lora", "--side", name, "--json", str(out)]
    for key in _FORWARDED:
        command += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    if args.model_dir is not None:
        command += ["--model-dir", str(args.model_dir)]
    print(f"[bench lora] {name} ...", file=sys.stderr, flush=True)
    done = subprocess.run(command, start_new_session=True, check=False)
    if done.returncode != 0 or not out.is_file():
        raise SystemExit(f"execrl bench lora: side {name} failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _run_side(args: argparse.Namespace) -> int:
    """One side in this process: its timings, peak RSS and trainable parameters (and TRL's loss checks)."""
    import torch

    from execrl.rollout.models import default_model_dir
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.tasks import load_suite

    torch.set_num_threads(args.threads)
    kind, _, rank_text = args.side.rpartition("-") if args.side != "execrl-full" else ("execrl-full", "", "")
    rank = int(rank_text) if rank_text else None
    model_dir = args.model_dir or default_model_dir()
    tasks = bench_train.pick_tasks(load_suite("functions", "train"), args.prompts)
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        reward = bench_train.CodeReward(tasks=tasks, sandbox=sandbox, config=bench_train._reward_config())
        if kind == "trl-peft":
            assert rank is not None
            result = _trl_side(model_dir, reward, rank, args)
        else:
            result = _execrl_side(model_dir, reward, rank, args)
    write_report(args.json, {"side": args.side, "rank": rank, **result})
    return 0


def _execrl_side(model_dir: Path, reward: Any, rank: int | None, args: argparse.Namespace) -> dict[str, Any]:
    from execrl.bench._trl_side import execrl_trainer_config
    from execrl.rollout import load_model_and_tokenizer
    from execrl.trainer.lora import add_adapters, trainable_parameter_count

    model, tokenizer = load_model_and_tokenizer(model_dir)
    if rank is not None:
        add_adapters(model, _lora_settings(rank))
    config = execrl_trainer_config(args.loss_type, learning_rate=args.learning_rate,
                                   max_new_tokens=args.max_new_tokens)  # fmt: skip
    timing = bench_train.run_execrl(model, tokenizer, reward, config, args)
    return {"timing": timing.summary(), "step_s": timing.step_s, "peak_rss_mb": _peak_rss_mb(),
            "trainable_params": trainable_parameter_count(model)}  # fmt: skip


def _lora_settings(rank: int) -> Any:
    from execrl.trainer import LoraSettings

    return LoraSettings(rank=rank, alpha=2 * rank, dropout=0.0)


def _trl_side(model_dir: Path, reward: Any, rank: int, args: argparse.Namespace) -> dict[str, Any]:
    """TRL's GRPOTrainer on a PeftModel with the same adapters; then execrl's loss on TRL's first batch."""
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    from execrl.bench._trl_side import TRLSettings, check_loss_agreement, run_trl
    from execrl.rollout import load_model_and_tokenizer
    from execrl.trainer.lora import add_adapters, load_adapter_state_dict, trainable_parameter_count

    settings = _lora_settings(rank)
    base, tokenizer = load_model_and_tokenizer(model_dir)
    peft_config = LoraConfig(r=rank, lora_alpha=settings.alpha, lora_dropout=0.0, bias="none",
                             target_modules=list(settings.target_modules), task_type="CAUSAL_LM")  # fmt: skip
    peft_model = get_peft_model(base, peft_config)
    initial = {k.removeprefix("base_model.model."): v.detach().clone()
               for k, v in get_peft_model_state_dict(peft_model).items()}  # fmt: skip
    trainable = trainable_parameter_count(peft_model)
    trl = TRLSettings(loss_type=args.loss_type, learning_rate=args.learning_rate, prompts=args.prompts,
                      samples_per_prompt=args.samples, max_new_tokens=args.max_new_tokens,
                      total_steps=args.steps + 1, seed=args.seed)  # fmt: skip
    prompts = bench_train.prompt_texts(reward.tasks)
    with tempfile.TemporaryDirectory(prefix="execrl-bench-trl-peft-") as out_dir:
        result = run_trl(peft_model, tokenizer, prompts, reward.rewards, trl, Path(out_dir))
    timing = bench_train.SideTiming(result.step_times_s, result.generated_tokens, warmup_steps=1)
    peak = _peak_rss_mb()  # before the loss check loads another model
    del peft_model, base
    ours, _ = load_model_and_tokenizer(model_dir)
    add_adapters(ours, settings)
    load_adapter_state_dict(ours, initial)  # TRL's initial adapters (B = 0, A as peft drew it)
    checks = check_loss_agreement(ours, result.captured, learning_rate=args.learning_rate)
    return {"timing": timing.summary(), "step_s": timing.step_s, "peak_rss_mb": peak,
            "trainable_params": trainable, "loss_checks": [asdict(c) for c in checks]}  # fmt: skip


def _report(args: argparse.Namespace, sides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    import peft
    import torch
    import transformers
    import trl

    full = sides["execrl-full"]
    per_rank = {}
    for r in args.ranks:
        ours, theirs = sides[f"execrl-lora-{r}"], sides[f"trl-peft-{r}"]
        head = next(c for c in theirs["loss_checks"] if c["loss_type"] == args.loss_type)
        per_rank[str(r)] = {
            "ratio_vs_trl_peft": theirs["step_s"] / ours["step_s"],
            "peak_rss_vs_full": ours["peak_rss_mb"] / full["peak_rss_mb"],
            "loss_trl_peft": head["loss_trl"], "loss_execrl": head["loss_execrl"],
            "loss_abs_diff": head["loss_abs_diff"], "loss_agree": head["ok"],
            "grad_norm_trl_peft": head["grad_norm_trl"], "grad_norm_execrl": head["grad_norm_execrl"],
            "logprob_max_abs_diff": head["logprob_max_abs_diff"],
            "goal_peak_rss_below_full": ours["peak_rss_mb"] < full["peak_rss_mb"],
            "goal_2x_trl_peft": theirs["step_s"] / ours["step_s"] >= 2.0,
        }  # fmt: skip
    return {
        "benchmark": "lora",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        **{k: getattr(args, k) for k in _FORWARDED},
        "ranks": args.ranks,
        "sides": sides,
        "by_rank": per_rank,
        "loss_agree": all(v["loss_agree"] for v in per_rank.values()),
        "notes": [*bench_train._notes(args), "each side in its own process and session; peak RSS is that "
                  "process's ru_maxrss after its steps (model load, sandbox client and all)"],
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "trl": trl.__version__, "peft": peft.__version__},
    }  # fmt: skip


def _print_table(report: dict[str, Any]) -> None:
    print(
        f"execrl bench lora: {report['prompts']} prompts x {report['samples']} samples x "
        f"{report['max_new_tokens']} new tokens, {report['threads']} threads, {report['steps']} timed steps"
    )
    print(f"{'side':<16} {'step_s':>8} {'peak_rss_mb':>12} {'trainable':>12} {'tokens/step':>11}")
    for name, s in report["sides"].items():
        tokens = s["timing"]["generated_tokens_per_timed_step"]
        print(
            f"{name:<16} {s['step_s']:>8.2f} {s['peak_rss_mb']:>12.0f} {s['trainable_params']:>12,} {tokens:>11.0f}"
        )
    for rank, r in report["by_rank"].items():
        print(
            f"rank {rank}: TRL+PEFT step / execrl+LoRA step = {r['ratio_vs_trl_peft']:.2f}x "
            f"(goal >= 2: {'met' if r['goal_2x_trl_peft'] else 'NOT met'}); peak RSS vs full FT "
            f"{r['peak_rss_vs_full']:.2f} (goal < 1: {'met' if r['goal_peak_rss_below_full'] else 'NOT met'}); "
            f"first-batch loss TRL+PEFT {r['loss_trl_peft']:.6f} execrl {r['loss_execrl']:.6f} "
            f"|diff| {r['loss_abs_diff']:.2e} ({'ok' if r['loss_agree'] else 'NO'}); grad norm "
            f"{r['grad_norm_trl_peft']:.6f} vs {r['grad_norm_execrl']:.6f}"
        )
