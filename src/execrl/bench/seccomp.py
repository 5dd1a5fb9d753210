"""``execrl bench seccomp``: the allow-list seccomp policy against the deny list alone, side by side.

Both policies run in this one process, alternating within each round and swapping which goes first
from one round to the next (so load drift hits them alike),
at the same concurrency, on the same programs: ``print(1)`` in Python (the sandbox's floor, where a
filter's cost would show first) and, unless ``--cpp-executions 0``, a C++ hello world compiled and run
in the sandbox (g++, cc1plus, as and ld make most system calls). Throughput is executions per second of
the best round per policy; p50 is of ``print(1)`` run one at a time. The allow list costs one more
``prctl`` per execution (it is stacked once the job names its language) and a binary search over the
calls the kernel's seccomp cache does not already allow. Reported, not asserted (the machine may be
shared): goal ``ratio_allow_vs_deny`` >= 0.97.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from execrl.bench._report import write_report
from execrl.sandbox import ExecutionRequest, IOTest, Sandbox, SandboxConfig
from execrl.sandbox.zygote.seccomp import POLICIES

CPP_HELLO = '#include <cstdio>\nint main() { std::puts("hello"); }\n'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    parser.add_argument("--concurrency", type=int, default=2, help="workers per policy (default 2 = cores)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per policy (best is kept)")
    parser.add_argument("--executions", type=int, default=400, help="print(1) runs per round")
    parser.add_argument("--cpp-executions", type=int, default=8, help="C++ compile+run per round (0: skip)")
    parser.add_argument("--latency-samples", type=int, default=100, help="print(1) runs for p50")


def _throughput(sandbox: Sandbox, request: ExecutionRequest, count: int) -> float:
    start = time.perf_counter()
    results = sandbox.run_batch([request] * count)
    elapsed = time.perf_counter() - start
    failed = [r for r in results if not r.passed]
    if failed:
        raise RuntimeError(f"{len(failed)} of {count} runs did not pass: {failed[0]}")
    return count / elapsed


def _p50_ms(sandbox: Sandbox, request: ExecutionRequest, samples: int) -> float:
    timings = []
    for _ in range(samples):
        start = time.perf_counter()
        sandbox.run(request)
        timings.append((time.perf_counter() - start) * 1e3)
    return statistics.median(timings)


def _round(policy: str, args: argparse.Namespace) -> dict[str, float]:
    python = ExecutionRequest(language="python", program="print(1)")
    cpp = ExecutionRequest(
        language="cpp", program=CPP_HELLO, tests=(IOTest(name="hello", stdin="", expected_stdout="hello\n"),)
    )
    config = SandboxConfig(workers=args.concurrency, seccomp_policy=policy)
    with Sandbox(config) as sandbox:
        _throughput(sandbox, python, 2 * args.concurrency)  # warm-up
        out = {"print1_exec_per_s": _throughput(sandbox, python, args.executions)}
        out["print1_p50_ms"] = _p50_ms(sandbox, python, args.latency_samples)
        if args.cpp_executions:
            out["cpp_exec_per_s"] = _throughput(sandbox, cpp, args.cpp_executions)
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Best throughput and lowest p50 across rounds, per policy, and their ratios (allow over deny)."""
    best: dict[str, dict[str, float]] = {policy: {} for policy in POLICIES}
    for round_index in range(args.rounds):
        order = POLICIES if round_index % 2 == 0 else POLICIES[::-1]  # neither always runs first
        for policy in order:
            for key, value in _round(policy, args).items():
                keep = min if key.endswith("_ms") else max
                best[policy][key] = keep(best[policy].get(key, value), value)
    allow, deny = best["allow"], best["deny"]
    summary: dict[str, Any] = {
        "policies": best,
        "ratio_allow_vs_deny": allow["print1_exec_per_s"] / deny["print1_exec_per_s"],
        "p50_ratio_allow_vs_deny": allow["print1_p50_ms"] / deny["print1_p50_ms"],
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "executions_per_round": args.executions,
    }
    if args.cpp_executions:
        summary["cpp_ratio_allow_vs_deny"] = allow["cpp_exec_per_s"] / deny["cpp_exec_per_s"]
    return summary


def run(args: argparse.Namespace) -> int:
    summary = measure(args)
    print(f"execrl bench seccomp: best of {args.rounds} rounds, concurrency {args.concurrency}")
    print(f"  {'policy':<8} {'print(1) exec/s':>16} {'p50 ms':>8} {'C++ exec/s':>11}")
    for policy, row in summary["policies"].items():
        cpp = f"{row['cpp_exec_per_s']:.2f}" if "cpp_exec_per_s" in row else "-"
        print(f"  {policy:<8} {row['print1_exec_per_s']:>16.1f} {row['print1_p50_ms']:>8.2f} {cpp:>11}")
    print(f"  allow/deny throughput: {summary['ratio_allow_vs_deny']:.3f} (goal >= 0.97)")
    if args.json:
        write_report(args.json, summary)
    return 0
