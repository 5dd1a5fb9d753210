"""``execrl bench sandbox --languages``: every available language's hello world and MultiPL-E-sized
problem (``_language_programs.py``), in the sandbox and as a plain ``subprocess`` without isolation.

The plain run is the same program with the same argv and environment as the sandbox's job (compile
included), in a fresh temporary directory on a tmpfs (``/dev/shm`` where it exists, as the sandbox's work
directory is a tmpfs: compilers write their output and Go its build cache there, and a disk-backed
directory would make the plain side slower for a reason that is not isolation). Timed on the plain side:
writing the files, compiling and running; removing the directory is not (in its favour: the sandbox's
own clean-up is counted whenever it happens before the result comes back). The two are interleaved (isolated, plain, isolated, ...) one at a
time, so load changes hit both alike; after each isolated run the bench waits (untimed) until the sandbox
has built its next worker and cleaned up the last (``Sandbox.wait_settled``), else that background work
would run during, and be charged to, the plain run (measured: plain compiles 1.5-2x slower without it).
The isolated time is therefore the latency of one request with a worker ready, as the pool serves
requests that do not arrive back to back; for Bash, ready includes its warm start (``sandbox/zygote/warm.py``:
the next worker has ``bash`` started and parked before it reports ready, as it would between requests
that do not arrive back to back). Throughput with every worker busy is not measured here: see the note
in ``warm.py``. Per program: p50 of each side and ``ratio = isolated p50 / plain
p50`` (time over time; 1.0 is no overhead); executions/s is runs over the summed time of the runs. The
fastest run of each side and their ratio (``ratio_of_best``, the least disturbed pair, as ``timeit``
reports) come with it: on a loaded machine the p50 of a few runs is mostly the load's.

Per language the headline is its MultiPL-E-sized problem (``p50_ms``, ``exec_per_s``) and its worst
ratio over both programs (``ratio_vs_unisolated``); the goal is <= ``GOAL_RATIO`` for every language.
Limits: one execution at a time (latency, not the throughput of a full pool), and Python in the sandbox
runs in the harness's pre-started interpreter while the plain side starts ``python3`` afresh.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from execrl.bench._language_programs import GO_NET_HTTP, PROGRAMS
from execrl.bench._report import write_report

GOAL_RATIO = 1.5
PlainJob = tuple[list[list[str]], dict[str, str | bytes], dict[str, str]]  # (argvs, files, env)
PLAIN_PYTHON = "/usr/bin/python3"
PLAIN_TMPFS = "/dev/shm"
SETTLE_TIMEOUT_S = 60.0


def plain_workdir_root() -> str | None:
    """Where the plain side makes its directories: a tmpfs when the host has one, else the default."""
    return PLAIN_TMPFS if os.path.isdir(PLAIN_TMPFS) and os.access(PLAIN_TMPFS, os.W_OK) else None


def program_summary(isolated_s: list[float], plain_s: list[float]) -> dict[str, float]:
    """One program's timings (seconds per run, one list per side) as the JSON reports them."""
    if not isolated_s or not plain_s:
        raise ValueError("program_summary needs at least one timing per side")
    isolated_p50, plain_p50 = statistics.median(isolated_s), statistics.median(plain_s)
    return {
        "p50_ms": isolated_p50 * 1e3,
        "exec_per_s": len(isolated_s) / sum(isolated_s),
        "unisolated_p50_ms": plain_p50 * 1e3,
        "unisolated_exec_per_s": len(plain_s) / sum(plain_s),
        "ratio_vs_unisolated": isolated_p50 / plain_p50,
        "best_ms": min(isolated_s) * 1e3,
        "unisolated_best_ms": min(plain_s) * 1e3,
        "ratio_of_best": min(isolated_s) / min(plain_s),
        "runs": len(isolated_s),
    }


def language_summary(programs: dict[str, dict[str, float]]) -> dict[str, Any]:
    """A language's headline (its ``problem`` program, its worst ratio) and the per-program detail."""
    headline = programs["problem"]
    worst = max(row["ratio_vs_unisolated"] for row in programs.values())
    return {
        "exec_per_s": headline["exec_per_s"],
        "p50_ms": headline["p50_ms"],
        "ratio_vs_unisolated": worst,
        "within_goal": worst <= GOAL_RATIO,
        "programs": programs,
    }


