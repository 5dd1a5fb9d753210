"""``[rollout]``, ``[algorithm]``, ``[optim]`` and ``[refine]``: how a step samples, which advantages and
losses it uses, how the optimizer steps, and the multi-turn recipe's knobs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from execrl.config.base import Section

MAX_RESAMPLE_ROUNDS = 100  # bound on algorithm.max_resample_rounds (each round is a full generate call)


class RolloutSection(Section):
    """Sampling: the engine, the groups of a step and the decoding of training (and eval) completions."""

    engine: str = Field(
        "hf",
        description="hf (shared-prompt decoding where supported) | hf-generic | vllm (its own process and "
        "venv: scripts/setup.sh --vllm; [vllm], docs/engines.md) | <yours>",
    )
    environment: str = Field(
        "",
        description="what an episode is: '' = single (one turn), refine with refine.max_turns > 1, tools with "
        "tools.enabled; or a registered environment name / 'module:Class' (execrl.episodes.environment)",
    )
    prompts_per_step: int = Field(4, ge=1, description="tasks drawn per step, one group each")
    samples_per_prompt: int = Field(8, ge=2, description=">= 2 for group-relative advantages")
    max_new_tokens: int = Field(96, ge=1, description="most tokens generated per training completion")
    temperature: float = Field(0.7, gt=0, description="sampling temperature of training rollouts")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling of training rollouts; 1 = off")
    top_k: int = Field(0, ge=0, description="0 disables top-k")
    eval_max_new_tokens: int = Field(
        128, ge=1, description="most tokens generated per completion in the base/trained evaluation"
    )
    stream_scoring: bool = Field(
        False, description="score each group in the sandbox while the engine generates the next one"
    )
    max_new_tokens_stages: list[tuple[int, int]] = Field(
        default_factory=list,
        description="length curriculum: [from_step, max_new_tokens] pairs, the cap from that step on "
        "(before the first: max_new_tokens); [] = max_new_tokens throughout (execrl.scheduler.length)",
    )
    length_rise_factor: float = Field(
        1.0, ge=1, description="multiply the cap by this when truncation stays high (below); 1 = off"
    )
    length_rise_truncation: float = Field(
        0.2, ge=0, lt=1, description="truncation rate above which a step counts towards a rise of the cap"
    )
    length_rise_window_steps: int = Field(
        3, ge=1, description="consecutive steps above length_rise_truncation that raise the cap"
    )
    length_rise_max_tokens: int = Field(
        0, ge=0, description="the most the automatic rise takes the cap to (>= max_new_tokens when rising)"
    )
    max_prompt_tokens: int = Field(
        0,
        ge=0,
        description="prompt-length cap: only training tasks whose prompt (chat template applied) has at most "
        "this many tokens are drawn; 0 = no cap (the model's context less the completion cap still bounds "
        "it; execrl.scheduler.prompt_cap)",
    )
    max_prompt_tokens_stages: list[tuple[int, int]] = Field(
        default_factory=list,
        description="prompt-length stages: [from_step, max_prompt_tokens] pairs, the cap from that step on "
        "(0 = none; before the first: max_prompt_tokens); [] = max_prompt_tokens throughout",
    )


class AlgorithmSection(Section):
    """Advantages, policy loss, KL and entropy terms, DAPO dynamic sampling and the async loop."""

    advantage_estimator: str = Field(
        "grpo", description="grpo | dr_grpo | rloo | reinforce_pp | gae (PPO with a learned value head)"
    )
    gamma: float = Field(1.0, ge=0, le=1, description="PPO/GAE discount")
    gae_lambda: float = Field(1.0, ge=0, le=1, description="PPO/GAE: lambda of the advantage estimate")
    value_coef: float = Field(0.5, ge=0, description="PPO: weight of the value loss in the loss")
    value_clip_eps: float = Field(0.2, gt=0, description="PPO: clip range of the values' change per update")
    policy_loss: str = Field(
        "ppo", description="ppo (clipped token ratios) | gspo (sequence ratio) | <yours> (a registered loss)"
    )
    loss_aggregation: str = Field(
        "token-mean",
        description="token-mean | seq-mean-token-mean | seq-mean-token-sum | seq-mean-token-sum-norm",
    )
    std_eps: float = Field(1e-6, gt=0, description="added to a group's reward std before dividing (GRPO)")
    clip_eps_low: float = Field(0.2, gt=0, description="the clipped ratio's lower bound is 1 - this")
    clip_eps_high: float = Field(
        0.28, gt=0, description="the clipped ratio's upper bound is 1 + this (DAPO clip-higher)"
    )
    clip_ratio_c: float = Field(3.0, gt=1, description="dual clip: the ratio's bound for negative advantages")
    kl_coef: float = Field(0.0, ge=0, description="0 = no reference model is loaded or run")
    kl_estimator: Literal["k1", "k2", "k3"] = Field(
        "k3", description="KL to the reference: k1 (log ratio) | k2 | k3 (low variance)"
    )
    kl_in_reward: bool = Field(False, description="fold the KL into the token rewards instead of the loss")
    entropy_coef: float = Field(0.0, ge=0, description="weight of the entropy bonus; 0 = off")
    dynamic_sampling: bool = Field(False, description="DAPO: replace zero-variance groups by resampling")
    async_steps: int = Field(
        0, ge=0, le=1, description="1: rollout of step t+1 runs while step t trains (one-step-off); 0: serial"
    )
    offpolicy_is_cap: float = Field(
        2.0,
        ge=1,
        description="async, and engine_correction: truncate the behaviour importance weight pi/mu at this value",
    )
    engine_correction: bool = Field(
        True,
        description="with an engine other than the trainer's own forward (rollout.engine=vllm): recompute the "
        "old log-probs with the trainer and weight each token by min(pi_old/mu, offpolicy_is_cap), mu the "
        "engine's (truncated importance sampling); false: the trainer's old log-probs without the weights",
    )
    max_resample_rounds: int = Field(
        3, ge=0, le=MAX_RESAMPLE_ROUNDS, description="extra sampling rounds per step for dynamic_sampling"
    )
    overlong_buffer_tokens: int = Field(
        0,
        ge=0,
        description="DAPO overlong shaping: a linear penalty over the last this-many tokens before the cap, "
        "-overlong_penalty_factor at the cap; 0 = off (execrl.rewards.overlong)",
    )
    overlong_penalty_factor: float = Field(
        1.0, ge=0, description="DAPO overlong shaping: the penalty of a completion cut at the cap"
    )
    overlong_filtering: bool = Field(
        False, description="DAPO overlong filtering: completions cut at the cap are masked out of the loss"
    )

    @property
    def learns_values(self) -> bool:
        """PPO: the advantages come from a learned value head (``execrl.trainer.learns_values``)."""
        from execrl.trainer.config import learns_values

        return learns_values(self.advantage_estimator)


class OptimSection(Section):
    """AdamW, its learning-rate schedule, and the update's passes and micro-batches."""

    learning_rate: float = Field(2e-5, gt=0, description="AdamW learning rate after warm-up")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (every parameter)")
    warmup_steps: int = Field(1, ge=0, description="steps of linear learning-rate warm-up")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="after warm-up: constant, or a linear/cosine decay to 0 at run.total_steps"
    )
    max_grad_norm: float = Field(1.0, gt=0, description="clip the gradient's norm to this")
    ppo_epochs: int = Field(
        1, ge=1, description="passes over each rollout batch (> 1: old log-probs recomputed)"
    )
    tokens_per_microbatch: int = Field(
        4096, ge=16, description="padded tokens (rows x width) per forward/backward; gradients accumulate"
    )
    share_prompt_forward: bool = Field(
        True,
        description="compute each prompt once per micro-batch in the update (exact; execrl.trainer.prefix)",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="recompute each decoder layer in backward: activations of one layer at a time for about "
        "one more forward pass (long prompts; execrl.trainer.checkpointing)",
    )


class RefineSection(Section):
    """Multi-turn RL on execution feedback (``refine/env.py`` on the rollout loop, RLEF-style).

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
