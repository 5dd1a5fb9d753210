"""`execrl bench train`: one GRPO training step of execrl vs TRL's ``GRPOTrainer``, same run, same work.

With ``--ranks 1,2`` or ``--precision fp32,bf16-mixed`` it measures the update alone instead (one process
vs FSDP2 ranks, fp32 vs bf16-mixed, on one batch): ``train_scale.py``.

Both sides train SmolLM2-135M-Instruct (float32, CPU, same torch thread count) on the same prompts (built-in
``functions`` tasks, one user message each, rendered with the chat template), sample ``--samples``
completions of up to ``--max-new-tokens`` tokens per prompt at temperature 1 (no top-k/top-p), score them
with the same reward function (execrl's code reward: the completion's code runs against the task's tests
in execrl's sandbox), and take one AdamW step per batch with the same learning rate, no KL term, clip 0.2.

What one step is on each side:

- execrl (``recipes/grpo.py``'s ``train_step`` itself, on a ``Run`` whose static scheduler hands out the
  benchmark's tasks every step): encode prompts, ``HFEngine`` group sampling (one prefill per prompt, its
  KV cache shared by the group, finished rows dropped; seeded by ``execrl.seeding`` as in a run), sandbox
  scoring, GRPO advantages, then forward + backward + fused AdamW step, where each prompt's tokens run
  through the trunk once per micro-batch (``execrl.trainer.prefix``), and the step's metrics. Old
  log-probs come from the engine (``--old-logprobs rollout``, default; ``recompute`` adds a no-grad
  forward, which TRL skips in this setting).
- TRL: tokenise prompts, ``model.generate`` (each prompt prefilled once per sample), the same reward,
  advantages, forward + backward + step (old log-probs are ``per_token_logps.detach()`` with one iteration).

Timing: each side runs ``--steps`` + 1 steps; the first (warm-up; TRL also records its batch there) is
excluded. A step is measured from before generation to after the optimizer step (TRL: ``on_step_begin`` to
``on_step_end``). The two sides sample different completions, so their token counts differ; both are
reported. The sides run one after the other in one process; the machine may be shared (load is reported).

Loss agreement: TRL's first batch (prompt/completion ids, masks, rewards) and the loss TRL returned on it
are captured; execrl's update step (``prepare_batch`` + ``policy_update``, advantages with TRL's std epsilon
1e-4) is run on exactly those completions from a fresh copy of the initial weights. Loss types map as
TRL ``dapo``/``bnpo`` -> ``token-mean``, ``grpo`` -> ``seq-mean-token-mean``, ``dr_grpo`` ->
``seq-mean-token-sum-norm`` divided by sequences with ``max_completion_length``. Limit, stated plainly:
with one iteration the importance ratio is exactly 1, so the loss VALUE only checks advantages and
aggregation: token-mean gives -sum_i A_i |o_i| / T (0 when every completion has the same length, e.g. all
truncated at ``--max-new-tokens``), and ``grpo`` (seq-mean-token-mean) gives -mean_i A_i, which is 0 for
complete groups. The gradient norm of the configured loss type (TRL's real backward vs execrl's) and the
per-token log-probs are reported too; they check the forward/backward path.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.bench._report import trl_versions_and_host, write_report
from execrl.bench._tasks import pick_tasks

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from execrl.bench._trl_side import CapturedBatch, LossCheck
    from execrl.components.run import Run
    from execrl.rewards import RewardConfig, Score
    from execrl.rollout import Engine, RolloutBatch, SamplingParams
    from execrl.sandbox import Sandbox
    from execrl.tasks import Task
    from execrl.trainer import TrainerConfig

__all__ = ["CodeReward", "SideTiming", "add_arguments", "pick_tasks", "prompt_texts", "run", "run_execrl"]

LOSS_TYPES = ("dapo", "bnpo", "grpo", "dr_grpo")  # TRL loss types execrl reproduces (see _trl_side)


def add_arguments(parser: argparse.ArgumentParser, *, scale: bool = True) -> None:
    """The benchmark's flags; ``scale=False`` leaves out ``--ranks``/``--precision`` (``bench lora`` reuses
    the rest and has its own ``--ranks``, LoRA ranks)."""
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument(
        "--steps", type=int, default=3, help="timed steps per side, after 1 warm-up (default 3)"
    )
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step (default 4)")
    parser.add_argument("--samples", type=int, default=4, help="samples per prompt (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per completion (default 64)")
    parser.add_argument(
        "--loss-type",
        choices=LOSS_TYPES,
        default="dapo",
        help="TRL loss_type of the run (default TRL's 'dapo'); every type's loss is checked on the first batch",
    )
    parser.add_argument(
        "--old-logprobs",
        choices=("recompute", "rollout"),
        default="rollout",
        help="execrl's behaviour log-probs: 'rollout' takes the engine's (no extra forward), as recipes/grpo.py "
        "does with one PPO epoch and no top-k/top-p (default); 'recompute' adds a full no-grad forward and "
        "the per-step log-prob check on the first group",
    )
    parser.add_argument("--learning-rate", type=float, default=1e-6, help="both sides (default 1e-6)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads for both sides")
    parser.add_argument("--model-dir", type=Path, default=None, help="model directory (default: SmolLM2)")
    parser.add_argument("--seed", type=int, default=0)
    if not scale:
        return
    parser.add_argument(
        "--ranks",
        default=None,
        help="e.g. 1,2: instead of the TRL comparison, the update alone on one sampled batch in one process "
        "(1) and FSDP2 over N ranks, per-rank model state and peak RSS, loss compared (train_scale.py)",
    )
    parser.add_argument(
        "--precision",
        default=None,
        help="e.g. fp32,bf16-mixed: the update alone in one process in each precision, same batch (with "
        "--ranks: the rank counts run in fp32)",
    )


@dataclass(frozen=True)
class CodeReward:
    """The reward both sides call: execrl's ``score_batch`` in one shared sandbox."""

    tasks: tuple[Task, ...]
    sandbox: Sandbox
    config: RewardConfig

    def score(self, task_indices: Sequence[int], texts: Sequence[str]) -> list[Score]:
        from execrl.rewards import score_batch

        return score_batch(
            [self.tasks[i] for i in task_indices], list(texts), sandbox=self.sandbox, config=self.config
        )

    def rewards(self, task_indices: Sequence[int], texts: Sequence[str]) -> list[float]:
        return [s.reward for s in self.score(task_indices, texts)]