def overall(languages: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The top-level verdict: every language within ``GOAL_RATIO``, and which are not."""
    over = sorted(name for name, row in languages.items() if not row["within_goal"])
    return {"goal_ratio": GOAL_RATIO, "all_within_goal": not over and bool(languages), "over_goal": over}


def plain_job(name: str, program: str) -> PlainJob:
    """(argvs, files, env) of the sandbox's job for ``program``, to run without isolation: the compile
    argv if any, then the run argv (``python3 main.py`` for Python, which the sandbox runs in-process)."""
    from execrl.sandbox.langs.registry import get_language
    from execrl.sandbox.types import Limits
    from execrl.sandbox.zygote.jail import ENV

    language = get_language(name)
    spec = language.job_spec(language.default_path, language.limits_for(Limits()))
    argvs = [spec["compile"]] if spec["compile"] else []
    argvs.append(spec["run"] or [PLAIN_PYTHON, language.default_path])
    files: dict[str, str | bytes] = {language.default_path: program, **language.support_files(False)}
    return argvs, files, {**ENV, **spec["env"]}


def plain_run(argv: list[str], cwd: str, env: dict[str, str]) -> bytes:
    """One plain-side command, in a session of its own (``setsid``), as every sandboxed run is: the
    kernel's ``sched_autogroup`` gives each session its own share of the CPU, so a plain run in the
    bench's session would compete with everything else of that session (issue 28: 2.17x vs 1.08x for the
    same program a minute apart on a loaded machine)."""
    done = subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True, start_new_session=True)
    return done.stdout


def plain_once(job: PlainJob, expected: str) -> float:
    """Seconds to write, compile and run ``job`` in a temporary directory, without isolation."""
    from execrl.sandbox.langs.registry import BUILD_DIR

    argvs, files, env = job
    start = time.perf_counter()
    work = tempfile.mkdtemp(prefix="execrl-bench-plain-", dir=plain_workdir_root())
    try:
        os.mkdir(f"{work}/{BUILD_DIR}")  # where the compilers write, as in the sandbox
        for path, content in files.items():
            Path(work, path).parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                Path(work, path).write_bytes(content)
            else:
                Path(work, path).write_text(content, encoding="utf-8")
        run_env = {**env, "HOME": work, "TMPDIR": work}
        run_env.update({k: f"{work}/{v[2:]}" for k, v in env.items() if v.startswith("./")})
        for argv in argvs[:-1]:
            plain_run(argv, work, run_env)
        out = plain_run(argvs[-1], work, run_env)
        elapsed = time.perf_counter() - start
    finally:
        shutil.rmtree(work)
    if out.decode() != expected:
        raise RuntimeError(f"plain run printed {out[:200]!r}, expected {expected!r}")
    return elapsed


def isolated_once(sandbox: Any, name: str, program: str, expected: str) -> float:
    from execrl.sandbox import ExecutionRequest, IOTest

    request = ExecutionRequest(language=name, program=program, tests=(IOTest("t", "", expected),))
    start = time.perf_counter()
    result = sandbox.run(request)
    elapsed = time.perf_counter() - start
    if not sandbox.wait_settled(SETTLE_TIMEOUT_S):
        raise RuntimeError(f"the sandbox did not settle within {SETTLE_TIMEOUT_S} s after a {name} run")
    if not result.passed:
        raise RuntimeError(f"{name} did not pass in the sandbox: {result.verdict} {result.tests}")
    return elapsed


def measure_program(sandbox: Any, name: str, program: str, expected: str, rounds: int) -> dict[str, float]:
    """One program of ``name``: a warm-up each side, then ``rounds`` interleaved pairs."""
    job = plain_job(name, program)
    isolated_once(sandbox, name, program, expected)
    plain_once(job, expected)
    isolated, plain = [], []
    for _ in range(rounds):
        isolated.append(isolated_once(sandbox, name, program, expected))
        plain.append(plain_once(job, expected))
    return program_summary(isolated, plain)


def measure_language(sandbox: Any, name: str, rounds: int) -> dict[str, Any]:
    """Both programs of ``name``."""
    programs = {
        label: measure_program(sandbox, name, sources[name], expected, rounds)
        for label, (sources, expected) in PROGRAMS.items()
    }
    return language_summary(programs)


def measure_go_net_http(sandbox: Any, rounds: int) -> dict[str, Any]:
    """``GO_NET_HTTP``, sandbox vs plain, with the warm cache (now) and with a fresh per-execution cache on
    both sides (before ``gocache.py``), in one run."""
    from execrl.sandbox.langs import gocache

    program, expected = GO_NET_HTTP
    warm = measure_program(sandbox, "go", program, expected, rounds)
    with gocache.cold_cache():
        cold = measure_program(sandbox, "go", program, expected, max(1, rounds // 3))
    return {
        "warm_cache": warm,
        "cold_cache": cold,
        "warm_over_cold_sandbox": warm["p50_ms"] / cold["p50_ms"],
        "cache": gocache.cache_dir(),
    }


def benched_languages() -> list[str]:
    """The languages the bench has programs for: every registered one with stdin/stdout tests but the
    ``-asserts`` variants (their base language plus a ten-line ``--require`` preload)."""
    from execrl.sandbox.langs.registry import get_language, list_languages

    return [
        name
        for name in list_languages()
        if "io" in get_language(name).test_kinds and not name.endswith("-asserts")
    ]


def chosen_languages(only: str | None) -> list[str]:
    """The languages to measure: ``--languages-only`` (validated) or every available benched one."""
    from execrl.sandbox.langs.registry import available_languages, get_language

    available = [name for name in benched_languages() if name in available_languages()]
    if not only:
        return available
    names = [n.strip() for n in only.split(",") if n.strip()]
    for name in names:
        get_language(name)  # an unknown name raises, listing the known ones
        if name not in available:
            get_language(name).check_available()  # raises naming the package to install
    return names


def _print_go_net_http(row: dict[str, Any]) -> None:
    for label in ("warm_cache", "cold_cache"):
        p = row[label]
        print(
            f"  go net/http, {label.replace('_', ' ')}: sandbox {p['p50_ms']:.0f} ms, plain "
            f"{p['unisolated_p50_ms']:.0f} ms, {p['ratio_vs_unisolated']:.2f}x",
            flush=True,
        )


def _print_row(name: str, row: dict[str, Any]) -> None:
    cells = [
        f"{p['p50_ms']:>7.1f} {p['unisolated_p50_ms']:>7.1f} {p['ratio_vs_unisolated']:>5.2f}x"
        for p in row["programs"].values()
    ]
    mark = "ok" if row["within_goal"] else "OVER"
    print(f"  {name:<11} {'   '.join(cells)}   {row['exec_per_s']:>6.1f}  {mark}", flush=True)


def run_languages(args: argparse.Namespace) -> int:
    from execrl.sandbox import Sandbox, SandboxConfig

    names = chosen_languages(args.languages_only)
    load_before = os.getloadavg()
    print(f"execrl bench sandbox --languages: {len(names)} languages, {args.rounds} interleaved round(s)")
    print(
        f"  {'language':<11} {'hello: sandbox  plain  ratio':>28}   {'problem: sandbox  plain  ratio':>30}   exec/s"
    )
    languages: dict[str, dict[str, Any]] = {}
    go_net_http = None
    with Sandbox(SandboxConfig(workers=1)) as sandbox:
        for name in names:
            languages[name] = measure_language(sandbox, name, args.rounds)
            _print_row(name, languages[name])
        if getattr(args, "go_net_http", False) and "go" in names:
            go_net_http = measure_go_net_http(sandbox, args.rounds)
            _print_go_net_http(go_net_http)
    summary = {
        "languages": languages,
        "go_net_http": go_net_http,
        "plain_side_session": "own (start_new_session=True per plain command, as each sandboxed run is)",
        **overall(languages),
        "rounds": args.rounds,
        "unisolated_workdir": plain_workdir_root() or tempfile.gettempdir(),
        "programs": {label: expected for label, (_, expected) in PROGRAMS.items()},
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    verdict = "every language within" if summary["all_within_goal"] else f"over {summary['over_goal']}:"
    print(f"  goal: isolated / unisolated <= {GOAL_RATIO}x; {verdict} the goal")
    if args.json:
        write_report(args.json, summary)
    return 0
