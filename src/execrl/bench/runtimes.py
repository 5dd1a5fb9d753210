"""Start-up cost of the sandbox's Python runtimes (issue 13): ``python`` vs ``python-data``.

Two programs, each run ``--runs`` times one after another (latency, not throughput): ``hello``
(``print``) and ``data`` (``import numpy, pandas`` and one small operation each). Contenders:

* ``sandbox python``: the default, standard-library runtime (``data`` is not run: it has no numpy);
* ``sandbox python-data``: the runtime's own zygote, which preloaded numpy and pandas before forking;
* ``sandbox python-data, no preload``: the same directory on ``sys.path`` but nothing preloaded, i.e.
  what each execution pays without the pre-imported zygote (the measurement behind ``preload``);
* ``subprocess``: the peer, ``python -S -c PROGRAM`` with the packages on ``PYTHONPATH`` and no isolation
  at all, started fresh per run like SandboxFusion's runner.

Each row reports p50 and p90 in ms, ``first_ms`` (the first run, which for a sandbox runtime includes
starting its zygote), and ``ratio_vs_subprocess`` (sandbox p50 over the peer's p50, same program, same
run); each sandbox contender also reports its zygote's resident memory (``zygote_rss_mb``). Needs the runtime installed (``scripts/setup.sh --python-data``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report

PROGRAMS = {
    "hello": 'print("hello")',
    "data": "import numpy, pandas\nprint(int(numpy.arange(10).sum()), len(pandas.DataFrame({'a': [1, 2]})))",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=30, help="runs per program and contender (default 30)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")


def _times_ms(call: Callable[[], None], runs: int) -> dict[str, float]:
    start = time.perf_counter()
    call()  # warm: a runtime's zygote starts on first use
    first_ms = (time.perf_counter() - start) * 1e3
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    p90 = samples[int(0.9 * (len(samples) - 1))]
    return {"p50_ms": statistics.median(samples), "p90_ms": p90, "first_ms": first_ms}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _sandbox_rows(runs: int, runtime: str, programs: list[str], label: str) -> dict[str, Any]:
    from execrl.sandbox import ExecutionRequest, Sandbox, SandboxConfig, Verdict

    rows: dict[str, Any] = {}
    with Sandbox(SandboxConfig(workers=1)) as sandbox:
        for name in programs:
            request = ExecutionRequest(language="python", program=PROGRAMS[name], runtime=runtime)

            def call(request: ExecutionRequest = request, name: str = name) -> None:
                result = sandbox.run(request)
                if result.verdict is not Verdict.PASSED:
                    raise RuntimeError(f"{label} {name}: {result.verdict.value}: {result.stderr[-500:]}")

            rows[name] = _times_ms(call, runs)
        pool = sandbox._pool_for(runtime)
        rows["zygote_rss_mb"] = round(_rss_mb(pool.process.pid), 1)  # the fork server every sandbox copies
    return rows


def _no_preload_rows(runs: int) -> dict[str, Any]:
    """python-data with ``preload=()``: the registry entry is swapped for this measurement only."""
    from execrl.sandbox.langs import runtimes

    original = runtimes.get_runtime("python-data")
    runtimes._RUNTIMES.remove("python-data")
    runtimes.register_runtime(dataclasses.replace(original, preload=()))
    try:
        return _sandbox_rows(runs, "python-data", list(PROGRAMS), "python-data, no preload")
    finally:
        runtimes._RUNTIMES.remove("python-data")
        runtimes.register_runtime(original)


def _subprocess_rows(runs: int) -> dict[str, Any]:
    from execrl.sandbox.host.pool import base_python
    from execrl.sandbox.langs.runtimes import get_runtime

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(get_runtime("python-data").packages_dir)}
    env |= {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # as in the sandbox
    rows: dict[str, Any] = {}
    for name, program in PROGRAMS.items():

        def call(program: str = program) -> None:
            argv = [base_python(), "-S", "-c", program]  # in a session of its own, as each sandboxed run
            subprocess.run(argv, env=env, check=True, capture_output=True, start_new_session=True)

        rows[name] = _times_ms(call, runs)
    return rows


def run(args: argparse.Namespace) -> int:
    from execrl.sandbox.langs.runtimes import get_runtime

    problem = get_runtime("python-data").problem()
    if problem is not None:
        print(f"execrl bench runtimes: {problem}")
        return 2
    peer = _subprocess_rows(args.runs)
    contenders = {
        "sandbox python": _sandbox_rows(args.runs, "python", ["hello"], "python"),
        "sandbox python-data": _sandbox_rows(args.runs, "python-data", list(PROGRAMS), "python-data"),
        "sandbox python-data, no preload": _no_preload_rows(args.runs),
        "subprocess": peer,
    }
    for rows in contenders.values():
        for name in PROGRAMS:
            if name in rows:
                rows[name]["ratio_vs_subprocess"] = round(rows[name]["p50_ms"] / peer[name]["p50_ms"], 3)
    print(f"{'contender':34} {'program':8} {'p50 ms':>8} {'p90 ms':>8} {'first ms':>9} {'vs subprocess':>14}")
    for label, rows in contenders.items():
        for name in PROGRAMS:
            if name in rows:
                row = rows[name]
                print(f"{label:34} {name:8} {row['p50_ms']:8.1f} {row['p90_ms']:8.1f} {row['first_ms']:9.1f} "
                      f"{row['ratio_vs_subprocess']:14.3f}")  # fmt: skip
        if "zygote_rss_mb" in rows:
            print(f"{label:34} zygote RSS {rows['zygote_rss_mb']} MB")
    if args.json is not None:
        out = {
            "runs": args.runs, "cpus": os.cpu_count(), "programs": PROGRAMS, "contenders": contenders,
            "peer_session": "own: each subprocess starts with start_new_session=True, as each sandboxed run",
        }  # fmt: skip
        write_report(args.json, out)
    return 0