def prompt_texts(tasks: Sequence[Task]) -> list[str]:
    """Each task's prompt as one user message; both sides render it with the chat template."""
    texts = []
    for task in tasks:
        if not isinstance(task.prompt, str):
            raise ValueError(f"task {task.id}: the benchmark needs a plain-text prompt, got chat messages")
        texts.append(task.prompt)
    return texts


@dataclass(frozen=True)
class SideTiming:
    step_times_s: tuple[float, ...]  # every step, warm-up first
    generated_tokens: tuple[int, ...]
    warmup_steps: int

    @property
    def timed_s(self) -> tuple[float, ...]:
        return self.step_times_s[self.warmup_steps :]

    @property
    def step_s(self) -> float:
        return statistics.median(self.timed_s)

    def summary(self) -> dict[str, Any]:
        timed_tokens = self.generated_tokens[self.warmup_steps :]
        return {
            "step_s": self.step_s,
            "step_s_mean": statistics.fmean(self.timed_s),
            "step_times_s": list(self.step_times_s),
            "warmup_steps_excluded": self.warmup_steps,
            "generated_tokens": list(self.generated_tokens),
            "generated_tokens_per_timed_step": statistics.fmean(timed_tokens),
            "tokens_per_s": sum(timed_tokens) / sum(self.timed_s),
        }


