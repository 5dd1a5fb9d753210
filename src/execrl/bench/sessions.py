"""``execrl bench sessions``: sandbox sessions against what a tool loop would use without them.

Four measurements in one run (run it under ``flock /tmp/execrl-heavy.lock``):

* (a) ``trivial_cell``: ``session.run("1")`` at concurrency 1, in-process and over HTTP (one
  ``execrl sandbox serve`` on loopback); goal p50 <= 5 ms.
* (b) ``episode``: a 10-cell data-analysis episode (``EPISODE``: one cell builds a 1M-row DataFrame,
  nine query it) in one session over HTTP (open, 10 cells, close), against replaying every earlier
  cell through ``/run_code`` on each call, as stateless tools do (call k runs cells 1..k), on the same
  server; both in the ``python-data`` runtime; the last cell's stdout must be equal. Goal >= 5x. The
  ratio depends on the episode's shape: with ten cells of equal cost it could not pass 5.5x (55 cell
  runs against 10); a costly first cell, the usual shape, moves it toward 10x.
* (c) ``jupyter``: cell latency against a plain, unisolated IPython kernel driven by ``jupyter_client``
  (``execute_interactive``, the kernel in its own session), interleaved by batch; reports the ratio,
  goal <= 1.5x.
* (d) ``fork``: a template holding ~100 MB of numpy arrays forked into 8 sessions (until all 8 are
  ready), against opening 8 sessions and rerunning the setup in each; goal <= 20 ms per fork. Memory:
  the memory the 8 forks' cgroups are charged (what their limits enforce and what the machine pays
  beyond the template: the shared pages stay charged to the template) against the template's own
  charge, goal < 2x; also the PSS (``smaps_rollup``: shared pages split between their sharers) of the
  forks' processes and of the template, for comparison.

Needs the ``python-data`` runtime and the ``bench`` extra (``jupyter_client``, ``ipykernel``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report

# A tool episode's usual shape: one cell loads the data (here: builds a 1M-row DataFrame, ~0.15 s), the
# others query it (2-30 ms each); the last prints, so both contenders' stdout can be compared.
EPISODE = (
    "import numpy as np, pandas as pd\nrng = np.random.default_rng(0)\nn = 1_000_000\n"
    "df = pd.DataFrame({'x': rng.normal(size=n), 'g': rng.integers(0, 10, n), "
    "'label': rng.choice(['a', 'b', 'c'], n)})",
    "df.shape",
    "df.head(3)",
    "float(df['x'].mean())",
    "int((df['g'] == 3).sum())",
    "float(df['x'].max())",
    "df.loc[df['x'] > 3, 'g'].value_counts().head(3).tolist()",
    "df.nlargest(3, 'x')['x'].round(3).tolist()",
    "float(df['x'].std())",
    "print(round(float(df['x'].sum()), 3))",
)
FORK_SETUP = "import numpy as np\narrays = [np.random.default_rng(i).random(1 << 20) for i in range(13)]"
FORKS = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--cells", type=int, default=200, help="trivial cells timed per contender (a, c)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the episode (b) and of the fork (d)")


def _percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "n": len(ordered),
    }


def _timed_ms(call: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1e3)
    return out


# -- HTTP ----------------------------------------------------------------------------------------------
class _Http:
    """One keep-alive connection to the local service (both contenders of (b) use it alike)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.connection = http.client.HTTPConnection(host, int(port), timeout=120)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        self.connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {answer}")
        return answer


@contextmanager
def _server() -> Iterator[str]:
    from execrl.bench.sandbox_service import local_service

    with local_service(2, ("--run-code-python-runtime", "python-data", "--session-max-sessions", "8")) as url:
        yield url


def _session_episode(client: _Http) -> tuple[float, str]:
    start = time.perf_counter()
    opened = client.call("POST", "/v1/sessions", {"runtime": "python-data", "limits": {"memory_mb": 1024}})
    path = f"/v1/sessions/{opened['session_id']}"
    last = {}
    for code in EPISODE:
        last = client.call("POST", f"{path}/cells", {"code": code})
        if last["verdict"] != "passed":
            raise RuntimeError(f"episode cell failed: {last}")
    client.call("DELETE", path)
    return time.perf_counter() - start, str(last["stdout"])


def _replay_episode(client: _Http) -> tuple[float, str]:
    start = time.perf_counter()
    answer: dict[str, Any] = {}
    for k in range(1, len(EPISODE) + 1):
        program = "\n".join(EPISODE[:k])
        answer = client.call(
            "POST", "/run_code", {"code": program, "language": "python", "memory_limit_MB": 1024}
        )
        if answer["status"] != "Success":
            raise RuntimeError(f"replay {k} failed: {answer}")
    return time.perf_counter() - start, str(answer["run_result"]["stdout"])


