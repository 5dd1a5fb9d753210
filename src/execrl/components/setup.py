"""The pieces a run builds from its ``TrainConfig``: run directory, model, tasks, sandbox, reward, trainer
and sampling configs.

The recipes build them before their loop (kept out of ``grpo.py`` so the loop itself reads top to bottom
in one screen, nanochat's ``chat_rl.py``), and the Ray workers build the same policy replica, sandbox and
reward settings in their own processes, so this module sits below both.
"""

from __future__ import annotations

import json
import os
import platform
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.config import ConfigError, TrainConfig, build, to_toml
from execrl.rewards import RewardConfig
from execrl.sandbox import Limits
from execrl.tasks.schema import Task

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from execrl.components.sampling import StepSampler
    from execrl.episodes import Environment, LocalBackend
    from execrl.rewards.batch import SyncRunner
    from execrl.rollout.engine import Engine
    from execrl.rollout.types import SamplingParams
    from execrl.sandbox import Sandbox
    from execrl.sandbox.service.client import ServiceClient
    from execrl.trainer import LoraSettings, TrainerConfig

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
    """The starting policy, its tokenizer and the directory it came from; with ``lora.enabled`` the model
    carries freshly initialised adapters (B = 0: it computes exactly the base model until trained)."""
    import torch

    from execrl.rollout.models import load_model_and_tokenizer

    torch.set_num_threads(config.model.torch_threads)
    path = resolve_model_path(config.model.path)
    dtype = torch.float32 if config.model.dtype == "float32" else torch.bfloat16
    model, tokenizer = load_model_and_tokenizer(path, dtype=dtype)
    if config.lora.enabled:
        from execrl.trainer.lora import add_adapters

        try:
            add_adapters(model, lora_settings(config))
        except ValueError as exc:  # a target module the model lacks: name the key to set
            raise ConfigError(str(exc)) from None
    return model, tokenizer, path


