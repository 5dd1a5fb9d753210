"""The pieces a recipe builds before its loop: run directory, model, tasks, sandbox, trainer config.

Kept out of ``grpo.py`` so the loop itself reads top to bottom in one screen (nanochat's ``chat_rl.py``).
"""

from __future__ import annotations

import json
import os
import platform
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from execrl.config import ConfigError, TrainConfig, to_toml
from execrl.rewards import RewardConfig
from execrl.sandbox import Limits
from execrl.tasks.schema import Task

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from execrl.sandbox import Sandbox
    from execrl.sandbox.client import ServiceClient
    from execrl.trainer import TrainerConfig

EMBEDDED_MODEL_NAMES = frozenset({"smollm2-135m-instruct", "default"})


def new_run_dir(config: TrainConfig) -> Path:
    """``output_dir/<name>-<UTC timestamp>``, never reusing an existing directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path(config.run.output_dir) / f"{config.run.name}-{stamp}"
    path, n = base, 1
    while path.exists():
        path, n = base.with_name(f"{base.name}-{n}"), n + 1
    path.mkdir(parents=True)
    return path


def write_run_files(run_dir: Path, config: TrainConfig) -> None:
    """Keep the resolved config (what ``--resume`` reads back) and where it ran."""
    (run_dir / "config.toml").write_text(to_toml(config), encoding="utf-8")
    info = {"python": platform.python_version(), "host": platform.node(), "pid": os.getpid()}
    (run_dir / "run_info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def resolve_model_path(name_or_path: str) -> Path:
    """The embedded SmolLM2 (dequantised once to a cache) or a local Hugging Face directory."""
    if name_or_path.lower() in EMBEDDED_MODEL_NAMES:
        from execrl.rollout.models import default_model_dir

        return default_model_dir()
    path = Path(name_or_path).expanduser()
    if (path / "model").is_dir() and (path / "model" / "config.json").exists():
        return path / "model"  # an execrl checkpoint directory: its model subfolder
    if not (path / "config.json").exists():
        raise ConfigError(
            f"model.path={name_or_path!r} is neither 'smollm2-135m-instruct' nor a directory with a "
            "config.json (a Hugging Face checkpoint or an execrl checkpoint)"
        )
    _check_model_config(path / "config.json")
    return path


def _check_model_config(path: Path) -> None:
    """A model's config.json is a small JSON object; refuse anything else before transformers reads it."""
    from execrl.inputs import InputFileError, json_value, read_text_file

    try:
        value = json_value(read_text_file(path, "model config", max_bytes=16 << 20))
    except InputFileError as exc:
        raise ConfigError(str(exc)) from None
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(value).__name__}")


def load_policy(config: TrainConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, Path]:
    import torch

    from execrl.rollout.models import load_model_and_tokenizer

    torch.set_num_threads(config.model.torch_threads)
    path = resolve_model_path(config.model.path)
    dtype = torch.float32 if config.model.dtype == "float32" else torch.bfloat16
    model, tokenizer = load_model_and_tokenizer(path, dtype=dtype)
    return model, tokenizer, path


def load_reference(path: Path, dtype: torch.dtype) -> PreTrainedModel:
    """A frozen copy of the starting policy, only loaded when ``algorithm.kl_coef > 0``."""
    from execrl.rollout.models import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(path, dtype=dtype)
    model.eval()
    model.requires_grad_(False)
    return model


def load_suites(
    names: list[str] | dict[str, float], split: str, max_difficulty: int
) -> dict[str, list[Task]]:
    """Tasks of each suite (registered name, or task JSONL path/URL filtered by ``metadata.split``).

    Only tasks with ``difficulty <= max_difficulty`` are kept. HumanEval is refused for training by the
    suite registry itself (it is an evaluation suite).
    """
    from execrl.tasks import load_suite, load_tasks
    from execrl.tasks.registry import is_task_source

    out: dict[str, list[Task]] = {}
    for name in names:
        if is_task_source(name):
            tasks = [t for t in load_tasks(name) if t.metadata.split == split]
        else:
            tasks = load_suite(name, split=split)
        out[name] = [t for t in tasks if t.metadata.difficulty <= max_difficulty]
    return out


