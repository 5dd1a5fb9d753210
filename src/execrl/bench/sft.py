"""``execrl bench sft``: supervised fine-tuning steps of execrl (``recipes/sft.py``) vs TRL's ``SFTTrainer``
on the same rows, SmolLM2-135M-Instruct, float32, CPU, the same thread count; one run, the sides one after
the other, each on its own fresh copy of the model.

The rows: SFT rows ``execrl tasks transcripts`` writes, half from the ``tools`` suite's train split (the
reference cells as python calls, run for real in sandbox sessions: a long system prompt with the tool
declaration, short assistant turns) and half from ``functions`` (a prompt and a code answer), rendered by
``tools/render.py`` (Hermes calls) to token ids and the assistant-only loss mask. Both sides get exactly
those ids and masks (TRL pre-tokenised: ``input_ids`` + ``assistant_masks``).

What one step is on each side, with the same packing capacity ``--tokens-per-row`` and
``--rows-per-step`` packed rows per optimizer step:

- execrl: ``recipes/sft.py``'s ``train_step`` itself: best-fit-decreasing rows without padding, a prefix
  several conversations of a row begin with (the ``tools`` rows' system prompt and tool declarations)
  computed once (``optim.share_prefix_tokens``, exact), attention per conversation (``trainer/sft.py``:
  causal SDPA on each conversation's span), the cross-entropy of the assistant tokens only, one backward
  per row, clip, fused AdamW;
- TRL 1.16: ``packing=True, packing_strategy="bfd"`` (padding-free: per-sequence position ids), one packed
  sequence per micro-batch, ``gradient_accumulation_steps = rows_per_step`` (its loss normalised by the
  step's label tokens, as execrl's), attention ``sdpa`` (transformers builds a block-diagonal mask from the
  position ids on CPU; FlashAttention's varlen kernels are CUDA-only), its fused LM head over the label
  positions, its entropy and accuracy metrics, fused AdamW, constant LR.

Timing: each side runs ``--steps`` + 1 optimizer steps, the first (warm-up) excluded; tokens/s is the timed
steps' tokens over their time (tokens: every token of the packed rows, prompts included). The sides pack
the same conversations into their own rows, so a step's token count differs a little; both are reported.

Loss agreement: TRL's first micro-batch (its ids, position ids and labels) and the loss TRL returned on it
are captured; execrl's loss (``token_losses`` over TRL's normaliser) is computed on exactly that batch from
a fresh copy of the initial weights.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.bench._report import trl_versions_and_host, write_report

if TYPE_CHECKING:
    from execrl.bench._trl_sft_side import TRLSftResult
    from execrl.tools.render import RenderedConversation

__all__ = ["add_arguments", "run"]

LOSS_TOLERANCE = 1e-4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument(
        "--steps", type=int, default=3, help="timed steps per side, after 1 warm-up (default 3)"
    )
    parser.add_argument("--rows", type=int, default=96, help="conversations (half tools, half functions)")
    parser.add_argument("--tokens-per-row", type=int, default=2048, help="packing capacity, both sides")
    parser.add_argument("--rows-per-step", type=int, default=2, help="packed rows per optimizer step")
    parser.add_argument("--share-prefix-tokens", type=int, default=32,
                        help="execrl: shared prefixes of at least this many tokens computed once; 0 = off")  # fmt: skip
    parser.add_argument("--learning-rate", type=float, default=1e-5, help="both sides (default 1e-5)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads for both sides")
    parser.add_argument("--model-dir", type=Path, default=None, help="model directory (default: SmolLM2)")
    parser.add_argument("--seed", type=int, default=0)


@dataclass(frozen=True)
class Side:
    step_times_s: tuple[float, ...]
    step_tokens: tuple[int, ...]  # the conversations' tokens of each step
    computed_tokens: tuple[int, ...] = ()  # execrl: the tokens run through the model (shared prefixes once)

    @property
    def tokens_per_s(self) -> float:
        return sum(self.step_tokens[1:]) / sum(self.step_times_s[1:])

    @property
    def median_tokens_per_s(self) -> float:
        """The median step's rate: robust to a step another job on the machine slowed down."""
        return statistics.median(
            n / t for n, t in zip(self.step_tokens[1:], self.step_times_s[1:], strict=True)
        )

    def summary(self) -> dict[str, Any]:
        computed = {"computed_tokens": list(self.computed_tokens)} if self.computed_tokens else {}
        return {"step_times_s": list(self.step_times_s), "step_tokens": list(self.step_tokens), **computed,
                "warmup_steps_excluded": 1, "step_s_median": statistics.median(self.step_times_s[1:]),
                "tokens_per_s": self.tokens_per_s, "median_step_tokens_per_s": self.median_tokens_per_s}  # fmt: skip