def rollout_engine(config: TrainConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    """The engine a run samples ``model`` with: ``rollout.engine`` over the model itself, or with LoRA and
    ``lora.fold_for_sampling`` over a folded copy (``sampling_engine``); ``vllm``: its own process
    (``vllm_engine``)."""
    if config.rollout.engine == "vllm":
        return vllm_engine(config, model, tokenizer)
    return sampling_engine(
        config.rollout.engine, model=model, tokenizer=tokenizer, fold_adapters=config.lora.fold_for_sampling
    )


def sampling_engine(
    name: str, *, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, fold_adapters: bool
) -> Engine:
    """Engine ``name`` over ``model``; for a model with LoRA adapters and ``fold_adapters``, over a plain copy
    with the adapters folded into its weights, refolded at the start of every ``generate`` whose policy
    weights changed (``execrl.trainer.lora_fold.FoldedPolicy``): decoding without peft's per-layer extra
    kernels. The engine must take a ``before_generate`` hook (the built-in ``hf`` engines do)."""
    from execrl.rollout.engine import create_engine
    from execrl.trainer.lora import has_adapters

    if not (fold_adapters and has_adapters(model)):
        return create_engine(name, model=model, tokenizer=tokenizer)
    from execrl.trainer.lora_fold import FoldedPolicy

    folded = FoldedPolicy(model)
    engine = create_engine(name, model=folded.model, tokenizer=tokenizer)
    if not hasattr(engine, "before_generate"):
        raise ConfigError(
            f"rollout.engine={name!r} has no before_generate hook, so its folded LoRA copy could not follow "
            "the updates; set lora.fold_for_sampling=false"
        )
    engine.before_generate = folded.refresh
    return engine


def check_engine(config: TrainConfig) -> None:
    """``rollout.engine=vllm`` without its environment: ``EngineUnavailable`` (one line: how to build it)."""
    if config.rollout.engine == "vllm":
        from execrl.rollout.vllm_engine import VLLMSettings, engine_python

        engine_python(build(VLLMSettings, config.vllm, max_lora_rank=0, seed=config.run.seed))


def vllm_engine(config: TrainConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    """vLLM in its own process with ``[vllm]``'s settings (``execrl.rollout.vllm_engine``). Its weights come
    by ``sync_weights`` (the executor's ``publish_weights``); with LoRA the adapters are hot-swapped per
    version (vLLM's own LoRA layers: ``lora.fold_for_sampling`` does not apply)."""
    from execrl.rollout.vllm_engine import VLLMEngine, VLLMSettings
    from execrl.trainer.lora import save_adapter_dir

    settings = build(
        VLLMSettings, config.vllm, max_lora_rank=config.lora.rank if config.lora.enabled else 0,
        seed=config.run.seed,
    )  # fmt: skip
    engine = VLLMEngine.for_model(model, tokenizer, settings=settings)
    base = str(resolve_model_path(config.model.path))
    engine.adapter_writer = lambda m, path: _write_adapters(save_adapter_dir, m, path, base)
    return engine


def _write_adapters(writer: Any, model: torch.nn.Module, path: Path, base: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    writer(model, path, base_model=base)


def lora_settings(config: TrainConfig) -> LoraSettings:
    """``[lora]`` by name (``enabled`` says whether to use them at all)."""
    from execrl.trainer import LoraSettings

    return build(LoraSettings, config.lora)


def reference_model(config: TrainConfig, model: PreTrainedModel, path: Path) -> PreTrainedModel | None:
    """The KL reference, only when ``algorithm.kl_coef > 0``: with LoRA the policy itself (the trainer
    switches its adapters off for the reference log-probs, so the base weights exist once), otherwise a
    frozen copy of the starting policy loaded from ``path``."""
    if config.algorithm.kl_coef == 0:
        return None
    return model if config.lora.enabled else load_reference(path, model.dtype)


def load_reference(path: Path, dtype: torch.dtype) -> PreTrainedModel:
    """A frozen copy of the starting policy, only loaded when ``algorithm.kl_coef > 0``."""
    from execrl.rollout.models import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(path, dtype=dtype)
    model.train(False)  # eval mode (PreTrainedModel.eval is untyped)
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


def build_sandbox(config: TrainConfig, *, sessions: int = 0) -> Sandbox | ServiceClient:
    """The in-process sandbox, or with ``sandbox.urls`` a client spreading requests over those replicas.
    ``sessions``: how many sessions a step holds at once (the tool recipe's templates and forks); the
    sandbox's ``max_sessions`` is raised to it (capped at 1024) instead of keeping its default; with
    ``sandbox.urls`` each replica must serve session templates (``ServiceClient.sessions_problem``)."""
    from execrl.sandbox import Sandbox, SandboxConfig

    section = config.sandbox
    if section.urls:
        from execrl.sandbox.service.client import ClientConfig, ServiceClient

        client = build(
            ClientConfig, section, backoff_s=section.retry_backoff_s,
            backoff_max_s=max(2.0, section.retry_backoff_s), defaults=("request_timeout_s",),
        )  # fmt: skip
        service = ServiceClient(client)
        problem = service.sessions_problem() if sessions else None  # before any step, not a 403 in one
        if problem:
            raise ConfigError(f"sandbox.urls: {problem}")
        return service
    if sessions:
        kept = tuple(name for name in SANDBOX_DEFAULTS if name != "max_sessions")
        return Sandbox(
            build(SandboxConfig, section, defaults=kept, max_sessions=min(1024, max(32, sessions)))
        )
    return Sandbox(build(SandboxConfig, section, defaults=SANDBOX_DEFAULTS))


# Settings of the sandbox itself, not knobs of a training run: they keep the sandbox's defaults (a request
# carries its own limits, from reward_config).
SANDBOX_DEFAULTS = (
    "max_concurrency",
    "limits",
    "cgroup_root",
    "seccomp_policy",
    "warm_start",
    "max_sessions",
)
LIMITS_DEFAULTS = (
    "max_processes", "max_output_bytes", "max_file_mb", "max_open_files", "workdir_mb", "workdir_inodes",
    "compile_timeout_s", "max_fetch_file_bytes", "max_fetch_bytes",
)  # fmt: skip


def reward_config(config: TrainConfig) -> RewardConfig:
    """The reward settings, with the sandbox limits of each execution (``sandbox.timeout_s`` bounds both
    the wall time and the CPU time of a program)."""
    limits = build(Limits, config.sandbox, cpu_time_s=config.sandbox.timeout_s, defaults=LIMITS_DEFAULTS)
    return build(
        RewardConfig, config.reward, limits=limits, defaults=("use_hidden_tests",),
        with_audit=config.audit.enabled,  # the reward's runs carry the audit tests (rewards/blind.py)
    )  # fmt: skip


def sampling_params(config: TrainConfig) -> SamplingParams:
    """Decoding of training rollouts (each generate call gets its own seed from the sampler)."""
    from execrl.rollout.types import SamplingParams  # the rollout package imports torch

    return build(
        SamplingParams, config.rollout, defaults=("stop_strings", "stop_token_ids", "ignore_eos", "seed")
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
    """The update's settings from ``[algorithm]``, ``[optim]``, ``[run]`` (total steps, seed) and
    ``[trainer]`` (precision), by name."""
    from execrl.trainer import TrainerConfig

    return build(
        TrainerConfig, config.algorithm, config.optim, config.run, config.trainer,
        advantage_std_eps=config.algorithm.std_eps,
        logprob_temperature=config.rollout.temperature,  # must equal the sampling temperature (TRL #4159)
        defaults=TRAINER_DEFAULTS,
    )  # fmt: skip


# TrainerConfig fields the run config does not expose: the update keeps their defaults.
TRAINER_DEFAULTS = (
    "adam_beta1", "adam_beta2", "adam_eps", "min_lr_ratio", "optimizer_steps_per_epoch",
    "loss_sum_norm_length", "loss_sum_norm_by_sequences", "logprob_chunk_tokens",
)  # fmt: skip


# ---- the rollout's seams: environment, backend, the step sampler ----------------------------------------


def environment_name(config: TrainConfig) -> str:
    """The run's environment: ``rollout.environment`` when set (a registered name or ``module:Class``),
    else ``tools`` with ``tools.enabled``, ``refine`` with ``refine.max_turns > 1``, ``single`` otherwise."""
    if config.rollout.environment:
        return config.rollout.environment
    if config.tools.enabled:
        return "tools"
    return "refine" if config.refine.multi_turn else "single"


def build_environment(
    config: TrainConfig, runner: SyncRunner, *, reward: RewardConfig | None = None
) -> Environment:
    """The run's environment (``environment_name``) over ``runner`` (the sandbox or a service client),
    built by its class's ``from_config(config, runner=..., reward=...)`` (``reward``: the run's reward
    settings, ``reward_config``, unless given: ``execrl sample`` judges on the hidden tests)."""
    from execrl.episodes import environment_class

    name = environment_name(config)
    try:
        cls = environment_class(name)
    except ValueError as exc:
        raise ConfigError(f"rollout.environment: {exc}") from None
    if not callable(getattr(cls, "from_config", None)):
        raise ConfigError(f"rollout.environment={name!r} has no from_config(config, runner=, reward=)")
    settings = reward if reward is not None else reward_config(config)
    environment: Environment = cls.from_config(config, runner=runner, reward=settings)
    return environment


def sessions_held(config: TrainConfig) -> int:
    """The most sandbox sessions a run holds at once: tool episodes hold a template per task and a fork per
    sample in a rollout call (a step's, or one eval task's); other environments hold none."""
    if not config.tools.enabled:
        return 0
    step = config.rollout.prompts_per_step * (config.rollout.samples_per_prompt + 1)
    return max(step, config.eval.samples_per_task + 1) if config.eval.enabled else step


def max_episode_tokens(config: TrainConfig) -> int | None:
    """The episode's token budget after the first prompt: ``tools.max_episode_tokens`` for tool episodes;
    none otherwise (each turn is capped, and refine's turns are bounded by ``refine.max_turns``)."""
    return config.tools.max_episode_tokens if config.tools.enabled else None


def local_backend(engine: Engine, tokenizer: PreTrainedTokenizerBase) -> LocalBackend:
    from execrl.episodes import LocalBackend

    return LocalBackend(engine, tokenizer)


def step_sampler(
    config: TrainConfig,
    environment: Environment,
    engine: Engine,
    tokenizer: PreTrainedTokenizerBase,
    length_cap: Callable[[int], int] | None,
) -> StepSampler:
    """What a step samples through: the environment, the local backend over ``engine``, the run's decoding
    (each call seeded by step and round), the length curriculum's cap and the episode budget."""
    from execrl.components.sampling import StepSampler

    return StepSampler(
        environment, local_backend(engine, tokenizer), sampling_params(config), seed=config.run.seed,
        length_cap=length_cap, max_episode_tokens=max_episode_tokens(config), stream=config.rollout.stream_scoring,
    )  # fmt: skip
