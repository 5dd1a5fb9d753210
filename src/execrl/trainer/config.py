"""``TrainerConfig``: every knob of the policy update, typed, with units in the names, validated up front.

No torch import here: recipes and config files validate a trainer config without paying for torch.
Names of registered functions (``policy_loss``, ``advantage_estimator``) are checked where they are looked up
(``execrl.trainer.losses.POLICY_LOSSES`` / ``execrl.trainer.advantages.ADVANTAGE_ESTIMATORS``), and those
errors list the known names; plugins may register theirs after the config is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LOSS_AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3")
LR_SCHEDULES = ("constant", "linear", "cosine")
PRECISIONS = ("fp32", "bf16-mixed")  # execrl.trainer.precision
# Advantage estimators that learn a value function (PPO's GAE over a value head's per-token values); every
# other name is an outcome estimator of ``ADVANTAGE_ESTIMATORS`` (rewards and groups only).
VALUE_ESTIMATORS = frozenset({"gae"})


@dataclass(frozen=True)
class TrainerConfig:
    """Policy-update settings. Defaults follow DeepSeekMath GRPO / verl (token-mean, eps 0.2, dual clip 3).

    Steps: ``warmup_steps`` and ``total_steps`` count calls to ``policy_update`` (one per rollout batch); the LR
    scheduler advances once per call, so all ``ppo_epochs * optimizer_steps_per_epoch`` optimizer steps of one
    rollout batch use the same learning rate.
    """

    # Optimizer (AdamW) and LR schedule.
    learning_rate: float = 1e-6
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    lr_schedule: str = "constant"  # constant | linear | cosine (after linear warm-up)
    warmup_steps: int = 0
    total_steps: int | None = None  # needed by linear/cosine decay
    min_lr_ratio: float = 0.0  # floor of the decay, as a fraction of learning_rate
    max_grad_norm: float = 1.0  # math.inf disables clipping (the norm is still reported)
    # Update structure.
    ppo_epochs: int = 1
    optimizer_steps_per_epoch: int = 1  # the rollout batch is split into this many mini-batches (by sequence)
    tokens_per_microbatch: int = 8192  # padded tokens (rows x width) per forward/backward
    # Policy loss.
    policy_loss: str = "ppo"  # registry name: ppo | gspo | <yours>
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2  # DAPO "clip-higher" uses 0.28
    clip_ratio_c: float | None = 3.0  # dual-clip bound for negative advantages; None disables
    loss_aggregation: str = "token-mean"
    loss_sum_norm_length: int | None = (
        None  # seq-mean-token-sum-norm divisor; None = longest response in step
    )
    loss_sum_norm_by_sequences: bool = False  # also divide by #sequences (TRL "dr_grpo"); verl does not
    # Advantages (outcome rewards) and PPO value function.
    advantage_estimator: str = "grpo"  # registry name: grpo | dr_grpo | rloo | reinforce_pp | ...
    advantage_std_eps: float = 1e-6  # verl/slime 1e-6; TRL uses 1e-4
    gamma: float = 1.0
    gae_lambda: float = 1.0
    value_coef: float = 0.5
    value_clip_eps: float = 0.2
    # KL to the frozen reference and entropy bonus.
    kl_coef: float = 0.0  # 0 => no reference model is loaded or run
    kl_estimator: str = "k3"  # k1 | k2 | k3 (Schulman); k3 = verl "low_var_kl"
    kl_in_reward: bool = False  # False: KL term in the loss; True: per-token penalty folded into rewards
    entropy_coef: float = 0.0
    # Log-prob computation.
    logprob_temperature: float = 1.0  # must equal the sampling temperature (TRL #4159)
    logprob_chunk_tokens: int = 1024  # tokens per lm_head/log_softmax chunk
    share_prompt_forward: bool = True  # rows with the same prompt compute it once (execrl.trainer.prefix)
    gradient_checkpointing: bool = False  # recompute each decoder layer in backward (trainer.checkpointing)
    precision: str = "fp32"  # fp32 | bf16-mixed: bf16 compute, fp32 master weights (trainer.precision)
    seed: int = 0  # for the loop to seed with; the update itself draws no random numbers

    def __post_init__(self) -> None:
        _check_positive_finite("learning_rate", self.learning_rate)
        _check_range("weight_decay", self.weight_decay, 0.0, math.inf)
        _check_range("adam_beta1", self.adam_beta1, 0.0, 1.0, hi_open=True)
        _check_range("adam_beta2", self.adam_beta2, 0.0, 1.0, hi_open=True)
        _check_positive_finite("adam_eps", self.adam_eps)
        _check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        _check_int("warmup_steps", self.warmup_steps, minimum=0)
        if self.total_steps is not None:
            _check_int("total_steps", self.total_steps, minimum=1)
            if self.warmup_steps > self.total_steps:
                raise ValueError(
                    f"TrainerConfig.warmup_steps={self.warmup_steps} exceeds total_steps={self.total_steps}; "
                    "lower warmup_steps or raise total_steps"
                )
        elif self.lr_schedule != "constant":
            raise ValueError(
                f"TrainerConfig.lr_schedule={self.lr_schedule!r} decays towards total_steps, which is unset; "
                "set total_steps (number of policy_update calls) or use lr_schedule='constant'"
            )
        _check_range("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0)
        if not (self.max_grad_norm > 0):
            raise ValueError(
                f"TrainerConfig.max_grad_norm must be > 0 (math.inf disables clipping), got {self.max_grad_norm}"
            )
        _check_int("ppo_epochs", self.ppo_epochs, minimum=1)
        _check_int("optimizer_steps_per_epoch", self.optimizer_steps_per_epoch, minimum=1)
        _check_int("tokens_per_microbatch", self.tokens_per_microbatch, minimum=1)
        _check_choice("precision", self.precision, PRECISIONS)
        self._check_loss()
        self._check_advantage_and_kl()

    def _check_loss(self) -> None:
        if not self.policy_loss:
            raise ValueError("TrainerConfig.policy_loss is empty; set it to a registered name such as 'ppo'")
        _check_range("clip_eps_low", self.clip_eps_low, 0.0, 1.0, hi_open=True)
        _check_range("clip_eps_high", self.clip_eps_high, 0.0, math.inf)
        if self.clip_ratio_c is not None and not (
            self.clip_ratio_c > 1.0 and math.isfinite(self.clip_ratio_c)
        ):
            raise ValueError(
                f"TrainerConfig.clip_ratio_c must be a finite number > 1 (verl uses 3.0) or None to disable "
                f"dual clipping, got {self.clip_ratio_c}"
            )
        _check_choice("loss_aggregation", self.loss_aggregation, LOSS_AGGREGATIONS)
        if self.loss_sum_norm_length is not None:
            _check_int("loss_sum_norm_length", self.loss_sum_norm_length, minimum=1)

    def _check_advantage_and_kl(self) -> None:
        if not self.advantage_estimator:
            raise ValueError(
                "TrainerConfig.advantage_estimator is empty; set a registered name such as 'grpo'"
            )
        _check_positive_finite("advantage_std_eps", self.advantage_std_eps)
        _check_range("gamma", self.gamma, 0.0, 1.0)
        _check_range("gae_lambda", self.gae_lambda, 0.0, 1.0)
        _check_range("value_coef", self.value_coef, 0.0, math.inf)
        _check_positive_finite("value_clip_eps", self.value_clip_eps)
        _check_range("kl_coef", self.kl_coef, 0.0, math.inf)
        _check_choice("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        _check_range("entropy_coef", self.entropy_coef, 0.0, math.inf)
        _check_positive_finite("logprob_temperature", self.logprob_temperature)
        _check_int("logprob_chunk_tokens", self.logprob_chunk_tokens, minimum=1)
        _check_int("seed", self.seed, minimum=0)


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapters on the policy (``execrl.trainer.lora``, built from ``[lora]`` by name).

    An adapter on a linear layer ``W`` [out, in] adds ``(alpha / rank) * B @ A`` with ``A`` [rank, in]
    (random) and ``B`` [out, rank] (zero at the start, so the adapted model starts as the base model).
    ``dropout`` applies to the adapters' input in the update's gradient passes only.
    """

    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )

    def __post_init__(self) -> None:
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"LoraSettings.rank must be an integer >= 1, got {self.rank!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, int) or self.alpha < 1:
            raise ValueError(f"LoraSettings.alpha must be an integer >= 1, got {self.alpha!r}")
        if not (isinstance(self.dropout, int | float) and 0.0 <= self.dropout < 1.0):
            raise ValueError(f"LoraSettings.dropout must lie in [0, 1), got {self.dropout!r}")
        if not self.target_modules or any(not name for name in self.target_modules):
            raise ValueError(f"LoraSettings.target_modules must name modules, got {self.target_modules!r}")

    @property
    def scaling(self) -> float:
        """What multiplies ``B @ A``: alpha / rank."""
        return self.alpha / self.rank


