"""Reward-audit overhead: the audit's sandbox batch timed side by side with the reward stage it follows.

Workload, per step: the main job's batch shape (``rollout.prompts_per_step`` x ``rollout.samples_per_prompt``
of the default config) over built-in ``functions`` tasks; each completion is the task's reference solution
with probability ``--pass-rate`` (default 0.5, about three times the main job's observed pass rate, so the
audit has more to do than in the real run) and its wrong solution otherwise. Each step scores the batch
(``score_batch``: the reward stage, the peer) and then runs ``audit_rows`` at ``--share`` (default: the
config's ``audit.share``) and at share 1 (what an evaluation pays). Reported: medians over steps of both
times, the audit / reward-stage ratio, and the audit's share of a step of ``--step-s`` seconds (default
35 s: the main job's measured step, update 20-24 s + rollout and reward 12-15 s, README "Measured").

Limits: the share of step is a projection onto a step time measured elsewhere; a run's own
``perf/audit_share`` metric is the direct measurement. Times on a shared machine vary with its load.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report

GOAL_SHARE_OF_STEP = 0.05


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    parser.add_argument("--pass-rate", type=float, default=0.5, help="share of completions that pass")
    parser.add_argument("--share", type=float, default=None, help="audit share (default: audit.share)")
    parser.add_argument("--step-s", type=float, default=35.0, help="step time to project onto (s)")
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers (default 2, the main job's)")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")


def _batch(tasks: list[Any], size: int, pass_rate: float, rng: random.Random) -> tuple[list[Any], list[str]]:
    rows = [tasks[rng.randrange(len(tasks))] for _ in range(size)]
    texts = [t.reference_solution if rng.random() < pass_rate else t.wrong_solution for t in rows]
    return rows, texts


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from execrl.config import TrainConfig
    from execrl.recipes.audit import audit_rows
    from execrl.rewards import RewardConfig, score_batch
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.tasks import load_suite

    config = TrainConfig()
    share = config.audit.share if args.share is None else args.share
    size = config.rollout.prompts_per_step * config.rollout.samples_per_prompt
    tasks = [t for t in load_suite("functions", "train") if t.audit_tests and t.metadata.difficulty == 1]
    reward = RewardConfig(mode=config.reward.mode)
    rng = random.Random(0)
    times: dict[str, list[float]] = {"reward_s": [], "audit_s": [], "audit_all_s": [], "audited": []}
    with Sandbox(SandboxConfig(workers=args.workers)) as sandbox:
        for step in range(args.steps):
            rows, texts = _batch(tasks, size, args.pass_rate, rng)
            t0 = time.perf_counter()
            scores = score_batch(rows, texts, sandbox=sandbox, config=reward)
            t1 = time.perf_counter()
            sampled = audit_rows(
                rows, texts, scores, sandbox=sandbox, reward=reward, share=share, seed=f"b:{step}"
            )
            t2 = time.perf_counter()
            audit_rows(rows, texts, scores, sandbox=sandbox, reward=reward, share=1.0, seed=f"b:{step}")
            t3 = time.perf_counter()
            times["reward_s"].append(t1 - t0)
            times["audit_s"].append(t2 - t1)
            times["audit_all_s"].append(t3 - t2)
            times["audited"].append(float(sum(r.audit is not None for r in sampled)))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "batch_rows": size,
        "share": share,
        "pass_rate": args.pass_rate,
        "steps": args.steps,
        "median": med,
        "audit_over_reward_stage": med["audit_s"] / med["reward_s"],
        "audit_share_of_step": med["audit_s"] / (args.step_s + med["audit_s"]),
        "audit_all_share_of_step": med["audit_all_s"] / (args.step_s + med["audit_all_s"]),
        "step_s": args.step_s,
        "goal_share_of_step": GOAL_SHARE_OF_STEP,
        "per_step": times,
    }


def run(args: argparse.Namespace) -> int:
    result = measure(args)
    med = result["median"]
    print(
        f"batch {result['batch_rows']} completions, pass rate {result['pass_rate']:.0%}, {result['steps']} steps"
    )
    print(f"reward stage (peer)        {med['reward_s'] * 1000:8.1f} ms")
    print(
        f"audit at share {result['share']:.2f}      {med['audit_s'] * 1000:8.1f} ms  ({med['audited']:.0f} audited)"
    )
    print(f"audit of every pass (eval) {med['audit_all_s'] * 1000:8.1f} ms")
    print(f"audit / reward stage       {result['audit_over_reward_stage']:8.3f}")
    print(
        f"share of a {result['step_s']:.0f} s step       {result['audit_share_of_step']:8.2%}"
        f"  (goal <= {GOAL_SHARE_OF_STEP:.0%})"
    )
    if args.json is not None:
        write_report(args.json, result, indent=1)
    return 0
