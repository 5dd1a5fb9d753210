"""Reward-audit overhead: the blind audit's cost inside the reward stage, timed side by side with the reward
stage without it (the peer), and the separate audit run it replaced.

Workload, per step: the main job's batch shape (``rollout.prompts_per_step`` x ``rollout.samples_per_prompt``
of the default config) over built-in ``--suite`` tasks (default ``functions``; ``stdio`` has one program
run per io test, the expensive case); each completion is the task's reference solution with probability
``--pass-rate`` (default 0.5, about three times the main job's observed pass rate) and its wrong solution
otherwise. Each step scores the batch three ways, in an order that alternates between steps: the reward
alone (``RewardConfig.with_audit`` off: the peer), the reward with its executions carrying the audit
tests (the blind audit, what training runs) followed by ``audit_rows`` (which then only reads
``Score.audit``), and the reward alone followed by the previous design's separate audit run of a
``--share`` of the passing rows (``audit_rows`` re-runs them). Reported: medians over steps, the blind
audit's cost (blind reward stage + bookkeeping - reward alone) over the reward stage, and its share of
a step of ``--step-s`` seconds (default 35 s: the main job's measured step, README "Measured").

Limits: the share of step is a projection onto a step time measured elsewhere; a run's own
``perf/audit_share`` metric is the direct measurement (an upper bound: it sums the audit tests' run
time over executions). The cost is a difference of two noisy times; on a shared machine it can even
come out negative.
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
    parser.add_argument(
        "--share", type=float, default=None, help="share of the separate audit (default: audit.share)"
    )
    parser.add_argument("--suite", default="functions", help="built-in suite: functions (default) or stdio")
    parser.add_argument("--step-s", type=float, default=35.0, help="step time to project onto (s)")
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers (default 2, the main job's)")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")


def _batch(tasks: list[Any], size: int, pass_rate: float, rng: random.Random) -> tuple[list[Any], list[str]]:
    rows = [tasks[rng.randrange(len(tasks))] for _ in range(size)]
    texts = [t.reference_solution if rng.random() < pass_rate else t.wrong_solution for t in rows]
    return rows, texts


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from execrl.config import TrainConfig
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.tasks import load_suite

    config = TrainConfig()
    share = config.audit.share if args.share is None else args.share
    size = config.rollout.prompts_per_step * config.rollout.samples_per_prompt
    tasks = [t for t in load_suite(args.suite, "train") if t.audit_tests and t.metadata.difficulty == 1]
    rng = random.Random(0)
    times: dict[str, list[float]] = {key: [] for key in ("reward_s", "blind_s", "separate_s", "audited")}
    with Sandbox(SandboxConfig(workers=args.workers)) as sandbox:
        for step in range(args.steps):
            rows, texts = _batch(tasks, size, args.pass_rate, rng)
            sides = ["reward", "blind", "separate"]
            rng.shuffle(sides)
            for side in sides:
                seconds, audited = _side(side, rows, texts, sandbox, config.reward.mode, share, f"b:{step}")
                times[f"{side}_s"].append(seconds)
                if side == "blind":
                    times["audited"].append(float(audited))
    med = {k: statistics.median(v) for k, v in times.items()}
    blind_cost = med["blind_s"] - med["reward_s"]
    separate_cost = med["separate_s"] - med["reward_s"]
    return {
        "suite": args.suite,
        "batch_rows": size,
        "share": share,
        "pass_rate": args.pass_rate,
        "steps": args.steps,
        "median": med,
        "blind_audit_s": blind_cost,
        "separate_audit_s": separate_cost,
        "audit_over_reward_stage": blind_cost / med["reward_s"],
        "audit_share_of_step": blind_cost / (args.step_s + blind_cost),
        "separate_share_of_step": separate_cost / (args.step_s + separate_cost),
        "step_s": args.step_s,
        "goal_share_of_step": GOAL_SHARE_OF_STEP,
        "per_step": times,
    }


def _side(
    side: str, rows: list[Any], texts: list[str], sandbox: Any, mode: Any, share: float, seed: str
) -> tuple[float, int]:
    """One way of scoring the batch: (seconds, rows audited). ``reward``: the reward alone; ``blind``:
    the reward's runs carry the audit tests, then ``audit_rows`` reads them; ``separate``: the reward
    alone, then ``audit_rows`` re-runs a ``share`` of the passing rows on their audit tests."""
    from execrl.recipes.audit import audit_rows
    from execrl.rewards import RewardConfig, score_batch

    reward = RewardConfig(mode=mode, with_audit=side == "blind")
    t0 = time.perf_counter()
    scores = score_batch(rows, texts, sandbox=sandbox, config=reward)
    audited = 0
    if side != "reward":
        picked = audit_rows(rows, texts, scores, sandbox=sandbox, reward=reward, share=share, seed=seed)
        audited = sum(r.audit is not None for r in picked)
    return time.perf_counter() - t0, audited


def run(args: argparse.Namespace) -> int:
    result = measure(args)
    med = result["median"]
    print(
        f"{result['suite']}: batch {result['batch_rows']} completions, pass rate {result['pass_rate']:.0%}, "
        f"{result['steps']} steps"
    )
    print(f"reward stage alone (peer)      {med['reward_s'] * 1000:8.1f} ms")
    print(
        f"reward stage + blind audit     {med['blind_s'] * 1000:8.1f} ms  ({med['audited']:.0f} audited: every pass)"
    )
    print(f"blind audit cost               {result['blind_audit_s'] * 1000:8.1f} ms")
    print(
        f"separate audit at share {result['share']:.2f}  {result['separate_audit_s'] * 1000:8.1f} ms  (before)"
    )
    print(f"blind audit / reward stage     {result['audit_over_reward_stage']:8.3f}")
    print(
        f"share of a {result['step_s']:.0f} s step           {result['audit_share_of_step']:8.2%}"
        f"  (goal <= {GOAL_SHARE_OF_STEP:.0%}; separate audit {result['separate_share_of_step']:.2%})"
    )
    if args.json is not None:
        write_report(args.json, result, indent=1)
    return 0
