"""The length curriculum: the completion-length cap (``rollout.max_new_tokens``) of each step.

Why: a cap too small truncates nearly every completion, and then rewards, advantages and gradients are all
zero with nothing to say so (trl #5697: TRL's old default of 256 new tokens truncated 97-99 %); a cap too
large costs memory and time from the first step. The published recipes stage the cap by hand (DeepScaleR
8k -> 16k -> 24k; DeepCoder 16K -> 32K, see ``shared/research/tools_and_context.md`` §2). Here:

- **Stages** (``rollout.max_new_tokens_stages``): ``[from_step, max_new_tokens]`` pairs; the cap of step t
  is the last stage at or before t, or ``rollout.max_new_tokens`` before the first stage.
- **Automatic rise** (``rollout.length_rise_factor`` > 1): when the truncation rate stays above
  ``length_rise_truncation`` for ``length_rise_window_steps`` consecutive steps, the cap from the next
  step on is ``ceil(cap x factor)``, at most ``length_rise_max_tokens``; the streak then starts again. A
  rise is a floor under the stages (a later, larger stage still applies).

The cap of a step is a pure function of the step and the rises recorded so far (``(from_step, cap)``
pairs), so the cap a step sampled with can be read back after the step observed its truncation, and the
state (rises + streak) is a small JSON dict kept in the checkpoint (``state_dict``), restored by ``--resume``.
Limits: the cap is per step, not per task; the prompt length is capped (in stages too) by ``prompt_cap.py``,
which also keeps prompt + the largest completion cap inside the model's context; with the one-step-off
loop (``algorithm.async_steps=1``) the next rollout starts before this step's truncation is seen, so the
automatic rise is refused there (stages work).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LengthCurriculum", "LengthSettings"]


@dataclass(frozen=True)
class LengthSettings:
    """The knobs (``[rollout]``); see the module docstring."""

    max_new_tokens: int
    max_new_tokens_stages: tuple[tuple[int, int], ...] = ()
    length_rise_factor: float = 1.0  # 1 = no automatic rise
    length_rise_truncation: float = 0.2  # truncation rate above which a step counts towards a rise
    length_rise_window_steps: int = 3
    length_rise_max_tokens: int = 0  # the bound of the rises; must be >= max_new_tokens when rising

    def __post_init__(self) -> None:
        stages = [tuple(s) for s in self.max_new_tokens_stages]
        if any(len(s) != 2 or s[0] < 0 or s[1] < 1 for s in stages):
            raise ValueError(
                f"rollout.max_new_tokens_stages: each stage is [from_step >= 0, max_new_tokens >= 1]; got {stages}"
            )
        steps = [s[0] for s in stages]
        if steps != sorted(set(steps)):
            raise ValueError(f"rollout.max_new_tokens_stages: from_step must strictly increase; got {steps}")
        if self.length_rise_factor < 1.0:
            raise ValueError(
                f"rollout.length_rise_factor must be >= 1 (1 = off); got {self.length_rise_factor}"
            )
        if self.rising and self.length_rise_max_tokens < self.max_new_tokens:
            raise ValueError(
                f"rollout.length_rise_factor={self.length_rise_factor} needs rollout.length_rise_max_tokens >= "
                f"rollout.max_new_tokens ({self.max_new_tokens}); got {self.length_rise_max_tokens}"
            )
        if not 0.0 <= self.length_rise_truncation < 1.0 or self.length_rise_window_steps < 1:
            raise ValueError(
                "rollout.length_rise_truncation must lie in [0, 1) and rollout.length_rise_window_steps be "
                f">= 1; got {self.length_rise_truncation}, {self.length_rise_window_steps}"
            )

    @property
    def rising(self) -> bool:
        return self.length_rise_factor > 1.0


@dataclass
class LengthCurriculum:
    """The cap of each step (``cap``), raised by ``observe`` (see the module docstring)."""

    settings: LengthSettings
    rises: list[tuple[int, int]] = field(default_factory=list)  # (from_step, cap), increasing
    streak: int = 0  # consecutive observed steps above the truncation threshold

    def stage_cap(self, step: int) -> int:
        cap = self.settings.max_new_tokens
        for from_step, tokens in self.settings.max_new_tokens_stages:
            if from_step <= step:
                cap = tokens
        return cap

    def cap(self, step: int) -> int:
        """The most new tokens step ``step`` generates per completion."""
        raised = max((c for s, c in self.rises if s <= step), default=0)
        return max(self.stage_cap(step), raised)

    def observe(self, step: int, truncation_rate: float) -> None:
        """Step ``step`` (sampled with ``cap(step)``) truncated this share of its completions."""
        if not self.settings.rising:
            return
        self.streak = self.streak + 1 if truncation_rate > self.settings.length_rise_truncation else 0
        if self.streak < self.settings.length_rise_window_steps:
            return
        self.streak = 0
        current = self.cap(step)
        new = min(self.settings.length_rise_max_tokens, math.ceil(current * self.settings.length_rise_factor))
        if new > current:
            self.rises.append((step + 1, new))

    def state_dict(self) -> dict[str, Any]:
        return {"rises": [list(r) for r in self.rises], "streak": self.streak}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rises = [(int(s), int(c)) for s, c in state["rises"]]
        self.streak = int(state["streak"])


def truncation_rate(finish_reasons: Sequence[str]) -> float:
    """Share of completions the cap cut (finish reason ``"length"``); 0 for none."""
    return sum(r == "length" for r in finish_reasons) / len(finish_reasons) if finish_reasons else 0.0
