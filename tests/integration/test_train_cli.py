"""``execrl train`` as a user runs it: config errors, kill and resume, Ctrl-C, and the NaN alarm path.

Each run is a real subprocess of the CLI on a tiny model and the toy domain (a few seconds per step).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from toy_domain import toy_overrides

EXECRL = [sys.executable, "-m", "execrl.cli"]
HERE = Path(__file__).parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return env


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*EXECRL, "train", "--no-progress", *args],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _run_dir(out_dir: Path, timeout_s: float = 120) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = sorted(out_dir.glob("toy-*"))
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no run directory appeared under {out_dir}")


def _steps_with_metrics(run_dir: Path) -> list[int]:
    """Steps of the lines that carry the step's training metrics (alarm lines share a step; not counted)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r["step"] for r in rows if "reward/mean" in r]


def _wait_for_checkpoint(
    run_dir: Path, step: int, proc: subprocess.Popen[str], timeout_s: float = 240
) -> None:
    target = run_dir / "checkpoints" / f"step_{step:06d}"
    deadline = time.monotonic() + timeout_s
    while not target.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, f"{target} did not appear"
        time.sleep(0.1)


def test_print_config_and_bad_key(tmp_path: Path) -> None:
    shown = subprocess.run(
        [*EXECRL, "train", "--print-config", "rollout.samples_per_prompt=6"],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    assert "samples_per_prompt = 6" in shown.stdout
    bad = subprocess.run(
        [*EXECRL, "train", "rollout.sample_per_prompt=6"], capture_output=True, text=True, env=_env()
    )
    assert bad.returncode == 2
    assert "rollout.sample_per_prompt" in bad.stderr and "unknown key" in bad.stderr


@pytest.mark.slow
def test_kill_mid_run_then_resume_leaves_no_gap_or_duplicate(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    overrides = [
        *toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path),
        "run.total_steps=6",
        "checkpoint.every_steps=1",
        "eval.enabled=false",
    ]
    proc = _start(overrides)
    run_dir = _run_dir(tmp_path)
    _wait_for_checkpoint(run_dir, 2, proc)
    proc.send_signal(
        signal.SIGKILL
    )  # no chance to clean up: the metrics file may hold steps past the checkpoint
    proc.communicate()
    resumed = subprocess.run(
        [*EXECRL, "train", "--no-progress", "--resume", str(run_dir)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _steps_with_metrics(run_dir) == [0, 1, 2, 3, 4, 5]
    assert (run_dir / "checkpoints" / "step_000005").is_dir()


@pytest.mark.slow
def test_sigint_checkpoints_and_stops_cleanly(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    overrides = [
        *toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path),
        "run.total_steps=50",
        "checkpoint.every_steps=100",
        "eval.enabled=false",
    ]
    proc = _start(overrides)
    run_dir = _run_dir(tmp_path)
    deadline = time.monotonic() + 240
    while not (run_dir / "metrics.jsonl").exists() or not _steps_with_metrics(run_dir):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=240)
    assert proc.returncode == 130, output
    steps = _steps_with_metrics(run_dir)
    last = steps[-1]
    assert steps == list(range(last + 1)) and last < 49
    assert (run_dir / "checkpoints" / f"step_{last:06d}").is_dir(), "a checkpoint is written before stopping"
    assert "stopped early" in output


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, object]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:  # keep test output clean
        return


@pytest.mark.slow
def test_nan_loss_fires_alarm_posts_webhook_and_stops(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/alarm"
    try:
        overrides = [
            *toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path),
            "run.total_steps=8",
            "run.inject_nan_loss_at_step=2",
            f'telemetry.webhook_url="{url}"',
            "eval.enabled=false",
        ]
        done = subprocess.run(
            [*EXECRL, "train", "--no-progress", *overrides],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped early after step 2: alarm: loss_nonfinite" in done.stdout
    run_dir = _run_dir(tmp_path)
    alarms = [json.loads(line) for line in (run_dir / "alarms.jsonl").read_text().splitlines()]
    assert any(a["rule"] == "loss_nonfinite" and a["step"] == 2 for a in alarms)
    posted = [p for p in _Hook.received if p["rule"] == "loss_nonfinite"]
    assert len(posted) == 1 and posted[0]["step"] == 2
    assert (run_dir / "checkpoints" / "step_000002").is_dir(), "the run checkpoints before it stops"
    assert _steps_with_metrics(run_dir) == [0, 1, 2]
