"""The training run's configuration: typed, validated, read from TOML plus ``key=value`` overrides.

Why pydantic here and dataclasses elsewhere: a config file is an edge where users make mistakes, so every
field is checked and an error names the key and what to set (``rollout.samples_per_prompt: must be >= 2
for group-relative advantages; set rollout.samples_per_prompt=4``). Derived values are properties, never
settable. No torch here: the recipe turns this into the trainer's own ``TrainerConfig``.

    execrl train --config run.toml rollout.samples_per_prompt=8 optim.learning_rate=1e-5
    execrl train --print-config
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from execrl.inputs import InputFileError, read_text_file

_CONFIG_MAX_BYTES = 1 << 20

MAX_RESAMPLE_ROUNDS = 100  # bound on algorithm.max_resample_rounds (each round is a full generate call)


class ConfigError(ValueError):
    """A config file or override is wrong; the message names the key and what to set."""


class _Section(BaseModel):
    # No NaN or infinity anywhere: a NaN penalty or an infinite timeout is a typo, not a setting.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RunSection(_Section):
    name: str = Field("grpo-smollm2", min_length=1, description="also the run directory's name prefix")
    output_dir: str = "runs"
    seed: int = 0
    total_steps: int = Field(12, ge=1)
    max_wall_time_s: float = Field(
        11 * 60,
        gt=0,
        description="stop training (base eval included) past this budget; the final eval still runs",
    )
    inject_nan_loss_at_step: int | None = Field(
        None, ge=0, description="fault injection for testing alarms: that step's loss becomes NaN"
    )

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value: str) -> str:
        if "/" in value or "\0" in value or value in (".", "..") or len(value.encode("utf-8")) > 200:
            raise ValueError("must be a file name: no '/', no NUL, not '.' or '..', at most 200 bytes")
        return value


class ModelSection(_Section):
    path: str = Field("smollm2-135m-instruct", description="local HF directory, or the embedded default")
    dtype: Literal["float32", "bfloat16"] = "float32"
    torch_threads: int = Field(2, ge=1)


class TaskSection(_Section):
    # Mixture weights per built-in (or registered) suite; many domains trained jointly.
    suites: dict[str, float] = Field(default_factory=lambda: {"functions": 0.8, "structured": 0.2})
    max_difficulty: int = Field(1, ge=1, le=5, description="train only on tasks up to this difficulty")
    eval_suites: list[str] = Field(default_factory=lambda: ["functions", "structured"])
    eval_tasks_per_suite: int = Field(24, ge=1, description="spread evenly over the held-out split")

    @model_validator(mode="after")
    def _weights_positive(self) -> TaskSection:
        if not self.suites:
            raise ValueError("tasks.suites is empty; set e.g. tasks.suites={functions=1.0}")
        bad = {k: v for k, v in self.suites.items() if not v > 0}
        if bad:
            raise ValueError(f"tasks.suites weights must be > 0, got {bad}")
        return self

    @field_validator("suites")
    @classmethod
    def _train_suites_exist(cls, value: dict[str, float]) -> dict[str, float]:
        _check_suites(list(value), "train")
        return value

    @field_validator("eval_suites")
    @classmethod
    def _eval_suites_exist(cls, value: list[str]) -> list[str]:
        _check_suites(value, "test")
        return value


def _check_suites(names: list[str], split: str) -> None:
    """Each name is a task file path/URL, or a registered suite that has ``split`` (checked at load, so a
    typo fails before the model loads rather than after)."""
    from execrl.tasks.errors import SuiteError
    from execrl.tasks.registry import is_task_source, suite_splits

    for name in names:
        if is_task_source(name):
            continue
        try:
            splits = suite_splits(name)
        except SuiteError as exc:
            raise ValueError(str(exc)) from None
        if split not in splits:
            raise ValueError(f"suite {name!r} has no {split!r} split (it has {list(splits)})")


class RolloutSection(_Section):
    engine: str = Field(
        "hf", description="hf (shared-prompt decoding where supported) | hf-generic | <yours>"
    )
    prompts_per_step: int = Field(4, ge=1)
    samples_per_prompt: int = Field(8, ge=2, description=">= 2 for group-relative advantages")
    max_new_tokens: int = Field(96, ge=1)
    temperature: float = Field(0.7, gt=0, description="sampling temperature of training rollouts")
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0, description="0 disables top-k")
    eval_max_new_tokens: int = Field(128, ge=1)
    stream_scoring: bool = Field(
        False, description="score each group in the sandbox while the engine generates the next one"
    )


class AlgorithmSection(_Section):
    advantage_estimator: str = Field(
        "grpo", description="grpo | dr_grpo | rloo | reinforce_pp | gae (PPO with a learned value head)"
    )
    gamma: float = Field(1.0, ge=0, le=1, description="PPO/GAE discount")
    gae_lambda: float = Field(1.0, ge=0, le=1)
    value_coef: float = Field(0.5, ge=0)
    value_clip_eps: float = Field(0.2, gt=0)
    policy_loss: str = "ppo"
    loss_aggregation: str = "token-mean"
    std_eps: float = Field(1e-6, gt=0)
    clip_eps_low: float = Field(0.2, gt=0)
    clip_eps_high: float = Field(0.28, gt=0)
    clip_ratio_c: float = Field(3.0, gt=1)
    kl_coef: float = Field(0.0, ge=0, description="0 = no reference model is loaded or run")
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    kl_in_reward: bool = False
    entropy_coef: float = Field(0.0, ge=0)
    dynamic_sampling: bool = Field(False, description="DAPO: replace zero-variance groups by resampling")
    async_steps: int = Field(
        0, ge=0, le=1, description="1: rollout of step t+1 runs while step t trains (one-step-off); 0: serial"
    )
    offpolicy_is_cap: float = Field(
        2.0, ge=1, description="async: truncate the behaviour importance weight pi_prox/mu at this value"
    )
    max_resample_rounds: int = Field(
        3, ge=0, le=MAX_RESAMPLE_ROUNDS, description="extra sampling rounds per step for dynamic_sampling"
    )


class SchedulerSection(_Section):
    """Which tasks each step draws (``execrl.scheduler``): the static ``tasks.suites`` mixture, or the
    adaptive one that moves samples toward domains and tasks whose groups are informative."""

    mode: Literal["static", "adaptive"] = "adaptive"
    size_temperature: float = Field(
        0.0, ge=0, description="> 0: scale tasks.suites weights by n_tasks ** (1/T); 0 = off"
    )
    floor: float = Field(
        0.2, gt=0, le=1, description="adaptive: share of samples always spread by the static mixture"
    )
    domain_ema: float = Field(0.3, gt=0, le=1, description="adaptive: weight of a domain's newest group")
    task_ema: float = Field(0.5, gt=0, le=1, description="adaptive: weight of a task's newest group")
    revisit_weight: float = Field(
        0.01, gt=0, le=0.25, description="adaptive: weight of a solved/hopeless task (an unseen one is 0.25)"
    )
    staleness_steps: float = Field(200.0, gt=0, description="adaptive: steps for a solved task to double")


class OptimSection(_Section):
    learning_rate: float = Field(2e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    warmup_steps: int = Field(1, ge=0)
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    max_grad_norm: float = Field(1.0, gt=0)
    ppo_epochs: int = Field(1, ge=1)
    tokens_per_microbatch: int = Field(4096, ge=16)
    share_prompt_forward: bool = Field(
        True,
        description="compute each prompt once per micro-batch in the update (exact; execrl.trainer.prefix)",
    )


class RewardSection(_Section):
    mode: Literal["binary", "partial"] = "partial"
    no_code_penalty: float = 0.0
    syntax_error_penalty: float = 0.0
    timeout_penalty: float = 0.0
    verifiers: dict[str, str] = Field(
        default_factory=dict, description="extra domain -> 'module:function' verifiers"
    )


class SandboxSection(_Section):
    backend: str = "namespace"
    workers: int = Field(2, ge=1)
    timeout_s: float = Field(5.0, ge=0.01, le=3600, description="wall and CPU limit per program")
    memory_mb: int = Field(256, ge=16, le=65536, description="the sandbox's own bounds (sandbox.Limits)")
    urls: list[str] = Field(
        default_factory=list,
        description="sandbox service replicas (execrl sandbox serve); set: rewards run there, not in-process",
    )
    max_in_flight_per_replica: int = Field(8, ge=1, description="with urls: back-pressure per replica")
    max_attempts: int = Field(4, ge=1, description="with urls: attempts of a safe-to-retry failure")
    retry_backoff_s: float = Field(0.05, ge=0, description="with urls: first backoff, doubled per attempt")

    @model_validator(mode="after")
    def _urls_well_formed(self) -> SandboxSection:
        from execrl.sandbox.client import check_url  # no torch; aiohttp is a core dependency

        for url in self.urls:
            check_url(url)
        if len({u.rstrip("/") for u in self.urls}) != len(self.urls):
            raise ValueError(f"sandbox.urls lists a replica twice: {self.urls}")
        return self

    @field_validator("backend")
    @classmethod
    def _backend_known(cls, value: str) -> str:
        from execrl.sandbox.backends import list_backends

        if value not in list_backends():
            raise ValueError(
                f"unknown sandbox backend {value!r}; known backends: {', '.join(list_backends())}"
            )
        return value


class ExecutorSection(_Section):
    """Where generate-and-score runs (``execrl.distributed``). Resources are per role so a user can place
    them on a Ray cluster; the trainer driver is the ``execrl train`` process itself."""

    kind: Literal["inprocess", "ray"] = "inprocess"
    ray_address: str | None = Field(
        None, description="ray: an existing cluster (e.g. 10.0.0.1:6379); unset = local"
    )
    rollout_workers: int = Field(
        1, ge=1, description="ray: rollout actors, each with an engine and a model replica"
    )
    rollout_num_cpus: float = Field(1.0, ge=0)
    rollout_num_gpus: float = Field(0.0, ge=0)
    sandbox_workers: int = Field(1, ge=1, description="ray: sandbox actors, each scoring next to its sandbox")
    sandbox_num_cpus: float = Field(1.0, ge=0)
    max_weight_staleness: int = Field(
        0,
        ge=0,
        description="ray: no sample of step s comes from weights older than version s - this "
        "(updates behind the trainer when consumed); algorithm.async_steps=1 needs >= 1",
    )
    max_attempts: int = Field(3, ge=1, description="ray: attempts per task (a dead worker is replaced first)")
    retry_backoff_s: float = Field(0.2, ge=0, description="ray: first backoff, doubled per attempt")
    task_timeout_s: float = Field(
        600.0, gt=0, description="ray: a task running longer counts as a hung worker"
    )


class AlarmSection(_Section):
    """One alarm rule. Naming a default rule (see ``execrl.telemetry.default_alarm_rules``) overrides only
    the fields given here (``enabled=false`` removes it); any other name adds a rule."""

    name: str
    kind: str | None = None
    metric: str | None = None
    threshold: float | None = None
    window_steps: int | None = None
    action: Literal["log", "webhook", "stop"] | None = None
    enabled: bool | None = None


class TelemetrySection(_Section):
    tensorboard: bool = True
    mlflow: bool = False
    webhook_url: str | None = None
    default_alarms: bool = True
    alarms: list[AlarmSection] = Field(default_factory=list)

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url_valid(cls, value: str | None) -> str | None:
        from execrl.telemetry.webhook import WebhookConfig

        if value is not None:
            WebhookConfig(url=value)  # raises naming the problem
        return value

    @field_validator("alarms")
    @classmethod
    def _rules_valid(cls, value: list[AlarmSection], info: ValidationInfo) -> list[AlarmSection]:
        """Build the rules now (as the run will), so a bad rule fails before the model loads."""
        from execrl.telemetry.alarms import alarm_rules_from_config

        items = [a.model_dump(exclude_none=True) for a in value]
        try:
            rules = alarm_rules_from_config(items, include_defaults=info.data.get("default_alarms", True))
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        needs_hook = sorted(r.name for r in rules if r.action == "webhook")
        if needs_hook and info.data.get("webhook_url") is None:
            raise ValueError(f"alarm rule(s) {needs_hook} use action 'webhook'; set telemetry.webhook_url")
        return value


class CheckpointSection(_Section):
    every_steps: int = Field(5, ge=1)
    keep_last: int = Field(2, ge=1)


class EvalSection(_Section):
    enabled: bool = True
    samples_per_task: int = Field(4, ge=1)
    temperature: float = Field(
        0.7, ge=0, description="0 = greedy; the default matches training's sampling temperature"
    )
    bootstrap_resamples: int = Field(2000, ge=100)


class AuditSection(_Section):
    """The reward audit (``execrl.recipes.audit``): held-back tests re-run on passing completions."""

    enabled: bool = True
    share: float = Field(
        0.1, ge=0, le=1, description="share of passes without a blind audit re-run on audit tests per step"
    )
    flagged_per_step: int = Field(8, ge=0, description="suspicious completions kept in hack.jsonl per step")


class RefineSection(_Section):
    """Multi-turn RL on execution feedback (``recipes/refine_rl.py``, RLEF-style).

    The multi-turn fields only mean something with ``max_turns > 1``; set with ``max_turns = 1`` they
    would be silently ignored, so ``TrainConfig`` refuses that (and the loop features the multi-turn
    recipe does not run: PPO's value head, async or streamed rollouts, DAPO dynamic sampling).
    """

    max_turns: int = Field(
        1, ge=1, le=8, description="model turns per episode; 1 = single-turn GRPO, > 1 = multi-turn refine RL"
    )
    feedback: Literal["pass_fail", "names", "details"] = Field(
        "details", description="what the model sees after a failed turn (execrl.refine.feedback)"
    )
    invalid_turn_penalty: float = Field(
        0.0, ge=0, le=1, description="reward subtracted per turn without valid code (no code, syntax error)"
    )

    @property
    def multi_turn(self) -> bool:
        return self.max_turns > 1


class TrainConfig(_Section):
    run: RunSection = RunSection()
    model: ModelSection = ModelSection()
    tasks: TaskSection = TaskSection()
    rollout: RolloutSection = RolloutSection()
    algorithm: AlgorithmSection = AlgorithmSection()
    optim: OptimSection = OptimSection()
    reward: RewardSection = RewardSection()
    sandbox: SandboxSection = SandboxSection()
    telemetry: TelemetrySection = TelemetrySection()
    checkpoint: CheckpointSection = CheckpointSection()
    eval: EvalSection = EvalSection()
    audit: AuditSection = AuditSection()
    scheduler: SchedulerSection = SchedulerSection()
    refine: RefineSection = RefineSection()
    executor: ExecutorSection = ExecutorSection()

    @model_validator(mode="after")
    def _ray_staleness_covers_the_loop(self) -> TrainConfig:
        executor = self.executor
        if executor.kind == "ray" and self.algorithm.async_steps > executor.max_weight_staleness:
            raise ValueError(
                f"algorithm.async_steps={self.algorithm.async_steps} samples each step with weights "
                f"{self.algorithm.async_steps} update(s) old, beyond executor.max_weight_staleness="
                f"{executor.max_weight_staleness}; set executor.max_weight_staleness="
                f"{self.algorithm.async_steps} (or more)"
            )
        if executor.kind == "ray" and self.refine.max_turns > 1:
            raise ValueError(
                "executor.kind=ray does not run the multi-turn refine recipe; use executor.kind=inprocess"
            )
        return self

    @property
    def sequences_per_step(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.samples_per_prompt

    @model_validator(mode="after")
    def _refine_settings_apply(self) -> TrainConfig:
        """Refuse what the multi-turn recipe would ignore; each message says what to set."""
        refine = self.refine
        if not refine.multi_turn:
            unused = [
                f"refine.{key}={value!r}"
                for key, value in (
                    ("feedback", refine.feedback),
                    ("invalid_turn_penalty", refine.invalid_turn_penalty),
                )
                if value != RefineSection.model_fields[key].default
            ]
            if unused:
                raise ValueError(
                    f"{', '.join(unused)}: used only by multi-turn refine RL; set refine.max_turns >= 2 "
                    "or remove them"
                )
            return self
        alg = self.algorithm
        refused = {
            "algorithm.advantage_estimator=gae (PPO's value head)": alg.advantage_estimator == "gae",
            "algorithm.async_steps > 0": alg.async_steps > 0,
            "rollout.stream_scoring=true": self.rollout.stream_scoring,
            "algorithm.dynamic_sampling=true": alg.dynamic_sampling,
        }
        bad = [what for what, on in refused.items() if on]
        if bad:
            raise ValueError(
                f"refine.max_turns={refine.max_turns} (multi-turn refine RL) does not run {', '.join(bad)}; "
                "turn them off, or set refine.max_turns=1 for the single-turn loop"
            )
        return self


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (["a", "b"], value); the value is read as TOML, else kept as a string."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like section.key=value")
    key, raw = item.split("=", 1)
    path = key.strip().split(".")
    if not all(path):
        raise ConfigError(f"override {item!r} has an empty key part")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return path, value


def _apply(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {'.'.join(path)}: {part} is not a section")
    node[path[-1]] = value


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a TOML file (optional), apply overrides, validate. Errors name the key and what to set."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(read_text_file(path, "config file", max_bytes=_CONFIG_MAX_BYTES))
        except InputFileError as exc:
            raise ConfigError(str(exc)) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
        except RecursionError:
            raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None
    for item in overrides:
        key_path, value = parse_override(item)
        _apply(data, key_path, value)
    return validate_config(data, source=str(path) if path else "overrides")


def validate_config(data: dict[str, Any], *, source: str = "config") -> TrainConfig:
    bad_key = _surrogate_key(data, "")
    if bad_key is not None:
        raise ConfigError(f"{source}: {bad_key}: not valid Unicode text (a lone surrogate); use UTF-8")
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            hint = (
                "unknown key; check the spelling with --print-config"
                if err["type"] == "extra_forbidden"
                else err["msg"].removeprefix("Value error, ")
            )
            # A check across sections (no key of its own) names the keys in its message already.
            lines.append(
                f"{key}: {hint} (got {_short(err.get('input'))}); set it as {key}=VALUE" if key else hint
            )
        if len(lines) == 1:
            raise ConfigError(f"{source}: invalid configuration: {lines[0]}") from exc
        text = "\n".join(f"  {line}" for line in lines)
        raise ConfigError(f"{source}: invalid configuration:\n{text}") from exc


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def to_toml(config: TrainConfig) -> str:
    """Render the resolved config as TOML (what ``--print-config`` shows and the run dir keeps)."""
    out: list[str] = []
    data = config.model_dump()
    for section, values in data.items():
        tables = {k: v for k, v in values.items() if isinstance(v, list) and v and isinstance(v[0], dict)}
        out.append(f"[{section}]")
        for key, value in values.items():
            if key in tables or value is None:
                continue
            out.append(f"{key} = {_toml_value(value)}")
        out.append("")
        for key, rows in tables.items():
            for row in rows:
                out.append(f"[[{section}.{key}]]")
                out.extend(f"{k} = {_toml_value(v)}" for k, v in row.items() if v is not None)
                out.append("")
    return "\n".join(out)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return _toml_string(value)
    return repr(value)


def _toml_string(text: str) -> str:
    """A TOML basic string. Not ``json.dumps``: its ``\\ud83d\\ude00`` surrogate pairs for characters
    beyond the BMP are invalid TOML, so a run named with an emoji could not be resumed (issue 14, class 7).
    Characters are kept as they are; only quotes, backslashes and control characters are escaped."""
    out = []
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ConfigError(f"string {text[:60]!r} holds a lone surrogate, which TOML cannot store")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _surrogate_key(value: Any, path: str) -> str | None:
    """The dotted key of the first string holding a lone surrogate (undecodable bytes from argv)."""
    if isinstance(value, str):
        return path if any(0xD800 <= ord(c) <= 0xDFFF for c in value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and _surrogate_key(key, path) is not None:
            return f"{path}.{key}".lstrip(".")
        found = _surrogate_key(item, f"{path}.{key}".lstrip("."))
        if found is not None:
            return found
    return None