def eval_tasks(config: TrainConfig) -> dict[str, list[Task]]:
    """The held-out tasks both models are evaluated on: the first N of each eval suite's test split."""
    suites = load_suites(config.tasks.eval_suites, "test", config.tasks.max_difficulty)
    return {name: spread(tasks, config.tasks.eval_tasks_per_suite) for name, tasks in suites.items()}


def spread(tasks: list[Task], count: int) -> list[Task]:
    """``count`` tasks taken at even intervals, so every family of an ordered split is represented."""
    if count >= len(tasks):
        return list(tasks)
    return [tasks[i * len(tasks) // count] for i in range(count)]


def build_sandbox(config: TrainConfig) -> Sandbox | ServiceClient:
    """The in-process sandbox, or with ``sandbox.urls`` a client spreading requests over those replicas."""
    from execrl.sandbox import Sandbox, SandboxConfig

    section = config.sandbox
    if section.urls:
        from execrl.sandbox.client import ClientConfig, ServiceClient

        client_config = ClientConfig(
            urls=tuple(section.urls),
            max_in_flight_per_replica=section.max_in_flight_per_replica,
            max_attempts=section.max_attempts,
            backoff_s=section.retry_backoff_s,
            backoff_max_s=max(2.0, section.retry_backoff_s),
        )
        return ServiceClient(client_config)
    return Sandbox(SandboxConfig(backend=section.backend, workers=section.workers))


def reward_config(config: TrainConfig) -> RewardConfig:
    limits = Limits(
        timeout_s=config.sandbox.timeout_s,
        cpu_time_s=config.sandbox.timeout_s,
        memory_mb=config.sandbox.memory_mb,
    )
    return RewardConfig(
        mode=config.reward.mode,
        no_code_penalty=config.reward.no_code_penalty,
        syntax_error_penalty=config.reward.syntax_error_penalty,
        timeout_penalty=config.reward.timeout_penalty,
        limits=limits,
        with_audit=config.audit.enabled,  # the reward's runs carry the audit tests (rewards/blind.py)
    )


def register_extra_verifiers(config: TrainConfig) -> None:
    """``reward.verifiers = {domain = "module:function"}``: the escape hatch for user verifiers."""
    from execrl.rewards import register_verifier, resolve_verifier
    from execrl.rewards.registry import list_verifiers

    known = set(list_verifiers())
    for domain, path in config.reward.verifiers.items():
        if domain not in known:
            register_verifier(domain, resolve_verifier(path))


def trainer_config(config: TrainConfig) -> TrainerConfig:
    from execrl.trainer import TrainerConfig

    alg, opt = config.algorithm, config.optim
    return TrainerConfig(
        learning_rate=opt.learning_rate,
        weight_decay=opt.weight_decay,
        lr_schedule=opt.lr_schedule,
        warmup_steps=opt.warmup_steps,
        total_steps=config.run.total_steps,
        max_grad_norm=opt.max_grad_norm,
        ppo_epochs=opt.ppo_epochs,
        tokens_per_microbatch=opt.tokens_per_microbatch,
        share_prompt_forward=opt.share_prompt_forward,
        policy_loss=alg.policy_loss,
        clip_eps_low=alg.clip_eps_low,
        clip_eps_high=alg.clip_eps_high,
        clip_ratio_c=alg.clip_ratio_c,
        loss_aggregation=alg.loss_aggregation,
        advantage_estimator=alg.advantage_estimator,
        advantage_std_eps=alg.std_eps,
        gamma=alg.gamma,
        gae_lambda=alg.gae_lambda,
        value_coef=alg.value_coef,
        value_clip_eps=alg.value_clip_eps,
        kl_coef=alg.kl_coef,
        kl_estimator=alg.kl_estimator,
        kl_in_reward=alg.kl_in_reward,
        entropy_coef=alg.entropy_coef,
        logprob_temperature=config.rollout.temperature,
        seed=config.run.seed,
    )


@dataclass
class StopFlag:
    """Set by SIGINT/SIGTERM; the loop checks it after each step, checkpoints and stops cleanly."""

    requested: bool = False
    reason: str = ""

    def request(self, reason: str) -> None:
        self.requested, self.reason = True, reason
