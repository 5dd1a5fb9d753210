"""``execrl train tools.enabled=true``: the tool recipe runs end to end through the real CLI on a tiny
model and the ``tools`` suite, logs the tool metrics every step, and a run killed with SIGKILL and
resumed with ``--resume`` equals the uninterrupted one bit for bit (weights and every metric but the
wall-clock ones)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_train_cli import EXECRL, _env, _run_dir
from test_train_resume_exact import _rows, sigkill_then_resume

from execrl.tasks import load_suite, save_tasks

WALL_CLOCK = ("tools/time_share", "tools/session_memory_mb_max")


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tools") / "tools.jsonl"
    save_tasks(load_suite("tools", "train")[::30], str(path))
    return path


def _args(model: Path, tasks: Path, out: Path) -> list[str]:
    return [
        f"model.path={model}", f'tasks.suites={{"{tasks}"=1.0}}', f"run.output_dir={out}", "run.name=toy",
        "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2", "rollout.max_new_tokens=8",
        "rollout.top_k=16", "optim.learning_rate=1e-2", "sandbox.workers=2", "telemetry.tensorboard=false",
        "eval.enabled=false", "tools.enabled=true", "tools.max_turn_tokens=8", "tools.max_episode_tokens=24",
        "tools.max_tool_calls=2", "run.total_steps=3", "checkpoint.every_steps=1", "checkpoint.keep_last=5",
    ]  # fmt: skip


def _metrics(run_dir: Path) -> list[dict[str, float]]:
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in _rows(run_dir)]


def test_tool_settings_without_tools_are_refused_in_one_line() -> None:
    from execrl.config import load_config

    with pytest.raises(ValueError, match="tools.max_tool_calls=3: used only with tools.enabled=true"):
        load_config(None, ["tools.max_tool_calls=3"])


@pytest.mark.slow
def test_tool_recipe_runs_and_resumes_bit_exact(
    tiny_model_dir: Path, tools_file: Path, tmp_path: Path
) -> None:
    straight_out, killed_out = tmp_path / "straight", tmp_path / "killed"
    args = _args(tiny_model_dir, tools_file, straight_out)
    straight = subprocess.run([*EXECRL, "train", "--no-progress", *args], env=_env(), capture_output=True,
                              text=True, timeout=600)  # fmt: skip
    assert straight.returncode == 0, straight.stdout + straight.stderr
    straight_dir = _run_dir(straight_out)
    rows = _metrics(straight_dir)
    assert [r["step"] for r in rows] == [0, 1, 2]
    keys = ("tools/calls_per_episode", "tools/truncated_outputs", "tools/stop_answer", "reward/mean",
            "hack/flagged_rate")  # the audit runs on the final answers  # fmt: skip
    for key in keys:
        assert all(key in r for r in rows), key
    assert all(key in r for r in _rows(straight_dir) for key in WALL_CLOCK)
    killed_dir = sigkill_then_resume(_args(tiny_model_dir, tools_file, killed_out), killed_out)
    last = "step_000002"
    a = load_file(straight_dir / "checkpoints" / last / "model.safetensors")
    b = load_file(killed_dir / "checkpoints" / last / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _metrics(killed_dir) == rows


def test_tool_recipe_evaluates_base_and_trained_on_held_out_tasks(
    tiny_model_dir: Path, tools_file: Path, tmp_path: Path
) -> None:
    """``eval.enabled``: the tool episodes of the held-out split before and after training, paired, in
    ``eval/tools_*.json`` and the report (4 tasks x 3 samples: more sessions than a step holds, so the
    eval runs in chunks sized to the sandbox's session cap)."""
    import json

    held_out = tmp_path / "held_out.jsonl"
    save_tasks(load_suite("tools", "test")[:4], str(held_out))
    out = tmp_path / "run"
    args = [
        a for a in _args(tiny_model_dir, tools_file, out) if not a.startswith(("eval.", "run.total_steps"))
    ]
    args += ["eval.enabled=true", f'tasks.eval_suites=["{held_out}"]', "eval.samples_per_task=3",
             "run.total_steps=1"]  # fmt: skip
    done = subprocess.run([*EXECRL, "train", "--no-progress", *args], env=_env(), capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = _run_dir(out)
    base = json.loads((run_dir / "eval" / "tools_base.json").read_text())
    trained = json.loads((run_dir / "eval" / "tools_trained.json").read_text())
    (suite,) = base["suites"]
    assert base["suites"][suite]["task_ids"] == trained["suites"][suite]["task_ids"]
    assert len(base["suites"][suite]["task_ids"]) == 4
    for metric in ("hidden_pass_rate", "reward", "tool_calls", "called_a_tool"):
        assert len(trained["suites"][suite][metric]) == 4, metric
    comparison = json.loads((run_dir / "eval" / "tools_comparison.json").read_text())
    assert set(comparison[suite]["delta"]) == {"hidden_pass_rate", "reward", "tool_calls", "called_a_tool"}
    assert "tool_calls" in (run_dir / "report.md").read_text()
