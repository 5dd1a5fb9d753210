"""Multi-turn RL on execution feedback, one readable loop (RLEF: Gehring et al. 2024, arXiv 2410.02089).

    execrl train --config refine_rl.toml          # any config with refine.max_turns > 1
    execrl train refine.max_turns=3 refine.invalid_turn_penalty=0.1

Each step: draw tasks, roll out ``samples_per_prompt`` episodes per task (model turn -> visible tests in
the sandbox -> feedback in the same context -> next turn, up to ``refine.max_turns``), reward each episode
on the hidden tests of its final program, group-relative advantages over a task's episodes, and one
clipped policy-gradient update whose loss covers only the model's tokens (``refine/multiturn.py``). The
trainer pieces (advantages, ``prepare_batch``, ``policy_update``, checkpoints) are GRPO's.

Before the first update and after the last, the base and trained models run the same multi-turn episodes
on the held-out split (``eval/refine_base.json``, ``eval/refine_trained.json``); ``eval/refine_comparison
.json`` holds the hidden pass rates and the paired bootstrap interval on the difference.

Limits: no ``--resume`` yet (checkpoints are written and export/serve read them); no DAPO dynamic
sampling; the engine re-prefills the whole context at every turn (no KV reuse across turns).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from execrl.config import TrainConfig
from execrl.eval.stats import bootstrap_ci, paired_bootstrap_diff
from execrl.recipes import setup
from execrl.recipes.grpo import TrainOutcome, sampling_params
from execrl.refine.multiturn import Episode, MultiTurnConfig, episodes_to_train_batch, rollout_episodes
from execrl.rollout.engine import create_engine
from execrl.rollout.types import SamplingParams
from execrl.scheduler import MixtureSampler
from execrl.trainer import (
    build_optimizer,
    build_scheduler,
    compute_advantages,
    needs_reference,
    policy_update,
    prepare_batch,
    save_checkpoint,
)

log = logging.getLogger("execrl.refine_rl")


def train(config: TrainConfig, *, progress: bool = True) -> TrainOutcome:
    # ---- setup: run directory, policy, optimizer, tasks, engine ---------------------------------------
    run_dir = setup.new_run_dir(config)
    setup.write_run_files(run_dir, config)
    setup.seed_everything(config.run.seed)
    setup.register_extra_verifiers(config)
    model, tokenizer, model_path = setup.load_policy(config)
    tcfg = setup.trainer_config(config)
    ref_model = setup.load_reference(model_path, model.dtype) if needs_reference(tcfg) else None
    optimizer = build_optimizer(model, tcfg)
    scheduler = build_scheduler(optimizer, tcfg)
    train_suites = setup.load_suites(config.tasks.suites, "train", config.tasks.max_difficulty)
    sampler = MixtureSampler(train_suites, config.tasks.suites, seed=config.run.seed)
    engine = create_engine(config.rollout.engine, model=model, tokenizer=tokenizer)
    multi = MultiTurnConfig(
        max_turns=config.refine.max_turns,
        feedback=config.refine.feedback,
        invalid_turn_penalty=config.refine.invalid_turn_penalty,
        reward=setup.reward_config(config),
    )
    sampling = sampling_params(config)
    last_step = -1
    with setup.build_sandbox(config) as sandbox, (run_dir / "metrics.jsonl").open("a") as metrics_file:
        if config.eval.enabled:
            _evaluate(run_dir, "refine_base", engine, tokenizer, sandbox, config, multi, sampling)
        for step in range(config.run.total_steps):
            t0 = time.perf_counter()
            # ---- rollout: multi-turn episodes, reward from the hidden tests of the final program ----
            tasks = sampler.tasks_for_step(step, config.rollout.prompts_per_step)
            episodes = rollout_episodes(
                engine, tokenizer, tasks, sandbox,
                samples_per_prompt=sampling.samples_per_prompt,
                params=replace(sampling, seed=config.run.seed * 100_003 + step),
                config=multi,
            )  # fmt: skip
            t1 = time.perf_counter()
            # ---- advantages over each task's episodes, then the update on the model's tokens only ----
            rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float64)  # [N]
            valid = torch.tensor([e.valid for e in episodes], dtype=torch.bool)  # [N]
            groups = torch.tensor([e.task_index for e in episodes], dtype=torch.long)  # [N]
            advantages = compute_advantages(
                tcfg.advantage_estimator, rewards, group_ids=groups, valid=valid, eps=tcfg.advantage_std_eps
            )
            batch = episodes_to_train_batch(episodes, advantages, engine.pad_token_id)  # type: ignore[attr-defined]
            batch = prepare_batch(model, batch, tcfg, ref_model=ref_model)
            metrics = policy_update(model, optimizer, scheduler, batch, tcfg, ref_model=ref_model)
            # ---- log ------------------------------------------------------------------------------
            metrics.update(episode_metrics(episodes))
            metrics["perf/rollout_and_reward_s"] = t1 - t0
            metrics["perf/step_s"] = time.perf_counter() - t0
            metrics_file.write(json.dumps({"step": step, **metrics}) + "\n")
            metrics_file.flush()
            last_step = step
            if progress:
                log.info(
                    "step %d: reward %.3f, turns %.2f",
                    step,
                    metrics["reward/mean"],
                    metrics["refine/turns_mean"],
                )
        save_checkpoint(
            run_dir,
            step=last_step,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            data_state={"next_step": last_step + 1},
            keep_last=config.checkpoint.keep_last,
        )
        if config.eval.enabled:
            _evaluate(run_dir, "refine_trained", engine, tokenizer, sandbox, config, multi, sampling)
            _compare(run_dir, config)
    return TrainOutcome(run_dir=run_dir, last_step=last_step, stopped_early=None)


def episode_metrics(episodes: list[Episode]) -> dict[str, float]:
    n = len(episodes)
    return {
        "reward/mean": sum(e.reward for e in episodes) / n,
        "reward/pass_rate": sum(e.passed for e in episodes) / n,
        "reward/invalid_rate": sum(not e.valid for e in episodes) / n,
        "refine/turns_mean": sum(e.turns for e in episodes) / n,
        "refine/invalid_turns_mean": sum(e.invalid_turns for e in episodes) / n,
        "refine/model_tokens_mean": sum(sum(e.model_mask) for e in episodes) / n,
        "refine/context_tokens_mean": sum(len(e.token_ids) for e in episodes) / n,
    }


def _evaluate(
    run_dir: Path,
    label: str,
    engine: Any,
    tokenizer: Any,
    sandbox: Any,
    config: TrainConfig,
    multi: MultiTurnConfig,
    sampling: SamplingParams,
) -> None:
    """Multi-turn hidden pass rate and reward per held-out task (mean over the eval samples)."""
    out: dict[str, Any] = {"label": label, "suites": {}}
    params = replace(sampling, temperature=config.eval.temperature, seed=config.run.seed + 31)
    for suite, tasks in setup.eval_tasks(config).items():
        n = config.eval.samples_per_task
        episodes = rollout_episodes(
            engine, tokenizer, tasks, sandbox, samples_per_prompt=n, params=params, config=multi
        )
        out["suites"][suite] = {
            "task_ids": [t.id for t in tasks],
            "pass_rate": [
                sum(e.passed for e in episodes[i * n : (i + 1) * n]) / n for i in range(len(tasks))
            ],
            "reward": [sum(e.reward for e in episodes[i * n : (i + 1) * n]) / n for i in range(len(tasks))],
            "turns_mean": sum(e.turns for e in episodes) / len(episodes),
        }
    path = run_dir / "eval" / f"{label}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")


def _compare(run_dir: Path, config: TrainConfig) -> None:
    base = json.loads((run_dir / "eval" / "refine_base.json").read_text(encoding="utf-8"))["suites"]
    trained = json.loads((run_dir / "eval" / "refine_trained.json").read_text(encoding="utf-8"))["suites"]
    opts = {"resamples": config.eval.bootstrap_resamples, "seed": config.run.seed}
    out = {}
    for suite, b in base.items():
        t = trained[suite]
        out[suite] = {
            key: {
                "base": bootstrap_ci(b[key], **opts).as_dict(),
                "trained": bootstrap_ci(t[key], **opts).as_dict(),
                "delta": paired_bootstrap_diff(b[key], t[key], **opts).as_dict(),
            }
            for key in ("pass_rate", "reward")
        }
    (run_dir / "eval" / "refine_comparison.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
