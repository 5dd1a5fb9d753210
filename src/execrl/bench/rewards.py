"""Reward scoring throughput: 1,000 mixed code completions through ``prepare -> sandbox batch -> finish``.

The mix is built from the built-in ``functions`` suite: reference solutions (pass), wrong solutions
(fail), generated crashing variants (the entry point raises), a few generated syntax errors and unfenced
prose (decided without the sandbox) and a few infinite loops (time out at a 1 s limit; few, so the run
stays short). Reported: completions scored per second end to end, and the share of wall time spent
OUTSIDE the sandbox batch call (extraction, assembly, local compile, result mapping); the goal is
<= 10 %, i.e. the reward code never becomes the bottleneck the sandbox was built to remove.

Peer, measured in the same run on the same subset (no loopers): one ``sandbox.run`` call per completion
(what a verifier that calls the sandbox itself does) against one batch call, to show what batching buys;
on a 2-core machine with 2 workers expect little, the gain grows with workers and cores.
Limits: the numbers are for this machine's sandbox worker count and load (other processes share the
CPUs); the loopers' 1 s timeouts put a floor of ``loopers / workers`` seconds on the batch.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.bench._report import write_report
from execrl.rewards import RewardConfig, Score, finish_batch, prepare_batch
from execrl.sandbox.types import Limits

if TYPE_CHECKING:
    from execrl.tasks.schema import Task

GOAL_OUTSIDE_SHARE = 0.10
KINDS = ("correct", "wrong", "crash", "syntax_error", "no_code", "loop")


@dataclass(frozen=True)
class Sample:
    task: Task
    completion: str
    kind: str


def _variant(task: Task, kind: str) -> str:
    entry = getattr(task.spec, "entry_point", None) or "solve"
    if kind == "correct":
        return task.reference_solution or ""
    if kind == "wrong":
        return task.wrong_solution or ""
    if kind == "crash":
        return f"```python\ndef {entry}(*args, **kwargs):\n    raise RuntimeError('boom')\n```"
    if kind == "syntax_error":
        return f"```python\ndef {entry}(*args, **kwargs)\n    return None\n```"
    if kind == "no_code":
        return "I am not able to write this function, sorry."
    return f"```python\ndef {entry}(*args, **kwargs):\n    while True:\n        pass\n```"


def build_samples(tasks: list[Task], *, count: int, loopers: int) -> list[Sample]:
    """``count`` samples cycling over ``tasks``: ``loopers`` infinite loops spread evenly, the rest in a
    fixed 9:7:2:1:1 pattern of correct, wrong, crash, syntax error, no code."""
    if not tasks:
        raise ValueError("the functions suite is empty; nothing to benchmark")
    pattern = ["correct"] * 9 + ["wrong"] * 7 + ["crash"] * 2 + ["syntax_error", "no_code"]
    loop_every = count // loopers if loopers else 0
    samples = []
    for i in range(count):
        kind = "loop" if loop_every and i % loop_every == loop_every - 1 else pattern[i % len(pattern)]
        task = tasks[i % len(tasks)]
        samples.append(Sample(task, _variant(task, kind), kind))
    return samples


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--count", type=int, default=1000, help="completions to score")
    parser.add_argument("--loopers", type=int, default=6, help="of which infinite loops (1 s timeout each)")
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers")
    parser.add_argument("--timeout-s", type=float, default=1.0, help="per-program wall and CPU limit")
    parser.add_argument("--peer-count", type=int, default=100, help="completions scored one by one (0: skip)")
    parser.add_argument("--suite", default="functions", help="code suite with reference/wrong solutions")
    parser.add_argument("--split", default="train", choices=["train", "test"], help="suite split")


def _score_batched(
    sandbox: Any, samples: list[Sample], config: RewardConfig
) -> tuple[list[Score], dict[str, float]]:
    tasks, completions = [s.task for s in samples], [s.completion for s in samples]
    start_s = time.perf_counter()
    prepared = prepare_batch(tasks, completions, config)
    sandbox_start_s = time.perf_counter()
    results = sandbox.run_batch(list(prepared.requests))
    sandbox_end_s = time.perf_counter()
    scores = finish_batch(prepared, results, config)
    end_s = time.perf_counter()
    total_s, sandbox_s = end_s - start_s, sandbox_end_s - sandbox_start_s
    timings = {
        "total_s": total_s,
        "prepare_s": sandbox_start_s - start_s,
        "sandbox_s": sandbox_s,
        "finish_s": end_s - sandbox_end_s,
        "outside_sandbox_share": (total_s - sandbox_s) / total_s,
        "completions_per_s": len(samples) / total_s,
        "requests": float(len(prepared.requests)),
    }
    return scores, timings


def _score_one_by_one(sandbox: Any, samples: list[Sample], config: RewardConfig) -> float:
    """The peer: prepare, run and finish each completion alone; returns completions per second."""
    start_s = time.perf_counter()
    for sample in samples:
        prepared = prepare_batch([sample.task], [sample.completion], config)
        results = [sandbox.run(request) for request in prepared.requests]
        finish_batch(prepared, results, config)
    return len(samples) / (time.perf_counter() - start_s)


def _check_mix(samples: list[Sample], scores: list[Score]) -> list[str]:
    """Sanity: references must pass and nothing else may; a benchmark of a broken grader is worthless."""
    problems = []
    for sample, score in zip(samples, scores, strict=True):
        if (sample.kind == "correct") != score.passed or not score.valid:
            problems.append(f"{sample.task.id} [{sample.kind}]: {score.reason}")
    return problems


def run(args: argparse.Namespace) -> int:
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.tasks import load_suite

    samples = build_samples(load_suite(args.suite, args.split), count=args.count, loopers=args.loopers)
    config = RewardConfig(limits=Limits(timeout_s=args.timeout_s, cpu_time_s=args.timeout_s))
    peer = [s for s in samples if s.kind != "loop"][: args.peer_count]
    with Sandbox(SandboxConfig(workers=args.workers)) as sandbox:
        _score_batched(sandbox, samples[: min(20, len(samples))], config)  # warm-up: pool, caches
        scores, timings = _score_batched(sandbox, samples, config)
        peer_per_s = _score_one_by_one(sandbox, peer, config) if peer else None
        peer_batched_per_s = _score_batched(sandbox, peer, config)[1]["completions_per_s"] if peer else None
    by_reason = dict(sorted(Counter(s.reason_code for s in scores).items()))
    report: dict[str, Any] = {
        "count": len(samples),
        "completions_per_s": timings["completions_per_s"],
        "outside_sandbox_share": timings["outside_sandbox_share"],
        "goal_outside_sandbox_share": GOAL_OUTSIDE_SHARE,
        "by_reason": by_reason,
        "by_kind": dict(sorted(Counter(s.kind for s in samples).items())),
        "timings": timings,
        "workers": args.workers,
        "peer_count": len(peer),
        "peer_batched_completions_per_s": peer_batched_per_s,
        "one_by_one_completions_per_s": peer_per_s,
        "batch_speedup_vs_one_by_one": peer_batched_per_s / peer_per_s
        if peer_per_s and peer_batched_per_s
        else None,
        "mismatches": _check_mix(samples, scores)[:20],
    }
    _print_table(report)
    if args.json:
        write_report(args.json, report)
    return 0 if not report["mismatches"] else 1


def _print_table(report: dict[str, Any]) -> None:
    t = report["timings"]
    share, goal = report["outside_sandbox_share"], report["goal_outside_sandbox_share"]
    rows = [
        ("completions", f"{report['count']} ({', '.join(f'{k} {v}' for k, v in report['by_kind'].items())})"),
        ("sandbox requests", f"{int(t['requests'])} on {report['workers']} workers"),
        ("batched: completions/s", f"{report['completions_per_s']:.1f}"),
        ("time total / sandbox", f"{t['total_s']:.2f} s / {t['sandbox_s']:.2f} s"),
        ("prepare / finish", f"{t['prepare_s'] * 1e3:.1f} ms / {t['finish_s'] * 1e3:.1f} ms"),
        (
            "outside-sandbox share",
            f"{share:.2%} ({'meets' if share <= goal else 'MISSES'} goal <= {goal:.0%})",
        ),
    ]
    if report["one_by_one_completions_per_s"]:
        n = report["peer_count"]
        rows.append(
            (f"peer, {n} no-loop samples: batched/s", f"{report['peer_batched_completions_per_s']:.1f}")
        )
        rows.append(
            (f"peer, {n} no-loop samples: one-by-one/s", f"{report['one_by_one_completions_per_s']:.1f}")
        )
        rows.append(("batched / one-by-one", f"{report['batch_speedup_vs_one_by_one']:.2f}x"))
    rows += [(f"  {code}", str(n)) for code, n in report["by_reason"].items()]
    if report["mismatches"]:
        rows.append(("UNEXPECTED", f"{len(report['mismatches'])} samples, e.g. {report['mismatches'][0]}"))
    width = max(len(name) for name, _ in rows)
    print("\n".join(f"{name:<{width}}  {value}" for name, value in rows))
