"""The vLLM engine inside training: LoRA versions hot-swapped, a Ray rollout worker actor's engine fed by
``load_weights``, one GRPO step of ``execrl train rollout.engine=vllm`` with a bf16 engine against the fp32
trainer, and multi-turn episodes on the one rollout loop over the engine: refine (feedback turns submitted
as each episode is ready) and tool episodes on the one-step-off loop (each test starts its own engine,
20-45 s here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from toy_domain import toy_overrides
from vllm_fixtures import pytestmark_vllm, save_tiny, vllm_tiny_model

from execrl.rollout.models import default_tokenizer
from execrl.rollout.vllm_engine import VLLMEngine, VLLMSettings

pytestmark = pytestmark_vllm
HERE = Path(__file__).parent


def test_lora_versions_are_hot_swapped_under_fresh_ids() -> None:
    """Each version is a new adapter id (vLLM serves a re-used id from its cache: the old adapter); the
    probe with the adapter matches the trainer's model with its adapters, version after version."""
    from execrl.trainer import LoraSettings
    from execrl.trainer.lora import add_adapters, save_adapter_dir

    model = vllm_tiny_model()
    add_adapters(model, LoraSettings(rank=8, alpha=16))
    settings = VLLMSettings(dtype="float32", max_lora_rank=8)
    engine = VLLMEngine.for_model(model, default_tokenizer(), settings=settings)
    engine.adapter_writer = lambda m, path: (path.mkdir(), save_adapter_dir(m, path, base_model=None))[0]
    try:
        engine.sync_weights(model, 0)
        ids = []
        for version in (1, 2):
            with torch.no_grad():
                for name, param in model.named_parameters():
                    if "lora_B" in name:
                        param.add_(torch.randn_like(param) * 0.05)
            report = engine.sync_weights(model, version)
            assert report.probe_max_abs_diff < 2e-3 and report.probe_moved > 0
            assert engine.lora is not None
            ids.append(engine.lora[1])
        assert len(set(ids)) == 2
    finally:
        engine.close()


def test_a_ray_rollout_worker_syncs_its_engine_on_load_weights(tmp_path: Path, local_ray: None) -> None:
    """The Ray rollout worker actor (as ``RayExecutor`` starts it): one engine per worker, built by
    ``setup.rollout_engine``; each weight version goes through the object store into ``load_weights`` and
    on, verified, into its engine (the actor's ``sync/*`` metrics)."""
    from execrl.config import load_config
    from execrl.distributed.ray_executor import time_weight_pushes

    model_dir = save_tiny(tmp_path / "tiny")
    config = load_config(None, [f"model.path={model_dir}", "rollout.engine=vllm", "vllm.dtype=float32"])
    trained = vllm_tiny_model()
    pushes = time_weight_pushes(config, trained, 2)
    assert len(pushes) == 2
    for push in pushes:
        assert push["sync/probe_max_abs_diff"] < 2e-3  # the actor's engine holds the pushed weights
        assert push["sync/bytes"] == 4 * sum(p.numel() for p in trained.parameters())