def run_execrl(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    reward: CodeReward,
    config: TrainerConfig,
    args: argparse.Namespace,
) -> SideTiming:
    """``recipes/grpo.py``'s ``train_step`` (rollout, sandbox scoring, advantages, update, metrics),
    ``--steps`` + 1 times, on a run holding the benchmark's model, tasks and trainer config."""
    from execrl.components.sampling import StepSampler
    from execrl.distributed import InProcessExecutor
    from execrl.episodes import LocalBackend, SingleTurn
    from execrl.recipes.grpo import train_step

    with tempfile.TemporaryDirectory(prefix="execrl-bench-train-") as run_dir:
        run = _bench_run(model, tokenizer, reward, config, args, Path(run_dir))
        engine = _CountingEngine(run.engine)
        environment = SingleTurn(reward.sandbox, reward.config)
        sampler = StepSampler(environment, LocalBackend(engine, tokenizer), _sampling(args), seed=args.seed)
        executor = InProcessExecutor(sampler)
        times: list[float] = []
        for step in range(args.steps + 1):
            start = time.perf_counter()
            train_step(run, step, executor=executor, environment=environment)
            times.append(time.perf_counter() - start)
            _progress("execrl", step, times[-1], engine.generated[-1])
    return SideTiming(step_times_s=tuple(times), generated_tokens=tuple(engine.generated), warmup_steps=1)


def _sampling(args: argparse.Namespace) -> SamplingParams:
    from execrl.rollout import SamplingParams

    return SamplingParams(
        samples_per_prompt=args.samples,
        max_new_tokens=args.max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
    )


def _bench_run(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    reward: CodeReward,
    config: TrainerConfig,
    args: argparse.Namespace,
    run_dir: Path,
) -> Run:
    """The ``Run`` the recipe's step reads, from ``build_run`` with the benchmark's model, trainer config and
    a static scheduler over its tasks (each step draws all of them, as TRL's side trains on all of them),
    no reward audit."""
    from execrl.components.run import RunOverrides, build_run
    from execrl.config import validate_config
    from execrl.scheduler import StaticScheduler

    run_config = validate_config(
        {
            "run": {"seed": args.seed},
            "rollout": {"prompts_per_step": args.prompts, "samples_per_prompt": args.samples,
                        "max_new_tokens": args.max_new_tokens, "temperature": 1.0},
            "audit": {"enabled": False},
        }
    )  # fmt: skip
    tasks = StaticScheduler({"functions": list(reward.tasks)}, {"functions": 1.0}, seed=args.seed)
    overrides = RunOverrides(
        model=model, tokenizer=tokenizer, trainer_config=config, tasks=tasks, run_dir=run_dir
    )
    run = build_run(run_config, overrides=overrides)
    run.old_logprobs_from_rollout = args.old_logprobs == "rollout"
    return run


@dataclass
class _CountingEngine:
    """The run's engine, keeping each generate call's generated-token count for the report."""

    engine: Engine
    generated: list[int] = field(default_factory=list)

    def generate(self, prompts: Any, params: SamplingParams) -> RolloutBatch:
        rollout = self.engine.generate(prompts, params)
        self.generated.append(rollout.stats.generated_tokens)
        return rollout


def _progress(side: str, step: int, seconds: float, tokens: int) -> None:
    label = "warm-up" if step == 0 else f"step {step}"
    print(f"[bench train] {side} {label}: {seconds:.2f} s, {tokens} tokens", file=sys.stderr, flush=True)


def _reward_config() -> RewardConfig:
    """Partial credit plus penalties, so that a group of short completions rarely has all-equal rewards."""
    from execrl.rewards import RewardConfig

    return RewardConfig(mode="partial", no_code_penalty=0.5, syntax_error_penalty=0.25)


def _notes(args: argparse.Namespace) -> list[str]:
    old = (
        "a full no-grad old-log-prob forward (--old-logprobs recompute; TRL skips it)"
        if args.old_logprobs == "recompute"
        else "old log-probs taken from the engine, the generation/training log-prob check read off the "
        "update's first forward, as recipes/grpo.py does with one PPO epoch"
    )
    return [
        "execrl step = encode prompts + HFEngine group sampling (one prefill per prompt, its KV cache shared "
        f"by the group, finished rows dropped) + sandbox scoring + GRPO advantages + {old} + "
        "forward/backward/AdamW step with each prompt computed once per micro-batch + the step's metrics "
        "(recipes.grpo.train_step itself, seeded by execrl.seeding; a static scheduler draws the benchmark's "
        "tasks each step, in its own order)",
        "TRL step = tokenise prompts + model.generate (prompt prefilled per sample) + the same reward + "
        "advantages + forward/backward/AdamW step (old log-probs = detached current ones, num_iterations=1)",
        "same reward callable on both sides: execrl.rewards.score_batch in one shared sandbox "
        "(mode=partial, no_code_penalty=0.5, syntax_error_penalty=0.25)",
        f"torch threads = {args.threads} for both; float32; TRL bf16 and gradient checkpointing off, "
        "constant LR, no logging/saving",
        "one warm-up step per side excluded (TRL's warm-up also records the loss-check batch); the sides run "
        "sequentially in one process and sample different completions (token counts differ)",
    ]


