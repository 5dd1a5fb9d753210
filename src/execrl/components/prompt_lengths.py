"""The prompt-length cap's setup: each training task's prompt length, the context bound, the stages' suites.

Each prompt is rendered as the single-turn rollout renders it (``encode_prompts`` of ``prompt_for_chat``:
chat template, generation prompt) and tokenised once here; the stages (``execrl.scheduler.prompt_cap``) are
then plain filtering. What each stage leaves out is logged at start, per suite, so no task disappears
without a line saying so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from execrl.config import ConfigError, TrainConfig, build
from execrl.rollout.prompts import encode_prompts
from execrl.scheduler.prompt_cap import PromptCapSettings, PromptStage, prompt_stages
from execrl.tasks.schema import Task, prompt_for_chat

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger("execrl.train")

__all__ = ["context_prompt_cap", "largest_completion_cap", "prompt_token_counts", "run_prompt_stages"]


def prompt_token_counts(
    tokenizer: PreTrainedTokenizerBase, suites: Mapping[str, Sequence[Task]]
) -> dict[str, int]:
    """Task id -> tokens of its rendered prompt, over every suite."""
    tasks = [t for name in sorted(suites) for t in suites[name]]
    encoded = encode_prompts(tokenizer, [prompt_for_chat(t.prompt) for t in tasks])
    return {t.id: len(ids) for t, ids in zip(tasks, encoded, strict=True)}


def largest_completion_cap(config: TrainConfig) -> int:
    """The most new tokens any step of the run may generate: ``rollout.max_new_tokens``, its stages, and the
    automatic rise's bound when rising."""
    rollout = config.rollout
    rises = [rollout.length_rise_max_tokens] if rollout.length_rise_factor > 1 else []
    return max([rollout.max_new_tokens, *(cap for _, cap in rollout.max_new_tokens_stages), *rises])


def context_prompt_cap(config: TrainConfig, context_tokens: int) -> int:
    """The most prompt tokens the model's context (``context_tokens``, 0 = unknown) leaves next to the
    largest completion cap; 0 = no bound. Raises when the completion cap alone fills the context."""
    if context_tokens <= 0:
        return 0
    completion = largest_completion_cap(config)
    if completion >= context_tokens:
        raise ValueError(
            f"the largest completion cap of the run ({completion} new tokens: rollout.max_new_tokens, its stages "
            f"and length_rise_max_tokens) leaves no room for a prompt in the model's context of {context_tokens} "
            "tokens (max_position_embeddings); lower it"
        )
    return context_tokens - completion


def run_prompt_stages(
    config: TrainConfig,
    suites: Mapping[str, Sequence[Task]],
    tokenizer: PreTrainedTokenizerBase,
    *,
    context_tokens: int,
) -> tuple[PromptStage[Task], ...]:
    """The run's prompt-cap stages over ``suites`` (the training mixture), logged. Raises ``ConfigError``
    (naming the key: a refusal at start, before the run directory exists) for a suite a stage leaves
    empty or a completion cap that fills the model's context."""
    settings = build(PromptCapSettings, config.rollout)
    counts = prompt_token_counts(tokenizer, suites)
    try:
        bound = context_prompt_cap(config, context_tokens)
        stages = prompt_stages(settings, suites, config.tasks.suites, counts, context_cap=bound)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for stage in stages:
        left_out = ", ".join(f"{name}: {n}/{len(suites[name])}" for name, n in stage.excluded.items())
        level = logging.WARNING if stage.excluded_total else logging.INFO
        log.log(
            level,
            "prompt cap from step %d: %s tokens (context bound %s); tasks over it, not drawn: %s",
            stage.from_step, stage.cap or "none", bound or "none", left_out,
        )  # fmt: skip
    return stages