def _train_rows(tmp_path: Path, overrides: list[str]) -> list[dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-m", "execrl.cli", "train", "--no-progress", *overrides],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = next((tmp_path / "runs").glob("toy-*"))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "reward/mean" in r]


def test_refine_episodes_train_two_steps_on_the_vllm_engine(tmp_path: Path, toy_tasks_file: Path) -> None:
    """Issue 37 on the spine (issue 36): ``refine.max_turns=2`` with ``rollout.engine=vllm``: the feedback
    turns go to the engine through ``LocalBackend``'s ``submit`` path, the whole multi-turn episode is
    trained with the engine's behaviour log-probs corrected by TIS, and the sync after each update is
    verified (fp32 engine: the probe within 2e-3 of the trainer)."""
    model_dir = save_tiny(tmp_path / "tiny")
    rows = _train_rows(tmp_path, [
        *toy_overrides(model_dir, toy_tasks_file, tmp_path / "runs"), "rollout.engine=vllm",
        "vllm.dtype=float32", "run.total_steps=2", "eval.enabled=false", "audit.enabled=false",
        "refine.max_turns=2", "rollout.prompts_per_step=2", "rollout.samples_per_prompt=4", "rollout.top_k=0",
    ])  # fmt: skip
    assert [r["step"] for r in rows] == [0, 1]
    for row in rows:
        assert row["refine/turns_mean"] > 1.0  # feedback turns were sampled by the engine
        assert 0 <= row["sync/probe_max_abs_diff"] < 2e-3 and row["sync/verify_s"] > 0
        assert 0 <= row["rollout/logprob_max_abs_diff"] < 0.05  # fp32 engine vs fp32 trainer, every turn
        assert "train/offpolicy_ratio_mean" in row


def test_tool_episodes_train_one_step_off_on_the_vllm_engine(tmp_path: Path) -> None:
    """``tools.enabled`` with ``algorithm.async_steps=1`` on the vLLM engine (refused before this port):
    the behaviour copy is synced into the engine one step late (step t+1 is sampled with version t: step
    1's with version 0, already in the engine; step 2's with version 1, synced during step 1, its ``sync/*``
    logged there), the behaviour log-probs mu are the engine's, and the tool metrics are logged."""
    from execrl.tasks import load_suite, save_tasks

    model_dir = save_tiny(tmp_path / "tiny")
    tools_file = tmp_path / "tools.jsonl"
    save_tasks(load_suite("tools", "train")[::30], str(tools_file))
    rows = _train_rows(tmp_path, [
        f"model.path={model_dir}", f'tasks.suites={{"{tools_file}"=1.0}}', f"run.output_dir={tmp_path / 'runs'}",
        "run.name=toy", "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2", "rollout.top_k=16",
        "optim.learning_rate=1e-2", "sandbox.workers=2", "telemetry.tensorboard=false", "eval.enabled=false",
        "run.total_steps=3", "checkpoint.every_steps=10", "tools.enabled=true", "tools.max_turn_tokens=8",
        "tools.max_episode_tokens=40", "algorithm.async_steps=1", "rollout.engine=vllm", "vllm.dtype=float32",
    ])  # fmt: skip
    assert [r["train/offpolicy_staleness_steps"] for r in rows] == [0.0, 1.0, 1.0]
    assert all("tools/stop_answer" in r and "train/offpolicy_ratio_mean" in r for r in rows)
    assert 0 <= rows[0]["sync/probe_max_abs_diff"] < 2e-3  # version 0 into the engine before step 0
    assert 0 <= rows[1]["sync/probe_max_abs_diff"] < 2e-3  # version 1 before step 2's rollout (one late)
    assert "sync/s" not in rows[2]  # nothing left to sample after the last step: no sync


def test_one_grpo_step_on_the_vllm_engine(tmp_path: Path, toy_tasks_file: Path) -> None:
    """``execrl train rollout.engine=vllm``, bf16 engine and fp32 trainer (the supported mixed pair): the step
    runs, the sync is verified at the start and after the update (``sync/*``, bf16 wire), and the
    engine-vs-trainer mismatch and the TIS statistics are logged."""
    model_dir = save_tiny(tmp_path / "tiny")
    overrides = [
        *toy_overrides(model_dir, toy_tasks_file, tmp_path / "runs"),
        "rollout.engine=vllm", "vllm.dtype=bfloat16", "run.total_steps=1", "eval.enabled=false",
        "rollout.top_k=0", "audit.enabled=false",
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-m", "execrl.cli", "train", "--no-progress", *overrides],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = next((tmp_path / "runs").glob("toy-*"))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "reward/mean" in r)
    params = sum(p.numel() for p in vllm_tiny_model().parameters())
    assert step["sync/bytes"] == 2 * params and step["sync/verify_s"] > 0  # bf16 on the wire, verified
    assert 0 < step["sync/probe_max_abs_diff"] < 1.5
    assert 0 < step["rollout/logprob_max_abs_diff"] < 1.5  # bf16 engine vs fp32 trainer, measured
    assert step["rollout/logprob_mean_abs_diff"] <= step["rollout/logprob_max_abs_diff"]
    assert "train/offpolicy_ratio_mean" in step  # truncated importance sampling is on