def run(args: argparse.Namespace) -> int:
    if (
        getattr(args, "ranks", None) is not None or getattr(args, "precision", None) is not None
    ):  # update only
        from execrl.bench.train_scale import run_scale

        return run_scale(args)
    import torch

    from execrl.bench._trl_side import check_loss_agreement, execrl_trainer_config
    from execrl.rollout import load_model_and_tokenizer
    from execrl.rollout.models import default_model_dir
    from execrl.tasks import load_suite

    if min(args.steps, args.prompts, args.samples, args.max_new_tokens, args.threads) < 1 or args.samples < 2:
        raise SystemExit("--steps, --prompts, --max-new-tokens, --threads must be >= 1 and --samples >= 2")
    torch.set_num_threads(args.threads)
    model_dir = args.model_dir or default_model_dir()
    tasks = pick_tasks(load_suite("functions", "train"), args.prompts)
    config = execrl_trainer_config(
        args.loss_type, learning_rate=args.learning_rate, max_new_tokens=args.max_new_tokens
    )
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    ours, theirs, captured = _run_sides(model_dir, tasks, config, args)
    initial, tokenizer = load_model_and_tokenizer(model_dir)
    checks = check_loss_agreement(initial, captured, learning_rate=args.learning_rate)
    report = _report(args, model_dir, tasks, ours, theirs, checks)
    report["same_prompt_token_ids"] = _same_prompts(captured, tokenizer, tasks)
    report["first_batch_rewards"] = [float(r) for r in captured.rewards]
    report["wall_s"] = time.perf_counter() - started
    report["host"]["load_avg_1m_before"] = load_before
    _print_table(report, checks)
    if args.json is not None:
        write_report(args.json, report)
        print(f"wrote {args.json}")
    return 0 if all(c.ok for c in checks) else 1


def _run_sides(
    model_dir: Path, tasks: tuple[Task, ...], config: TrainerConfig, args: argparse.Namespace
) -> tuple[SideTiming, SideTiming, CapturedBatch]:
    """execrl's loop, then TRL's trainer, each on its own fresh copy of the model, one shared sandbox."""
    from execrl.bench._trl_side import TRLSettings, run_trl
    from execrl.rollout import load_model_and_tokenizer
    from execrl.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        reward = CodeReward(tasks=tasks, sandbox=sandbox, config=_reward_config())
        model, tokenizer = load_model_and_tokenizer(model_dir)
        ours = run_execrl(model, tokenizer, reward, config, args)
        del model
        gc.collect()
        trl_model, _ = load_model_and_tokenizer(model_dir)
        settings = TRLSettings(
            loss_type=args.loss_type,
            learning_rate=args.learning_rate,
            prompts=args.prompts,
            samples_per_prompt=args.samples,
            max_new_tokens=args.max_new_tokens,
            total_steps=args.steps + 1,
            seed=args.seed,
        )
        prompts = prompt_texts(tasks)
        with tempfile.TemporaryDirectory(prefix="execrl-bench-trl-") as out_dir:
            result = run_trl(trl_model, tokenizer, prompts, reward.rewards, settings, Path(out_dir))
    del trl_model
    gc.collect()
    theirs = SideTiming(result.step_times_s, result.generated_tokens, warmup_steps=1)
    return ours, theirs, result.captured


def _same_prompts(captured: CapturedBatch, tokenizer: PreTrainedTokenizerBase, tasks: Sequence[Task]) -> bool:
    """Whether TRL's first batch holds exactly execrl's chat-encoded prompt tokens (left padding removed)."""
    from execrl.rollout import encode_prompts

    trl_prompts = {
        tuple(int(t) for t in ids[mask.bool()])
        for ids, mask in zip(captured.prompt_ids, captured.prompt_mask, strict=True)
    }
    return trl_prompts == {tuple(p) for p in encode_prompts(tokenizer, prompt_texts(tasks))}


