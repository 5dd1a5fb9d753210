"""``execrl bench sandbox-service``: executions/s through 1 and N local sandbox services vs the in-process pool.

Three contenders, measured in the same run, round-robin within each round (so load drift hits them
alike), on the same programs: the in-process ``Sandbox`` (``run_batch``), one ``execrl sandbox serve``
process reached through ``ServiceClient``, and N such processes behind one client. Every service
listens on loopback only (``127.0.0.1``, a free port). Throughput is executions per second of the best
round (least disturbed). Asserted (exit 1): every contender gives the same verdict for every program,
and no request was retried or given up (the services are local and healthy).

What it measures honestly: on one machine the services share its cores with the client, so N
services cannot beat the in-process pool by more than the extra workers they bring; the number says
what the HTTP hop and JSON cost per execution and how the client spreads load. On a cluster each
replica brings its own cores.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from execrl.bench._report import write_report
from execrl.sandbox.types import CallTest, ExecutionRequest, ExecutionResult

__all__ = ["add_arguments", "programs", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    parser.add_argument("--executions", type=int, default=200, help="programs per round (half must fail)")
    parser.add_argument(
        "--services", type=int, default=2, help="N, the number of services of the last contender"
    )
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers in-process and per service")
    parser.add_argument("--in-flight", type=int, default=4, help="client requests in flight per replica")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per contender (best is kept)")


def programs(count: int) -> list[ExecutionRequest]:
    """``count`` small call-tested programs; even ones are right, odd ones return a wrong value."""
    out = []
    for i in range(count):
        body = "x * 2" if i % 2 == 0 else "x * 2 + 1"
        out.append(
            ExecutionRequest(
                language="python",
                program=f"def f(x):\n    return {body}\n",
                tests=(CallTest(name=f"t{i}", entry_point="f", args=(i,), expected=2 * i),),
            )
        )
    return out


@contextmanager
def local_service(workers: int, options: tuple[str, ...] = ()) -> Iterator[str]:
    """One ``execrl sandbox serve`` on 127.0.0.1 (free port, more ``options``); yields its url, stops it
    on exit."""
    command = [sys.executable, "-m", "execrl.cli", "sandbox", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--workers", str(workers), *options]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # the server prints its address once it listens
    try:
        if "listening on" not in line:
            process.kill()
            raise RuntimeError(f"sandbox service did not start: {line!r} {process.communicate()[1][-2000:]}")
        yield line.split("listening on ", 1)[1].strip()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)


def _timed(runner: Any, requests: list[ExecutionRequest]) -> tuple[list[ExecutionResult], float]:
    runner.run_batch(requests[:8])  # warm-up: connections, parked workers
    start = time.perf_counter()
    results = runner.run_batch(requests)
    return results, time.perf_counter() - start


def _measure(args: argparse.Namespace, requests: list[ExecutionRequest]) -> dict[str, Any]:
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.sandbox.service.client import ClientConfig, ServiceClient

    best: dict[str, float] = {}
    verdicts: dict[str, list[str]] = {}
    counters: dict[str, dict[str, int]] = {}
    with ExitStack() as stack:
        sandbox = stack.enter_context(Sandbox(SandboxConfig(workers=args.workers)))
        urls = [stack.enter_context(local_service(args.workers)) for _ in range(args.services)]
        runners: dict[str, Any] = {
            "inprocess": sandbox,
            "service_1": ServiceClient(
                ClientConfig(urls=(urls[0],), max_in_flight_per_replica=args.in_flight)
            ),
            f"service_{args.services}": ServiceClient(
                ClientConfig(urls=tuple(urls), max_in_flight_per_replica=args.in_flight)
            ),
        }
        for _ in range(args.rounds):
            for name, runner in runners.items():
                results, elapsed = _timed(runner, requests)
                best[name] = min(best.get(name, float("inf")), elapsed)
                verdicts[name] = [r.verdict.value for r in results]
        for name, runner in runners.items():
            if isinstance(runner, ServiceClient):
                stats = runner.stats()
                counters[name] = {"retries": stats.retries, "gave_up": stats.gave_up}
    return {"best_s": best, "verdicts": verdicts, "counters": counters}


def _summary(args: argparse.Namespace, measured: dict[str, Any]) -> dict[str, Any]:
    n = args.executions
    rate = {name: n / seconds for name, seconds in measured["best_s"].items()}
    verdicts = list(measured["verdicts"].values())
    many = f"service_{args.services}"
    return {
        "executions_per_round": n,
        "rounds": args.rounds,
        "workers_per_sandbox": args.workers,
        "services": args.services,
        "in_flight_per_replica": args.in_flight,
        "inprocess_exec_per_s": rate["inprocess"],
        "service_1_exec_per_s": rate["service_1"],
        "service_n_exec_per_s": rate[many],
        "ratio_service_1_vs_inprocess": rate["service_1"] / rate["inprocess"],
        "ratio_service_n_vs_inprocess": rate[many] / rate["inprocess"],
        "verdicts_equal": all(v == verdicts[0] for v in verdicts),
        "passed": sum(v == "passed" for v in verdicts[0]),
        "client_counters": measured["counters"],
        "cpu_count": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
    }


def run(args: argparse.Namespace) -> int:
    if args.executions < 2 or args.services < 1 or args.workers < 1 or args.rounds < 1:
        print("execrl bench sandbox-service: need --executions >= 2, --services/--workers/--rounds >= 1")
        return 2
    summary = _summary(args, _measure(args, programs(args.executions)))
    print(f"{'contender':<28}{'exec/s':>10}{'vs in-process':>16}")
    print(f"{'in-process Sandbox':<28}{summary['inprocess_exec_per_s']:>10.1f}{1.0:>16.2f}")
    print(
        f"{'1 service':<28}{summary['service_1_exec_per_s']:>10.1f}{summary['ratio_service_1_vs_inprocess']:>16.2f}"
    )
    label = f"{args.services} services"
    print(
        f"{label:<28}{summary['service_n_exec_per_s']:>10.1f}{summary['ratio_service_n_vs_inprocess']:>16.2f}"
    )
    if args.json:
        write_report(args.json, summary)
    counters = summary["client_counters"].values()
    healthy = all(c["retries"] == 0 and c["gave_up"] == 0 for c in counters)
    ok = summary["verdicts_equal"] and summary["passed"] == (args.executions + 1) // 2 and healthy
    if not ok:
        print(
            f"FAILED: verdicts_equal={summary['verdicts_equal']} passed={summary['passed']} counters={list(counters)}"
        )
    return 0 if ok else 1