def build_rows(tokenizer: Any, count: int, capacity: int) -> list[RenderedConversation]:
    """``count`` reference transcripts (half ``tools``, half ``functions``), rendered, at most ``capacity``
    tokens each."""
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.tasks import load_suite
    from execrl.tools import ToolConfig
    from execrl.tools.render import render_conversation
    from execrl.tools.transcripts import reference_row

    tasks = (
        load_suite("tools", "train")[: count // 2] + load_suite("functions", "train")[: count - count // 2]
    )
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        rows = [reference_row(t, sandbox, suite="bench", config=ToolConfig()) for t in tasks]
    rendered = [render_conversation(tokenizer, r["messages"], tools=r.get("tools")) for r in rows if r]
    return [r for r in rendered if len(r.token_ids) <= capacity]


def run_execrl(model_dir: Path, rows: list[RenderedConversation], args: argparse.Namespace) -> Side:
    """``recipes/sft.py``'s own setup and ``train_step`` on the rows (a run directory in a temp dir)."""
    from execrl.config import SftConfig
    from execrl.recipes.sft import SftData, setup_run, train_step
    from execrl.recipes.sft_data import RowSet
    from execrl.rollout import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(model_dir)
    with tempfile.TemporaryDirectory(prefix="execrl-bench-sft-") as out_dir:
        config = SftConfig.model_validate({
            "run": {"output_dir": out_dir, "total_steps": args.steps + 1, "seed": args.seed},
            "model": {"path": str(model_dir), "torch_threads": args.threads},
            "optim": {"learning_rate": args.learning_rate, "lr_schedule": "constant",
                      "tokens_per_row": args.tokens_per_row, "rows_per_step": args.rows_per_step,
                      "share_prefix_tokens": args.share_prefix_tokens},
            "eval": {"enabled": False}, "data": {"heldout_share": 0.0},
        })  # fmt: skip
        data = SftData(RowSet(tuple(rows), ("bench",) * len(rows), ()), RowSet((), (), ()), "bench")
        run = setup_run(config, data, model, tokenizer, None)
        times, tokens, computed = [], [], []
        for step in range(args.steps + 1):
            metrics = train_step(run, step)
            times.append(metrics["perf/step_s"])
            tokens.append(int(metrics["train/tokens"]))
            computed.append(int(metrics["train/computed_tokens"]))
            _progress("execrl", step, times[-1], tokens[-1])
    return Side(tuple(times), tuple(tokens), tuple(computed))


def run_trl(model_dir: Path, rows: list[RenderedConversation], args: argparse.Namespace) -> TRLSftResult:
    from execrl.bench._trl_sft_side import TRLSftSettings, run_trl_sft
    from execrl.rollout import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(model_dir)
    settings = TRLSftSettings(max_length=args.tokens_per_row, rows_per_step=args.rows_per_step,
                              learning_rate=args.learning_rate, total_steps=args.steps + 1, seed=args.seed)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="execrl-bench-trl-sft-") as out_dir:
        result = run_trl_sft(
            model, tokenizer, [(r.token_ids, r.loss_mask) for r in rows], settings, Path(out_dir)
        )
    for step, (t, n) in enumerate(zip(result.step_times_s, result.step_tokens, strict=True)):
        _progress("trl", step, t, n)
    return result


def _progress(side: str, step: int, seconds: float, tokens: int) -> None:
    print(f"  {side:<6} step {step}: {seconds:6.2f} s, {tokens} tokens", flush=True)


def run(args: argparse.Namespace) -> int:
    import torch

    from execrl.bench._trl_sft_side import execrl_loss_on_first_batch
    from execrl.rollout import load_model_and_tokenizer
    from execrl.rollout.models import default_model_dir

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    model_dir = args.model_dir or default_model_dir()
    _, tokenizer = load_model_and_tokenizer(model_dir)
    rows = build_rows(tokenizer, args.rows, args.tokens_per_row)
    started = time.perf_counter()
    ours = run_execrl(model_dir, rows, args)
    gc.collect()
    result = run_trl(model_dir, rows, args)
    gc.collect()
    fresh, _ = load_model_and_tokenizer(model_dir)
    loss_execrl = execrl_loss_on_first_batch(fresh, result, share_prefix_tokens=args.share_prefix_tokens)
    theirs = Side(result.step_times_s, result.step_tokens)
    report = _report(args, model_dir, rows, ours, theirs, result, loss_execrl)
    report["host"]["load_avg_1m_before"] = load_before
    report["wall_s"] = time.perf_counter() - started
    _print(report)
    if args.json is not None:
        write_report(args.json, report)
        print(f"wrote {args.json}")
    return 0