def _report(
    args: argparse.Namespace,
    model_dir: Path,
    tasks: tuple[Task, ...],
    ours: SideTiming,
    theirs: SideTiming,
    checks: Sequence[LossCheck],
) -> dict[str, Any]:

    return {
        "benchmark": "train",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_dir": str(model_dir),
        "tasks": [t.id for t in tasks],
        "prompts": args.prompts,
        "samples_per_prompt": args.samples,
        "max_new_tokens": args.max_new_tokens,
        "loss_type": args.loss_type,
        "execrl_old_logprobs": args.old_logprobs,
        "learning_rate": args.learning_rate,
        "threads": args.threads,
        "steps_timed": args.steps,
        "execrl": ours.summary(),
        "trl": theirs.summary(),
        "execrl_step_s": ours.step_s,
        "trl_step_s": theirs.step_s,
        "ratio_vs_trl": theirs.step_s / ours.step_s,
        "loss_checks": [asdict(c) for c in checks],
        **_headline_check(checks, args.loss_type),
        "notes": _notes(args),
        **trl_versions_and_host(),
    }


def _headline_check(checks: Sequence[LossCheck], loss_type: str) -> dict[str, Any]:
    check = next(c for c in checks if c.loss_type == loss_type)
    return {
        "loss_trl": check.loss_trl,
        "loss_execrl": check.loss_execrl,
        "loss_abs_diff": check.loss_abs_diff,
        "loss_agree": check.ok,
        "grad_norm_trl": check.grad_norm_trl,
        "grad_norm_execrl": check.grad_norm_execrl,
        "logprob_max_abs_diff": check.logprob_max_abs_diff,
    }


def _print_table(report: dict[str, Any], checks: Sequence[LossCheck]) -> None:
    print(
        f"execrl bench train: {report['prompts']} prompts x {report['samples_per_prompt']} samples x "
        f"{report['max_new_tokens']} new tokens, {report['threads']} threads, loss_type {report['loss_type']}, "
        f"{report['steps_timed']} timed steps (+1 warm-up)"
    )
    print(f"{'side':<8} {'step_s':>8} {'steps (s)':<28} {'tokens/step':>11} {'tok/s':>7}")
    for side in ("execrl", "trl"):
        s = report[side]
        steps = ", ".join(f"{t:.2f}" for t in s["step_times_s"][s["warmup_steps_excluded"] :])
        print(
            f"{side:<8} {s['step_s']:>8.2f} {steps:<28} {s['generated_tokens_per_timed_step']:>11.0f} "
            f"{s['tokens_per_s']:>7.1f}"
        )
    print(f"ratio_vs_trl (TRL step_s / execrl step_s): {report['ratio_vs_trl']:.2f}x")
    print(f"same prompt token ids on both sides: {report['same_prompt_token_ids']}")
    print("loss on TRL's first batch (initial weights):")
    print(f"{'loss_type':<9} {'execrl':<24} {'loss_trl':>11} {'loss_execrl':>11} {'abs_diff':>9} ok")
    for c in checks:
        print(
            f"{c.loss_type:<9} {c.execrl_aggregation:<24} {c.loss_trl:>11.6f} {c.loss_execrl:>11.6f} "
            f"{c.loss_abs_diff:>9.2e} {'yes' if c.ok else 'NO'}"
        )
    head = next(c for c in checks if c.loss_type == report["loss_type"])
    grad_trl = head.grad_norm_trl if head.grad_norm_trl is not None else math.nan
    print(
        f"grad norm ({head.loss_type}): TRL {grad_trl:.6f}, execrl {head.grad_norm_execrl:.6f}; "
        f"log-prob max |diff| {head.logprob_max_abs_diff:.2e}; advantages max |diff| "
        f"{head.advantage_max_abs_diff:.2e}"
    )
    for note in report["notes"]:
        print(f"note: {note}")
    host = report["host"]
    print(
        f"load average (1 min): {host['load_avg_1m_before']:.1f} before, {host['load_avg_1m_after']:.1f} after"
    )
