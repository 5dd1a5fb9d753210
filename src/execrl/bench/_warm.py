"""``execrl bench sandbox --warm-start``: what warm starts (``sandbox/zygote/warm.py``) cost and give when the
pool is busy, against the same sandbox with ``warm_start=False``, interleaved round by round.

``--languages`` measures one request at a time with a worker ready, where a warm start saves Bash's
start-up outright. Here every worker is busy (``run_batch`` of ``--warm-executions`` requests) and the
CPU decides: a committed worker spends the same start-up, only earlier, and one whose shape no request
wants is retired. Three loads, each at ``--concurrency`` requests in flight and at one: Bash hello
worlds only, Python only (never warm: the cost of the hint protocol alone), and Bash and Python 2:1
(parked workers shared between shapes). Per load: executions/s of each side (median over ``--rounds``)
and their ratio, warm over cold; and the share of requests that found a worker committed to them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from execrl.bench._report import write_report


def _requests(load: str, count: int) -> list[Any]:
    from execrl.sandbox import ExecutionRequest, IOTest

    bash = ExecutionRequest(language="bash", program="echo hello\n", tests=(IOTest("t", "", "hello\n"),))
    python = ExecutionRequest(
        language="python", program="print('hello')\n", tests=(IOTest("t", "", "hello\n"),)
    )
    pattern = {"bash": [bash], "python": [python], "bash2:python1": [bash, bash, python]}[load]
    return [pattern[i % len(pattern)] for i in range(count)]


def _one(load: str, count: int, concurrency: int, warm: bool) -> tuple[float, float]:
    """(executions/s, share of requests handed a worker committed to their shape) of one batch."""
    from execrl.sandbox import Sandbox, SandboxConfig

    requests = _requests(load, count)
    config = SandboxConfig(workers=concurrency, max_concurrency=concurrency, warm_start=warm)
    with Sandbox(config) as sandbox:
        sandbox.run_batch(requests[: 4 * concurrency])  # warm-up: the chooser's window fills
        before = sandbox._pool.warm_starts
        start = time.perf_counter()
        results = sandbox.run_batch(requests)
        elapsed = time.perf_counter() - start
        hits = sandbox._pool.warm_starts - before
    failed = [r for r in results if not r.passed]
    if failed:
        raise RuntimeError(f"{load}: {len(failed)} of {count} requests failed, e.g. {failed[0]}")
    return count / elapsed, hits / count


def run_warm_start(args: argparse.Namespace) -> int:
    rows: dict[str, dict[str, Any]] = {}
    print(
        f"execrl bench sandbox --warm-start: {args.warm_executions} executions per batch, {args.rounds} rounds"
    )
    print(
        f"  {'load':<14} {'in flight':>9} {'warm exec/s':>12} {'cold exec/s':>12} {'ratio':>6} {'warm share':>10}"
    )
    for load in ("bash", "python", "bash2:python1"):
        for concurrency in dict.fromkeys((args.concurrency, 1)):
            warm, cold, shares = [], [], []
            for _ in range(args.rounds):
                rate, share = _one(load, args.warm_executions, concurrency, True)
                warm.append(rate)
                shares.append(share)
                cold.append(_one(load, args.warm_executions, concurrency, False)[0])
            row = {
                "warm_exec_per_s": statistics.median(warm),
                "cold_exec_per_s": statistics.median(cold),
                "ratio": statistics.median(warm) / statistics.median(cold),
                "warm_share": statistics.median(shares),
                "warm_rounds": warm,
                "cold_rounds": cold,
            }
            rows[f"{load}@{concurrency}"] = row
            print(
                f"  {load:<14} {concurrency:>9} {row['warm_exec_per_s']:>12.1f} {row['cold_exec_per_s']:>12.1f} "
                f"{row['ratio']:>5.2f}x {row['warm_share']:>10.2f}",
                flush=True,
            )
    if args.json:
        write_report(args.json, {"loads": rows, "rounds": args.rounds, "executions": args.warm_executions})
    return 0