def _http_cell(client: _Http, cells: int) -> dict[str, float]:
    opened = client.call("POST", "/v1/sessions", {})
    path = f"/v1/sessions/{opened['session_id']}/cells"
    _timed_ms(lambda: client.call("POST", path, {"code": "1"}), 10)
    samples = _timed_ms(lambda: client.call("POST", path, {"code": "1"}), cells)
    client.call("DELETE", f"/v1/sessions/{opened['session_id']}")
    return _percentiles(samples)


def _http_part(args: argparse.Namespace) -> dict[str, Any]:
    with _server() as url:
        client = _Http(url)
        trivial = _http_cell(client, args.cells)
        _session_episode(client)  # warm: both runtimes' zygotes start on first use
        _replay_episode(client)
        session_s, replay_s, equal = [], [], True
        for _ in range(args.rounds):  # interleaved: load drift hits both alike
            seconds, session_out = _session_episode(client)
            session_s.append(seconds)
            seconds, replay_out = _replay_episode(client)
            replay_s.append(seconds)
            equal &= session_out == replay_out
    session, replay = statistics.median(session_s), statistics.median(replay_s)
    episode = {
        "cells": len(EPISODE), "rounds": args.rounds, "session_s": round(session, 4), "replay_s": round(replay, 4),
        "speedup_vs_replay": round(replay / session, 2), "last_cell_stdout_equal": equal,
        "session_s_all": [round(s, 4) for s in session_s], "replay_s_all": [round(s, 4) for s in replay_s],
    }  # fmt: skip
    return {"trivial_cell_http": trivial, "episode": episode}


# -- in-process: trivial cells, Jupyter ------------------------------------------------------------------
@contextmanager
def _jupyter_kernel() -> Iterator[Any]:
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")  # launched with start_new_session=True
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _jupyter_part(sandbox: Any, cells: int) -> dict[str, Any]:
    batches = 10
    per_batch = max(1, cells // batches)
    ours: list[float] = []
    theirs: list[float] = []
    with sandbox.open_session() as session, _jupyter_kernel() as kernel:

        def jupyter_cell() -> None:
            reply = kernel.execute_interactive("1", timeout=30, output_hook=lambda message: None)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"jupyter cell failed: {reply['content']}")

        def session_cell() -> None:
            if not session.run("1").passed:
                raise RuntimeError("session cell failed")

        _timed_ms(jupyter_cell, 10)
        _timed_ms(session_cell, 10)
        for _ in range(batches):
            ours += _timed_ms(session_cell, per_batch)
            theirs += _timed_ms(jupyter_cell, per_batch)
    session_p, jupyter_p = _percentiles(ours), _percentiles(theirs)
    return {
        "session": session_p,
        "jupyter_client_ipykernel": jupyter_p,
        "ratio_session_vs_jupyter": round(session_p["p50_ms"] / jupyter_p["p50_ms"], 3),
    }


# -- fork ------------------------------------------------------------------------------------------------
def _pss_mb(pids: list[int]) -> float:
    total_kb = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


def _slot_pids(session: Any) -> list[int]:
    slot = session._endpoint.slot
    return list(slot.pids()) if slot is not None else []


def _fork_round(template: Any) -> dict[str, Any]:
    start = time.perf_counter()
    forks = template.fork(FORKS)
    seconds = time.perf_counter() - start
    try:
        for fork in forks:  # every fork reads the whole state once
            if not fork.run("float(sum(a.sum() for a in arrays))").passed:
                raise RuntimeError("fork cell failed")
        charged = [fork.stats().memory_mb for fork in forks]
        pss = _pss_mb([pid for fork in forks for pid in _slot_pids(fork)])
        return {"seconds": seconds, "forks_charged_mb": sum(charged), "forks_pss_mb": pss,
                "template_pss_mb": _pss_mb(_slot_pids(template))}  # fmt: skip
    finally:
        for fork in forks:
            fork.close()


def _rerun_setup(sandbox: Any, limits: Any) -> float:
    """The peer: 8 fresh sessions, each running the setup itself."""
    start = time.perf_counter()
    sessions = [sandbox.open_session(runtime="python-data", limits=limits) for _ in range(FORKS)]
    for session in sessions:
        if not session.run(FORK_SETUP).passed:
            raise RuntimeError("setup failed in a fresh session")
    seconds = time.perf_counter() - start
    for session in sessions:
        session.close()
    return seconds


