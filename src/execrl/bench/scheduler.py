"""Task-scheduler simulation: uniform vs static-by-size vs adaptive, on the same synthetic domains.

    execrl bench scheduler --json docs/evals/bench_scheduler.json

A model is simulated, not trained, so the three schedulers meet the same learner in one run (seconds on one
core). ``--domains`` synthetic domains (300 by default) differ in size (log-normal, 4..200 tasks), in
difficulty (a domain offset from very easy to out of reach, plus per-task spread) and in learning speed.
The chance that a sample of task t in domain d passes is ``sigmoid(skill_d - difficulty_t)``; each group
of ``--samples-per-prompt`` Bernoulli draws whose results are not all equal raises ``skill_d`` by
``speed_d * p(1-p) / 0.25 * --learning-rate`` (a zero-variance group teaches nothing, as in GRPO).

Measured per contender, averaged over ``--seeds`` worlds: the share of zero-variance groups over the whole
horizon and until the target is reached, and the first step at which the mean pass probability over all tasks reaches ``--target`` (the
horizon if never). The peer is the uniform mixture (every domain equally likely, tasks in seeded epochs),
measured side by side; the goal of issue 11 is >= 30% fewer zero-variance groups and fewer steps to target.

Limits: the learner is a caricature (skills of different domains do not transfer, and learning does not
forget); it shows how each scheduler spends samples, not how a real model learns.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from execrl.bench._report import write_report
from execrl.scheduler import AdaptiveScheduler, GroupOutcome, StaticScheduler, tempered_weights


@dataclass(frozen=True)
class SimTask:
    id: str
    domain: int
    difficulty: float


@dataclass(frozen=True)
class World:
    suites: dict[str, list[SimTask]]
    speed: np.ndarray  # [D] learning speed per domain


def make_world(domains: int, seed: int) -> World:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    sizes = np.clip(np.round(rng.lognormal(mean=3.0, sigma=0.8, size=domains)), 4, 200).astype(int)
    offsets = rng.uniform(-7.0, 9.0, size=domains)
    speed = rng.lognormal(mean=0.0, sigma=0.7, size=domains)
    suites: dict[str, list[SimTask]] = {}
    for d in range(domains):
        spread = rng.normal(0.0, 1.5, size=sizes[d])
        suites[f"d{d:03d}"] = [
            SimTask(id=f"d{d:03d}/{i}", domain=d, difficulty=float(offsets[d] + spread[i]))
            for i in range(sizes[d])
        ]
    return World(suites=suites, speed=speed)


def mean_pass(world: World, skill: np.ndarray) -> float:
    """Mean pass probability over every task of every domain (each task counts once)."""
    values = [
        1.0 / (1.0 + math.exp(-(skill[t.domain] - t.difficulty))) for ts in world.suites.values() for t in ts
    ]
    return float(np.mean(values))


def simulate(world: World, scheduler: Any, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))
    skill = np.zeros(len(world.speed))
    groups = zero = 0
    zero_to_target: float | None = None
    reached: int | None = None
    curve: list[float] = []
    for step in range(args.steps):
        outcomes = []
        for task in scheduler.tasks_for_step(step, args.prompts_per_step):
            p = 1.0 / (1.0 + math.exp(-(skill[task.domain] - task.difficulty)))
            passed = tuple(bool(x) for x in rng.random(args.samples_per_prompt) < p)
            outcome = GroupOutcome(task.id, tuple(float(x) for x in passed), passed)
            outcomes.append(outcome)
            groups += 1
            zero += outcome.zero_variance
            if not outcome.zero_variance:
                q = outcome.pass_rate
                skill[task.domain] += args.learning_rate * world.speed[task.domain] * q * (1 - q) / 0.25
        scheduler.observe(step, outcomes)
        if step % args.curve_every == 0 or step == args.steps - 1:
            curve.append(mean_pass(world, skill))
            if reached is None and curve[-1] >= args.target:
                reached, zero_to_target = step, zero / groups
    return {
        "zero_variance_share": zero / groups,
        "zero_variance_share_to_target": zero_to_target if zero_to_target is not None else zero / groups,
        "steps_to_target": reached if reached is not None else args.steps,
        "reached_target": reached is not None,
        "final_mean_pass": curve[-1],
        "curve_every_steps": args.curve_every,
        "mean_pass_curve": [round(v, 4) for v in curve],
    }


def contenders(world: World, seed: int) -> dict[str, Any]:
    uniform = dict.fromkeys(world.suites, 1.0)
    return {
        "uniform": StaticScheduler(world.suites, uniform, seed=seed),
        "static_by_size": StaticScheduler(
            world.suites, tempered_weights(world.suites, uniform, 1.0), seed=seed
        ),
        "adaptive": AdaptiveScheduler(world.suites, uniform, seed=seed),
    }


def _average(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "zero_variance_share": float(np.mean([r["zero_variance_share"] for r in runs])),
        "zero_variance_share_to_target": float(np.mean([r["zero_variance_share_to_target"] for r in runs])),
        "steps_to_target": float(np.mean([r["steps_to_target"] for r in runs])),
        "reached_target_runs": sum(r["reached_target"] for r in runs),
        "final_mean_pass": float(np.mean([r["final_mean_pass"] for r in runs])),
        "per_seed": runs,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--domains", type=int, default=300)
    parser.add_argument("--steps", type=int, default=600, help="simulated steps per contender")
    parser.add_argument("--prompts-per-step", type=int, default=32)
    parser.add_argument("--samples-per-prompt", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=0.1, help="skill gained per informative group")
    parser.add_argument("--target", type=float, default=0.6, help="mean pass probability to reach")
    parser.add_argument("--seeds", type=int, default=3, help="synthetic worlds averaged over")
    parser.add_argument("--curve-every", type=int, default=10, help="steps between mean-pass measurements")


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    per: dict[str, list[dict[str, Any]]] = {}
    initial = []
    for seed in range(args.seeds):
        world = make_world(args.domains, seed)
        initial.append(mean_pass(world, np.zeros(len(world.speed))))
        for name, scheduler in contenders(world, seed).items():
            per.setdefault(name, []).append(simulate(world, scheduler, args, seed))
    results = {name: _average(runs) for name, runs in per.items()}
    uni, ada = results["uniform"], results["adaptive"]
    report = {
        "benchmark": "scheduler",
        "config": {k: v for k, v in vars(args).items() if k not in ("json", "func")},
        "initial_mean_pass": float(np.mean(initial)),
        "results": results,
        "zero_variance_reduction_vs_uniform": 1.0 - ada["zero_variance_share"] / uni["zero_variance_share"],
        "steps_to_target_ratio_vs_uniform": ada["steps_to_target"] / uni["steps_to_target"],
        "wall_s": time.perf_counter() - started,
    }
    _print(report)
    if args.json is not None:
        write_report(args.json, report, indent=1)
    return 0


def _print(report: dict[str, Any]) -> None:
    print(f"{'scheduler':<16}{'zero-var share':>16}{'steps to target':>17}{'final pass':>12}")
    for name, r in report["results"].items():
        print(
            f"{name:<16}{r['zero_variance_share']:>16.3f}{r['steps_to_target']:>17.0f}{r['final_mean_pass']:>12.3f}"
        )
    print(f"zero_variance_reduction_vs_uniform: {report['zero_variance_reduction_vs_uniform']:.3f}")
    print(f"steps_to_target_ratio_vs_uniform:   {report['steps_to_target_ratio_vs_uniform']:.3f}")
