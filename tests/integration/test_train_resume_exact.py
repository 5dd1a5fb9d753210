"""``execrl train`` killed with SIGKILL and resumed with ``--resume`` equals the uninterrupted run, bit for
bit, with the adaptive scheduler on and two domains.

Guards the resume path of the real CLI (not a hand-written loop): the model, optimizer, LR schedule, RNG,
the rollout seeds and the scheduler's learned state must all come back from the checkpoint. A lost
scheduler state (the adaptive weights reset to their prior) changes which tasks step 3 draws, and so
every parameter after it. Also checks the per-domain metrics are logged.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_train_cli import EXECRL, _env, _run_dir, _start, _wait_for_checkpoint
from toy_domain import toy_overrides


def _rows(run_dir: Path) -> list[dict[str, float]]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    wall_clock = ("perf/", "time_s", "sandbox/")  # timings differ between runs; everything else must not
    return [{k: v for k, v in r.items() if not k.startswith(wall_clock)} for r in rows if "reward/mean" in r]


def sigkill_then_resume(args: list[str], out_dir: Path) -> Path:
    """``execrl train ARGS`` killed with SIGKILL once its step-1 checkpoint exists, then continued with
    ``execrl train --resume``; returns the run directory."""
    proc = _start(args)
    run_dir = _run_dir(out_dir)
    _wait_for_checkpoint(run_dir, 1, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    resumed = subprocess.run([*EXECRL, "train", "--no-progress", "--resume", str(run_dir)], env=_env(),
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return run_dir


def straight_and_killed(
    common: list[str], tmp_path: Path, *, total_steps: int
) -> tuple[Path, list[dict[str, float]]]:
    """``execrl train`` of ``common`` uninterrupted and SIGKILLed-then-resumed, checked to be the same run
    (``assert_same_run``); returns the straight run's directory and its metric rows."""
    straight_out, killed_out = tmp_path / "straight", tmp_path / "killed"
    straight = subprocess.run([*EXECRL, "train", "--no-progress", *common, f"run.output_dir={straight_out}"],
                              env=_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert straight.returncode == 0, straight.stdout + straight.stderr
    killed_dir = sigkill_then_resume([*common, f"run.output_dir={killed_out}"], killed_out)
    straight_dir = _run_dir(straight_out)
    return straight_dir, assert_same_run(straight_dir, killed_dir, total_steps=total_steps)


def assert_same_run(straight_dir: Path, resumed_dir: Path, *, total_steps: int) -> list[dict[str, float]]:
    """Weights after the last step and every logged metric (wall-clock timings aside) are equal, each
    step is logged once, and both domains' weights are logged. Returns the straight run's rows."""
    last = Path("checkpoints") / f"step_{total_steps - 1:06d}"
    weights = (
        "adapter_model.safetensors"
        if (straight_dir / last / "adapter_model.safetensors").exists()
        else "model.safetensors"
    )  # LoRA: the adapters
    a = load_file(straight_dir / last / weights)
    b = load_file(resumed_dir / last / weights)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows_a, rows_b = _rows(straight_dir), _rows(resumed_dir)
    assert [r["step"] for r in rows_b] == list(range(total_steps))
    assert rows_a == rows_b
    assert len([k for k in rows_a[0] if k.startswith("domain/") and k.endswith("/weight")]) == 2
    return rows_a


@pytest.mark.slow
@pytest.mark.parametrize("async_steps", [0, 1])
def test_sigkill_then_cli_resume_is_bit_exact(
    tiny_model_dir: Path, toy_tasks_file: Path, second_domain: Path, tmp_path: Path, async_steps: int
) -> None:
    """With ``async_steps=1`` the rollout in flight at the kill is regenerated from the checkpointed
    behaviour copy, so the resumed run still matches."""
    base = toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path)
    suites = f'tasks.suites={{"{toy_tasks_file}"=0.7, "{second_domain}"=0.3}}'
    common = [*base, suites, "run.total_steps=4", "checkpoint.every_steps=1", "checkpoint.keep_last=5",
              "eval.enabled=false", "scheduler.mode=adaptive", f"algorithm.async_steps={async_steps}"]  # fmt: skip
    straight_dir, rows_a = straight_and_killed(common, tmp_path, total_steps=4)
    if async_steps:
        assert [r["train/offpolicy_staleness_steps"] for r in rows_a] == [0.0, 1.0, 1.0, 1.0]
        assert all(r["train/offpolicy_ratio_max"] > 0 for r in rows_a)
    assert "| toy2 |" in (straight_dir / "domains.md").read_text()
    assert (straight_dir / "plots" / "domain_weights.png").exists()
    assert (
        any(k.endswith("/zero_variance_share") for k in rows_a[0])
        and "rollout/zero_variance_share" in rows_a[0]
    )
