"""The prompt-length cap: which tasks each step may draw, by the token length of their rendered prompt.

Why: a long-context run starts on short prompts and lengthens them in stages, like the completion cap
(``length.py``; DeepScaleR and DeepCoder stage their context by hand, ``shared/research/tools_and_context.md``
§2), and a task whose prompt plus the completion cap exceeds the model's context must never be drawn (the
model would be run past its positions without a word).

- ``rollout.max_prompt_tokens``: the cap before the first stage; 0 = no cap.
- ``rollout.max_prompt_tokens_stages``: ``[from_step, cap]`` pairs, the cap from that step on (0 = none).
- The context bound (``context_cap``, computed by the caller from the model and the largest completion cap
  of the run) lowers every stage's cap to what the context leaves.

Each stage's suites are the mixture's suites filtered by its cap, computed once at setup from each task's
prompt length (tokenised once), so they are known upfront and the tasks of step t stay a pure function of
(seed, suites, weights, step, stages): the scheduler of a step is the one built on its stage's suites
(``static.StagedScheduler``, nothing to checkpoint), or the adaptive scheduler draws from the stage's
suites with its scores spanning the stages (``AdaptiveScheduler.stages``; its state is checkpointed as
before). A suite with weight > 0 left with no task under a stage's cap raises, naming the suite and the stage.

Limits: the context bound uses the largest completion cap of the whole run (stages and the automatic
rise's bound), not the stage's own; the prompt counted is the single-turn rollout's (multi-turn and tool
episodes render theirs differently and are refused with a cap); evaluation is not capped (its own suites).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic

from execrl.scheduler.adaptive import T

__all__ = ["PromptCapSettings", "PromptStage", "prompt_cap_metrics", "prompt_stages", "stage_at"]


@dataclass(frozen=True)
class PromptCapSettings:
    """The knobs (``[rollout]``); see the module docstring."""

    max_prompt_tokens: int = 0  # 0 = no cap
    max_prompt_tokens_stages: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        stages = [tuple(s) for s in self.max_prompt_tokens_stages]
        if self.max_prompt_tokens < 0 or any(len(s) != 2 or s[0] < 0 or s[1] < 0 for s in stages):
            raise ValueError(
                "rollout.max_prompt_tokens must be >= 0 and each rollout.max_prompt_tokens_stages entry "
                f"[from_step >= 0, max_prompt_tokens >= 0] (0 = no cap); got {self.max_prompt_tokens}, {stages}"
            )
        steps = [s[0] for s in stages]
        if steps != sorted(set(steps)):
            raise ValueError(
                f"rollout.max_prompt_tokens_stages: from_step must strictly increase; got {steps}"
            )

    def stages(self) -> tuple[tuple[int, int], ...]:
        """``(from_step, cap)`` from step 0 on: ``max_prompt_tokens`` until the first stage, then the stages."""
        given = tuple((int(s), int(c)) for s, c in self.max_prompt_tokens_stages)
        return given if given and given[0][0] == 0 else ((0, self.max_prompt_tokens), *given)

    def cap(self, step: int) -> int:
        """The configured cap of step ``step`` (0 = none; the context bound is applied by ``prompt_stages``)."""
        return [c for s, c in self.stages() if s <= step][-1]


@dataclass(frozen=True)
class PromptStage(Generic[T]):
    """One stage: from which step, its cap in effect (0 = none), its filtered suites, and what it left out."""

    from_step: int
    cap: int
    suites: Mapping[str, Sequence[T]]
    excluded: Mapping[str, int]  # suite -> tasks over the cap

    @property
    def excluded_total(self) -> int:
        return sum(self.excluded.values())


def effective_cap(configured: int, context_cap: int) -> int:
    """The smaller of two caps where 0 means none."""
    caps = [c for c in (configured, context_cap) if c > 0]
    return min(caps) if caps else 0


def prompt_stages(
    settings: PromptCapSettings,
    suites: Mapping[str, Sequence[T]],
    weights: Mapping[str, float],
    prompt_tokens: Mapping[str, int],
    *,
    context_cap: int = 0,
) -> tuple[PromptStage[T], ...]:
    """Each stage's suites (those in ``weights``) filtered to the tasks with ``prompt_tokens[task.id] <= cap``.

    ``prompt_tokens``: task id -> tokens of its rendered prompt; ``context_cap``: the most prompt tokens the
    model's context leaves (0 = unknown, no bound). Raises when a suite is left with no task."""
    out = []
    for from_step, configured in settings.stages():
        cap = effective_cap(configured, context_cap)
        kept: dict[str, list[T]] = {}
        for name in sorted(weights):
            tasks = suites[name]
            kept[name] = [t for t in tasks if cap == 0 or _tokens(prompt_tokens, name, t.id) <= cap]
            if tasks and not kept[name]:
                shortest = min(_tokens(prompt_tokens, name, t.id) for t in tasks)
                raise ValueError(
                    f"suite {name!r} (weight {weights[name]}) has no task with a prompt of at most {cap} tokens "
                    f"from step {from_step} ({_why(configured, cap)}); its shortest prompt has {shortest} "
                    "tokens: raise the cap of that stage or drop the suite"
                )
        excluded = {name: len(suites[name]) - len(kept[name]) for name in kept}
        out.append(PromptStage(from_step=from_step, cap=cap, suites=kept, excluded=excluded))
    return tuple(out)


def _tokens(prompt_tokens: Mapping[str, int], suite: str, task_id: str) -> int:
    if task_id not in prompt_tokens:
        raise ValueError(f"no prompt length for task {task_id!r} of suite {suite!r}")
    return prompt_tokens[task_id]


def _why(configured: int, cap: int) -> str:
    if configured == cap:
        return "rollout.max_prompt_tokens / max_prompt_tokens_stages"
    return (
        f"the model's context less the largest completion cap; the stage's own cap is {configured or 'none'}"
    )


def stage_at(stages: Sequence[PromptStage[T]], step: int) -> PromptStage[T]:
    """The stage step ``step`` draws from (the last one starting at or before it)."""
    if not stages or stages[0].from_step != 0 or step < 0:
        raise ValueError(f"need stages from step 0 and step >= 0; got {len(stages)} stages, step {step}")
    return [s for s in stages if s.from_step <= step][-1]


def prompt_cap_metrics(stages: Sequence[PromptStage[T]], step: int) -> dict[str, float]:
    """``rollout/max_prompt_tokens`` (the step's cap in effect, 0 = none) and ``rollout/tasks_over_prompt_cap`` (the
    mixture's tasks it leaves out); empty without stages."""
    if not stages:
        return {}
    stage = stage_at(stages, step)
    return {
        "rollout/max_prompt_tokens": float(stage.cap),
        "rollout/tasks_over_prompt_cap": float(stage.excluded_total),
    }
