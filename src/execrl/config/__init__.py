"""execrl.config: the training run's configuration, typed, validated, read from TOML plus ``key=value``
overrides, one module per group of ``[sections]``, no torch anywhere.

    execrl train --config run.toml rollout.samples_per_prompt=8 optim.learning_rate=1e-5
    execrl train --print-config          # every key with its value and its description

* ``base.py``: ``Section`` (unknown keys refused, frozen, no NaN/inf) and ``ConfigError``;
* ``run.py`` (``[run]``, ``[model]``, ``[checkpoint]``), ``tasks.py`` (``[tasks]``, ``[scheduler]``),
  ``algorithm.py`` (``[rollout]``, ``[algorithm]``, ``[optim]``, ``[refine]``), ``tools.py`` (``[tools]``),
  ``scoring.py`` (``[reward]``, ``[sandbox]``, ``[audit]``, ``[eval]``), ``infra.py`` (``[executor]``,
  ``[telemetry]``), ``lora.py`` (``[lora]``), ``trainer.py`` (``[trainer]``: one process or FSDP2, precision),
  ``vllm.py`` (``[vllm]``: the vLLM engine);
* ``train.py``: ``TrainConfig`` and the checks across sections;
* ``sft.py``: ``SftConfig`` (``execrl sft``: ``[data]``, ``[optim]`` of its own, the rest reused);
* ``load.py``: ``load_config`` / ``validate_config`` (errors name the key and what to set);
* ``toml.py``: ``to_toml`` (``tomli-w``; the run directory's ``config.toml``, ``--print-config``);
* ``build.py``: ``build``, internal configs filled from the sections by field name (one source per knob).

Derived values are properties, never settable. A component never sees ``TrainConfig``: it takes its own
frozen dataclass, built by name (``execrl.components.setup``).
"""

from execrl.config.algorithm import (
    MAX_RESAMPLE_ROUNDS,
    AlgorithmSection,
    OptimSection,
    RefineSection,
    RolloutSection,
)
from execrl.config.base import ConfigError, Section
from execrl.config.build import build, sources
from execrl.config.infra import AlarmSection, ExecutorSection, TelemetrySection
from execrl.config.load import load_config, load_typed, parse_override, validate_config, validate_typed
from execrl.config.lora import LoraSection
from execrl.config.run import CheckpointSection, ModelSection, RunSection
from execrl.config.scoring import AuditSection, EvalSection, RewardSection, SandboxSection
from execrl.config.sft import SftConfig, SftDataSection, SftOptimSection, SftRunSection
from execrl.config.tasks import SchedulerSection, TaskSection
from execrl.config.toml import to_toml
from execrl.config.train import TrainConfig
from execrl.config.trainer import TrainerSection
from execrl.config.vllm import VLLMSection

__all__ = [
    "MAX_RESAMPLE_ROUNDS",
    "AlarmSection",
    "AlgorithmSection",
    "AuditSection",
    "CheckpointSection",
    "ConfigError",
    "EvalSection",
    "ExecutorSection",
    "LoraSection",
    "ModelSection",
    "OptimSection",
    "RefineSection",
    "RewardSection",
    "RolloutSection",
    "RunSection",
    "SandboxSection",
    "SchedulerSection",
    "Section",
    "SftConfig",
    "SftDataSection",
    "SftOptimSection",
    "SftRunSection",
    "TaskSection",
    "TelemetrySection",
    "TrainConfig",
    "TrainerSection",
    "VLLMSection",
    "build",
    "load_config",
    "load_typed",
    "parse_override",
    "sources",
    "to_toml",
    "validate_config",
    "validate_typed",
]
