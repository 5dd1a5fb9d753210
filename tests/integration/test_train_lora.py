"""Training with LoRA adapters (``lora.enabled=true``) end to end on the tiny model and the toy domain.

* the toy domain's reward rises with only the adapters trained (the base weights never move);
* ``execrl train`` killed with SIGKILL and resumed equals the uninterrupted run bit for bit, with the
  async recipe's behaviour copy, the KL reference (the policy with its adapters off) and adapter dropout
  (which draws from the checkpointed RNG) all on;
* PPO with its value head and multi-turn refine RL train adapters too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_train_resume_exact import straight_and_killed
from toy_domain import toy_overrides

from execrl.config import load_config
from execrl.rollout import SamplingParams, logprob_mismatch

LORA = ["lora.enabled=true", "optim.learning_rate=3e-2"]  # LoRA wants a larger learning rate


def _adapters(run_dir: Path) -> dict[str, torch.Tensor]:
    newest = sorted((run_dir / "checkpoints").iterdir())[-1]
    assert not (newest / "model.safetensors").exists()  # the adapters only: the base is model.path
    return load_file(newest / "adapter_model.safetensors")


def _trained(adapters: dict[str, torch.Tensor]) -> bool:
    """B starts at zero: a trained adapter has moved it."""
    return all(bool(v.abs().max() > 0) for k, v in adapters.items() if ".lora_B." in k)


@pytest.mark.slow
def test_lora_reward_rises_on_toy_domain(tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path) -> None:
    from execrl.recipes.grpo import train

    overrides = [*toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path), *LORA]
    outcome = train(
        load_config(None, [*overrides, "run.total_steps=10", "eval.enabled=false"]), progress=False
    )
    rows = [json.loads(line) for line in (outcome.run_dir / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward/mean"] for r in rows if "reward/mean" in r]
    assert len(rewards) == 10
    assert rewards[0] < 0.2, rewards
    assert sum(rewards[-3:]) / 3 > 0.5, rewards
    assert max(r["rollout/logprob_max_abs_diff"] for r in rows if "rollout/logprob_max_abs_diff" in r) < 1e-3
    assert _trained(_adapters(outcome.run_dir))


@pytest.mark.slow
def test_sigkill_then_resume_with_lora_is_bit_exact(
    tiny_model_dir: Path, toy_tasks_file: Path, second_domain: Path, tmp_path: Path
) -> None:
    suites = f'tasks.suites={{"{toy_tasks_file}"=0.7, "{second_domain}"=0.3}}'
    common = [*toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path), suites, *LORA, "lora.dropout=0.1",
              "algorithm.kl_coef=0.05", "algorithm.async_steps=1", "run.total_steps=3",
              "checkpoint.every_steps=1", "checkpoint.keep_last=5", "eval.enabled=false"]  # fmt: skip
    straight_dir, rows = straight_and_killed(common, tmp_path, total_steps=3)
    assert all(r["loss/kl"] > 0 for r in rows[1:])  # the reference (adapters off) differs once trained
    assert (straight_dir / "checkpoints" / "step_000002" / "behaviour_policy.safetensors").stat().st_size < (
        1 << 20
    )  # the behaviour copy's adapters, not a second model
    assert _trained(_adapters(straight_dir))


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe", [["algorithm.advantage_estimator=gae"], ["refine.max_turns=2"]], ids=["ppo", "refine_rl"]
)
def test_ppo_and_multi_turn_refine_train_adapters(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path, recipe: list[str]
) -> None:
    from execrl.recipes import load_recipe, recipe_name

    overrides = [*toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path), *LORA, *recipe]
    config = load_config(None, [*overrides, "run.total_steps=1", "eval.enabled=false", "audit.enabled=false"])
    outcome = load_recipe(recipe_name(config)).train(config, progress=False)
    assert outcome.last_step == 0 and outcome.stopped_early is None
    assert _trained(_adapters(outcome.run_dir))
    if config.algorithm.learns_values:
        assert (sorted((outcome.run_dir / "checkpoints").iterdir())[-1] / "value_head.safetensors").exists()


@pytest.mark.slow
def test_ray_rollout_worker_takes_published_adapters_only(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    """Weights go to Ray rollout workers as the adapters alone (what ``RayExecutor.publish_weights`` puts
    in the object store); the worker's replica then computes the trained policy exactly. The worker class
    is driven in this process (no Ray instance), as ``test_ray_executor`` does for its staleness test."""
    from execrl.components.run import build_run
    from execrl.distributed.ray_workers import RolloutWorker
    from execrl.trainer.lora import adapter_state_dict

    overrides = [*toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path), *LORA, "executor.kind=ray"]
    config = load_config(None, overrides)
    run = build_run(config, None)
    with torch.no_grad():
        for name, param in run.model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.1)  # as if trained
    published = adapter_state_dict(run.model)
    assert published and all(".lora_A." in k or ".lora_B." in k for k in published)
    assert sum(v.numel() for v in published.values()) < sum(p.numel() for p in run.model.parameters()) / 10
    worker = RolloutWorker(config)
    params = SamplingParams(samples_per_prompt=2, max_new_tokens=8)
    worker.generate([[1, 40, 41, 42, 43]], params, -1)  # folds the initial adapters (B = 0)
    ids = torch.tensor([[1, 40, 41, 42, 43]])
    with torch.no_grad():
        before = worker.model(ids).logits
        worker.load_weights(1, {k: v.clone() for k, v in published.items()})
        assert torch.equal(worker.model(ids).logits, run.model(ids).logits)
    assert not torch.equal(before, run.model(ids).logits)
    # the worker samples from its folded copy (lora.fold_for_sampling), refolded with the loaded adapters
    sampled = worker.generate([[1, 40, 41, 42, 43]], params, 1)[0]
    assert logprob_mismatch(run.model, sampled) < 3e-4


@pytest.mark.slow
def test_exported_lora_model_scores_what_the_run_measured(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    """The run's final held-out eval (on the folded policy) equals the exported model's, evaluated again
    through ``load_any_model`` (what ``execrl eval --model`` and ``serve`` load), for the folded export and
    the ``--adapter-only`` one: a LoRA export that lost or mis-folded the adapters would score otherwise."""
    from execrl.recipes.evaluate import eval_as_run, eval_differences
    from execrl.recipes.grpo import train
    from execrl.serve import export_model

    overrides = [*toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path), *LORA, "run.total_steps=3"]
    config = load_config(None, overrides)
    outcome = train(config, progress=False)
    in_run = json.loads((outcome.run_dir / "eval" / "trained.json").read_text())["suites"]
    base = json.loads((outcome.run_dir / "eval" / "base.json").read_text())["suites"]
    # training changed what the model writes: the equality below is not the base model's
    assert any(in_run[suite]["tasks"] != base[suite]["tasks"] for suite in in_run)
    for adapter_only in (False, True):
        out = export_model(
            str(outcome.run_dir), tmp_path / f"export-{adapter_only}", adapter_only=adapter_only
        )
        # what `execrl eval --model OUT --as-run RUN_DIR` runs: the run's own held-out evaluation
        evaluated, differences = eval_as_run(
            model=str(out), run_dir=outcome.run_dir, json_path=None, sandbox_workers=2
        )
        assert differences == [], (adapter_only, differences)
        again = evaluated["suites"]
        for suite, result in in_run.items():
            assert again[suite]["mean_reward"] == result["mean_reward"], (adapter_only, suite)
            assert again[suite]["pass_at_k"] == result["pass_at_k"], (adapter_only, suite)
            assert again[suite]["tasks"] == result["tasks"], (adapter_only, suite)  # every completion
    # and a model that is not the trained one is told apart, task by task
    assert eval_differences({"suites": in_run}, {"suites": base})