def _fork_part(sandbox: Any, rounds: int) -> dict[str, Any]:
    from execrl.sandbox import SessionLimits

    limits = SessionLimits(memory_mb=1024)
    template = sandbox.open_template(setup=[FORK_SETUP], runtime="python-data", limits=limits)
    template_mb = template.stats().memory_mb
    template_pss = _pss_mb(_slot_pids(template))
    measured, peer = [], []
    try:
        for _ in range(rounds):
            measured.append(_fork_round(template))
            time.sleep(0.5)  # the janitor frees the slots off the clock
            peer.append(_rerun_setup(sandbox, limits))
            time.sleep(0.5)
    finally:
        template.close()
    per_fork_ms = statistics.median(m["seconds"] for m in measured) * 1e3 / FORKS
    peer_ms = statistics.median(peer) * 1e3 / FORKS
    charged = statistics.median(m["forks_charged_mb"] for m in measured)
    # PSS splits each shared page between its sharers: what the whole group (template and forks) holds
    # beyond the template alone is what the forks added.
    added = statistics.median(m["forks_pss_mb"] + m["template_pss_mb"] for m in measured) - template_pss
    return {
        "forks": FORKS, "rounds": rounds, "per_fork_ms": round(per_fork_ms, 2),
        "per_fork_ms_all": [round(m["seconds"] * 1e3 / FORKS, 2) for m in measured],
        "rerun_setup_per_session_ms": round(peer_ms, 2), "speedup_vs_rerun": round(peer_ms / per_fork_ms, 2),
        "template_charged_mb": round(template_mb, 1), "forks_charged_mb_total": round(charged, 1),
        "ratio_forks_vs_template_charged": round(charged / template_mb, 3),
        "template_pss_mb_before": round(template_pss, 1),
        "forks_pss_mb_total": round(statistics.median(m["forks_pss_mb"] for m in measured), 1),
        "template_pss_mb_with_forks": round(statistics.median(m["template_pss_mb"] for m in measured), 1),
        "pss_added_by_forks_mb": round(added, 1),
        "ratio_pss_added_vs_template": round(added / template_pss, 3),
    }  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.sandbox.langs.runtimes import get_runtime

    problem = get_runtime("python-data").problem()
    if problem is not None:
        print(f"execrl bench sessions: {problem}")
        return 2
    report: dict[str, Any] = {"cpus": os.cpu_count(), "loadavg_before": os.getloadavg()}
    with Sandbox(SandboxConfig(workers=1, max_sessions=2 * FORKS + 4)) as sandbox:
        with sandbox.open_session() as session:
            _timed_ms(lambda: session.run("1"), 20)
            report["trivial_cell"] = _percentiles(_timed_ms(lambda: session.run("1"), args.cells))
        report["jupyter"] = _jupyter_part(sandbox, args.cells)
        report["fork"] = _fork_part(sandbox, args.rounds)
    report.update(_http_part(args))
    report["loadavg_after"] = os.getloadavg()
    goals = {
        "trivial_cell_p50_le_5ms": report["trivial_cell"]["p50_ms"] <= 5,
        "episode_ge_5x_replay": report["episode"]["speedup_vs_replay"] >= 5,
        "jupyter_ratio_le_1_5": report["jupyter"]["ratio_session_vs_jupyter"] <= 1.5,
        "fork_le_20ms_per_sibling": report["fork"]["per_fork_ms"] <= 20,
        "forks_memory_lt_2x_template": report["fork"]["ratio_forks_vs_template_charged"] < 2,
    }
    report["goals_met"] = goals
    _print(report)
    if args.json is not None:
        write_report(args.json, report)
    return 0 if report["episode"]["last_cell_stdout_equal"] else 1


def _print(report: dict[str, Any]) -> None:
    trivial, http_cell = report["trivial_cell"], report["trivial_cell_http"]
    episode, jupyter, fork = report["episode"], report["jupyter"], report["fork"]
    print(
        f"(a) trivial cell p50 {trivial['p50_ms']:.2f} ms in-process, {http_cell['p50_ms']:.2f} ms over HTTP"
    )
    print(f"(b) 10-cell episode: session {episode['session_s']:.3f} s, replay via /run_code "
          f"{episode['replay_s']:.3f} s: {episode['speedup_vs_replay']:.1f}x")  # fmt: skip
    print(f"(c) cell p50: session {jupyter['session']['p50_ms']:.2f} ms, jupyter_client "
          f"{jupyter['jupyter_client_ipykernel']['p50_ms']:.2f} ms: {jupyter['ratio_session_vs_jupyter']:.2f}x")  # fmt: skip
    print(f"(d) fork into {fork['forks']}: {fork['per_fork_ms']:.1f} ms per fork (rerun setup "
          f"{fork['rerun_setup_per_session_ms']:.1f} ms, {fork['speedup_vs_rerun']:.1f}x); charged "
          f"{fork['forks_charged_mb_total']:.1f} MB for the forks vs {fork['template_charged_mb']:.1f} MB "
          f"template ({fork['ratio_forks_vs_template_charged']:.2f}x)")  # fmt: skip
    print("goals:", ", ".join(f"{name}={met}" for name, met in report["goals_met"].items()))
