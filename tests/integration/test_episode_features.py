"""Issue 36, item 3: the multi-turn environments run what the one-turn loop runs. Through the real CLI on a
tiny model: tool episodes with DAPO dynamic sampling, the length curriculum's stages, DAPO's overlong
shaping and filtering and the reward audit; tool episodes on the one-step-off async loop (its off-policy
correction); refine episodes with PPO's value head and streamed judging. Each asserts its feature's
metrics in metrics.jsonl, so a feature that silently does nothing on episodes fails here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_train_cli import EXECRL, _env, _run_dir
from test_train_resume_exact import _rows

from execrl.tasks import load_suite, save_tasks


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tools") / "tools.jsonl"
    save_tasks(load_suite("tools", "train")[::30], str(path))
    return path


def _train(args: list[str]) -> list[dict[str, float]]:
    done = subprocess.run([*EXECRL, "train", "--no-progress", *args], env=_env(), capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = Path(next(a.split("=", 1)[1] for a in args if a.startswith("run.output_dir=")))
    return [r for r in _rows(_run_dir(out)) if "reward/mean" in r]


def _base(model: Path, tasks: Path, out: Path) -> list[str]:
    return [
        f"model.path={model}", f'tasks.suites={{"{tasks}"=1.0}}', f"run.output_dir={out}", "run.name=toy",
        "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2", "rollout.top_k=16",
        "optim.learning_rate=1e-2", "sandbox.workers=2", "telemetry.tensorboard=false", "eval.enabled=false",
        "run.total_steps=3", "checkpoint.every_steps=10",
    ]  # fmt: skip


@pytest.mark.slow
def test_tool_episodes_run_dynamic_sampling_curriculum_overlong_and_audit(
    tiny_model_dir: Path, tools_file: Path, tmp_path: Path
) -> None:
    rows = _train([
        *_base(tiny_model_dir, tools_file, tmp_path), "tools.enabled=true", "tools.max_turn_tokens=8",
        "tools.max_episode_tokens=40", "tools.max_tool_calls=2", "algorithm.dynamic_sampling=true",
        "algorithm.max_resample_rounds=1", "rollout.max_new_tokens_stages=[[2, 6]]",
        "algorithm.overlong_buffer_tokens=4", "algorithm.overlong_filtering=true", "audit.enabled=true",
    ])  # fmt: skip
    assert [r["rollout/max_new_tokens"] for r in rows] == [
        8.0,
        8.0,
        6.0,
    ]  # tools.max_turn_tokens, then the stage
    assert all(
        r["rollout/sampling_rounds"] >= 1 and "rollout/dropped_zero_variance_groups" in r for r in rows
    )
    assert all("reward/overlong_penalty_mean" in r and "hack/flagged_rate" in r and "audit/audited" in r and "tools/calls_per_episode" in r
               for r in rows)  # fmt: skip
    assert all(r["rollout/response_length_max"] <= 2 * 8 for r in rows)  # per turn capped, 2 turns at most


@pytest.mark.slow
def test_tool_episodes_run_one_step_off_async(tiny_model_dir: Path, tools_file: Path, tmp_path: Path) -> None:
    rows = _train([
        *_base(tiny_model_dir, tools_file, tmp_path), "tools.enabled=true", "tools.max_turn_tokens=8",
        "tools.max_episode_tokens=40", "algorithm.async_steps=1",
    ])  # fmt: skip
    assert [r["train/offpolicy_staleness_steps"] for r in rows] == [0.0, 1.0, 1.0]
    assert all("train/offpolicy_ratio_mean" in r and "tools/stop_answer" in r for r in rows)


@pytest.mark.slow
def test_refine_episodes_run_ppo_with_streamed_judging(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    rows = _train([
        *_base(tiny_model_dir, toy_tasks_file, tmp_path), 'reward.verifiers={toy_caps="toy_domain:VERIFIER"}',
        "rollout.max_new_tokens=8", "refine.max_turns=2", "algorithm.advantage_estimator=gae",
        "rollout.stream_scoring=true",
    ])  # fmt: skip
    assert all("loss/value" in r and "refine/turns_mean" in r and "refine/feedback_rate" in r for r in rows)