def _report(
    args: argparse.Namespace, model_dir: Path, rows: list[RenderedConversation], ours: Side, theirs: Side,
    result: TRLSftResult, loss_execrl: float,
) -> dict[str, Any]:  # fmt: skip

    capacity = args.tokens_per_row
    tokens = sum(len(r.token_ids) for r in rows)
    return {
        "benchmark": "sft",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_dir": str(model_dir),
        "rows": len(rows),
        "row_tokens": tokens,
        "row_target_share": sum(r.loss_tokens for r in rows) / tokens,
        "tokens_per_row": capacity,
        "rows_per_step": args.rows_per_step,
        "steps_timed": args.steps,
        "threads": args.threads,
        "execrl": ours.summary(),
        "trl": theirs.summary(),
        "ratio_vs_trl": ours.tokens_per_s / theirs.tokens_per_s,
        "ratio_vs_trl_median_steps": ours.median_tokens_per_s / theirs.median_tokens_per_s,
        "share_prefix_tokens": args.share_prefix_tokens,
        "execrl_computed_share": sum(ours.computed_tokens) / sum(ours.step_tokens),
        "loss_trl": result.first_loss,
        "loss_execrl": loss_execrl,
        "loss_abs_diff": abs(result.first_loss - loss_execrl),
        "loss_agree": abs(result.first_loss - loss_execrl) <= LOSS_TOLERANCE,
        "padding_share": {"execrl": 0.0, "trl": 0.0},
        "bin_fill": {
            "execrl": sum(ours.step_tokens) / (len(ours.step_tokens) * args.rows_per_step * capacity),
            "trl": sum(result.microbatch_tokens) / (len(result.microbatch_tokens) * capacity),
        },
        "trl_settings": _trl_settings(args),
        "notes": NOTES,
        **trl_versions_and_host(),
    }


NOTES = [
    "tokens/s: the conversations' tokens (prompts included; a shared prefix counted once per conversation, "
    "as TRL processes it) per second of the timed steps; ratio_vs_trl_median_steps: the median step's rate",
    "execrl computes a prefix several conversations of a row share (the tools block) once "
    "(optim.share_prefix_tokens, exact); --share-prefix-tokens 0 turns it off",
    "padding share: neither side pads (execrl's rows are exactly their conversations; TRL's padding-free "
    "collator flattens each micro-batch of one packed sequence); bin_fill is each side's tokens per row over "
    "the capacity",
    "execrl attends per conversation (causal SDPA per span); TRL's sdpa gets a block-diagonal mask built "
    "from the position ids (no FlashAttention varlen kernel on CPU)",
]


def _trl_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What ``_trl_sft_side.trl_sft_config`` sets, for the report."""
    return {"packing": True, "packing_strategy": "bfd", "padding_free": True, "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": args.rows_per_step, "max_length": args.tokens_per_row,
            "attn_implementation": "sdpa", "optim": "adamw_torch_fused", "lr_scheduler_type": "constant",
            "dtype": "float32"}  # fmt: skip


def _print(report: dict[str, Any]) -> None:
    print(f"execrl bench sft: {report['rows']} rows ({report['row_tokens']} tokens, "
          f"{report['row_target_share']:.1%} assistant), {report['rows_per_step']} rows x "
          f"{report['tokens_per_row']} tokens per step, {report['threads']} threads, "
          f"{report['steps_timed']} timed steps (+1 warm-up)")  # fmt: skip
    for side in ("execrl", "trl"):
        s = report[side]
        steps = ", ".join(f"{t:.2f}" for t in s["step_times_s"][1:])
        print(f"  {side:<6} tokens/s {s['tokens_per_s']:8.1f}   steps (s): {steps}")
    print(f"ratio_vs_trl (execrl tokens/s / TRL tokens/s): {report['ratio_vs_trl']:.2f}x "
          f"(median steps: {report['ratio_vs_trl_median_steps']:.2f}x); execrl computed "
          f"{report['execrl_computed_share']:.0%} of the tokens (shared prefixes once)")  # fmt: skip
    print(f"loss on TRL's first micro-batch: TRL {report['loss_trl']:.6f}, execrl {report['loss_execrl']:.6f}, "
          f"|diff| {report['loss_abs_diff']:.2e} ({'agree' if report['loss_agree'] else 'DISAGREE'})")  # fmt: skip
    print(f"padding share: execrl {report['padding_share']['execrl']:.3f}, TRL {report['padding_share']['trl']:.3f}; "
          f"bin fill: execrl {report['bin_fill']['execrl']:.3f}, TRL {report['bin_fill']['trl']:.3f}")  # fmt: skip
    host = report["host"]
    print(
        f"load average (1 min): {host['load_avg_1m_before']:.1f} before, {host['load_avg_1m_after']:.1f} after"
    )
