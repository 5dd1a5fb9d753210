"""`execrl bench pipeline`: the one-step-off async loop vs the serial loop, same config, same run.

    execrl bench pipeline --json docs/evals/bench_pipeline.json                    # SmolLM2, small budget
    execrl bench pipeline --model tiny --steps 4 --json /tmp/pipeline_tiny.json    # seconds per step

Both sides run the real ``execrl train`` loop (``recipes/grpo.py``; ``recipes/pipeline.py`` for async) for
``--steps`` steps on the built-in ``functions`` suite with the static mixture (so both draw the same
tasks), eval off, one after the other in this process: ``algorithm.async_steps=0`` (serial: generate, score, then train), ``async_steps=1`` (the
rollout of step t+1, generation and sandbox scoring, runs in a background thread while step t trains) and,
with ``--with-streaming``, async plus ``rollout.stream_scoring`` (each group scored while the next one
generates).
Measured: each step's wall time (between consecutive lines of the metrics file), ``ratio_vs_serial`` =
median serial step / median async step over steps 1.. (> 1: async is faster; step 0 is left out because
async cannot overlap it and it carries the warm-up; the whole-loop ratio is reported too, but a shared
machine's load changes between the sides make it unreliable), and both reward curves
over the same steps (async must not learn worse beyond noise; with a few steps the curves mostly show
the noise).

Limits, plainly: on a 2-core machine the background generation and the update share the same two cores
(each PyTorch op of either thread uses the intra-op pool), so the overlap can hide only the time one side
leaves the cores idle: sandbox scoring waits, Python overhead, the GIL-bound parts of generation. The
GPU frameworks' 1.2-2.8x come from separate devices for rollout and training, which this machine lacks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="'tiny' (random 2-layer), or a path")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts-per-step", type=int, default=4)
    parser.add_argument("--samples-per-prompt", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--torch-threads", type=int, default=2)
    parser.add_argument("--sandbox-workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--with-streaming",
        action="store_true",
        help="also run async + streamed scoring (rollout.stream_scoring)",
    )


def _model_path(name: str, workdir: Path) -> str:
    if name != "tiny":
        return name
    from execrl.rollout.models import default_tokenizer, tiny_model

    path = workdir / "tiny-model"
    tiny_model(seed=0).save_pretrained(path)
    default_tokenizer().save_pretrained(path)
    return str(path)


def _run_side(
    args: argparse.Namespace, model: str, out: Path, async_steps: int, stream: bool
) -> dict[str, Any]:
    from execrl.config import load_config
    from execrl.recipes import train

    overrides = [
        f"model.path={model}", f"run.output_dir={out}", f"run.name=async{async_steps}",
        f"run.total_steps={args.steps}", f"run.seed={args.seed}", "eval.enabled=false",
        "telemetry.tensorboard=false", "telemetry.default_alarms=false", "scheduler.mode=static",
        'tasks.suites={functions=1.0}', f"rollout.prompts_per_step={args.prompts_per_step}",
        f"rollout.samples_per_prompt={args.samples_per_prompt}", f"rollout.max_new_tokens={args.max_new_tokens}",
        f"model.torch_threads={args.torch_threads}", f"sandbox.workers={args.sandbox_workers}",
        f"algorithm.async_steps={async_steps}", f"checkpoint.every_steps={args.steps}",
        f"rollout.stream_scoring={'true' if stream else 'false'}",
    ]  # fmt: skip
    started = time.perf_counter()
    outcome = train(load_config(None, overrides), progress=False)
    total_s = time.perf_counter() - started
    rows = [json.loads(x) for x in (outcome.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "reward/mean" in r]
    loop_s = rows[-1]["time_s"]
    walls = [b["time_s"] - a["time_s"] for a, b in zip(rows, rows[1:], strict=False)]  # steps 1.., [steps-1]
    side = {
        "step_wall_s": walls,
        "steady_step_s": statistics.median(walls) if walls else loop_s,
        "async_steps": async_steps,
        "stream_scoring": stream,
        "loop_s": loop_s,
        "total_s_with_setup": total_s,
        "steps_per_s": len(rows) / loop_s,
        "reward_mean": [r["reward/mean"] for r in rows],
        "pass_rate": [r.get("reward/pass_rate") for r in rows],
        "sample_wait_s": [r["perf/rollout_and_reward_s"] for r in rows],
        "update_s": [r["perf/update_s"] for r in rows],
    }
    if async_steps:
        side["offpolicy_ratio_max"] = [r.get("train/offpolicy_ratio_max") for r in rows]
        side["offpolicy_clipped_frac"] = [r.get("train/offpolicy_clipped_frac") for r in rows]
    return side


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="execrl-bench-pipeline-") as tmp:
        workdir = Path(tmp)
        model = _model_path(args.model, workdir)
        load_before = os.getloadavg()
        serial = _run_side(args, model, workdir / "serial", 0, False)
        overlapped = _run_side(args, model, workdir / "async", 1, False)
        streamed = _run_side(args, model, workdir / "async-stream", 1, True) if args.with_streaming else None
    report = {
        "benchmark": "pipeline",
        "config": {k: v for k, v in vars(args).items() if k not in ("json", "func")},
        "cpu_count": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "serial": serial,
        "async": overlapped,
        "async_stream": streamed,
        "ratio_vs_serial": serial["steady_step_s"] / overlapped["steady_step_s"],
        "ratio_async_stream_vs_serial": serial["steady_step_s"] / streamed["steady_step_s"]
        if streamed
        else None,
        "ratio_vs_serial_whole_loop": serial["loop_s"] / overlapped["loop_s"],
        "reward_mean_serial": sum(serial["reward_mean"]) / len(serial["reward_mean"]),
        "reward_mean_async": sum(overlapped["reward_mean"]) / len(overlapped["reward_mean"]),
    }
    print(f"{'mode':<14}{'loop s':>10}{'median step s':>15}{'mean reward':>13}")
    sides = [("serial", serial), ("async", overlapped)] + ([("async+stream", streamed)] if streamed else [])
    for name, side in sides:
        mean = sum(side["reward_mean"]) / len(side["reward_mean"])
        print(f"{name:<14}{side['loop_s']:>10.1f}{side['steady_step_s']:>15.2f}{mean:>13.3f}")
    print(
        f"ratio_vs_serial: {report['ratio_vs_serial']:.3f}  (load {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f})"
    )
    if args.json is not None:
        write_report(args.json, report, indent=1)
    return 0