def needs_reference(config: TrainerConfig) -> bool:
    """Whether a frozen reference model must be loaded and run: only when the KL coefficient is non-zero.

    The KL can sit in the loss or in the reward (``kl_in_reward``); both need reference log-probs. With
    ``kl_coef == 0`` the loop must skip loading the reference entirely (it costs a full model's memory and a
    forward pass per step).
    """
    return config.kl_coef > 0.0


def learns_values(advantage_estimator: str) -> bool:
    """Whether ``advantage_estimator`` is PPO's: GAE on a learned value head (``VALUE_ESTIMATORS``), which the
    PPO recipe trains with the policy; the outcome estimators (GRPO and its variants) need no value head."""
    return advantage_estimator in VALUE_ESTIMATORS


def _check_positive_finite(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"TrainerConfig.{name} must be a finite number > 0, got {value!r}")


def _check_range(name: str, value: float, lo: float, hi: float, *, hi_open: bool = False) -> None:
    ok = (
        isinstance(value, int | float)
        and not math.isnan(value)
        and lo <= value
        and (value < hi if hi_open else value <= hi)
    )
    if not ok:
        bracket = ")" if hi_open else "]"
        raise ValueError(f"TrainerConfig.{name} must lie in [{lo}, {hi}{bracket}, got {value!r}")


def _check_int(name: str, value: int, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"TrainerConfig.{name} must be an integer >= {minimum}, got {value!r}")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"TrainerConfig.{name}={value!r} is not one of: {', '.join(choices)}")
