"""The data of ``execrl refine``: its settings (``RefineConfig``), one attempt (``Attempt``) and one problem's
attempts under one condition (``ProblemRun``), which the report (``report.py``) and the trace (``trace.py``)
read. Light on purpose (no torch, no rollout): ``import execrl.refine`` stays fast.

An ``Attempt`` is recorded by the refine environment (``env.py``, ``record_attempts=True``) for every model
turn of an evaluation episode; :func:`problem_run` turns an episode's ``info["attempts"]`` into a
``ProblemRun`` (the resampling baseline's final program is the attempt best on the visible tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from execrl.refine.feedback import FeedbackFormat
from execrl.sandbox.types import Limits

if TYPE_CHECKING:
    from execrl.episodes.types import Episode

__all__ = ["Attempt", "GenerationParams", "ProblemRun", "RefineConfig", "best_visible_index", "problem_run"]


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 384
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class RefineConfig:
    """``execrl refine``'s settings (each a CLI flag); ``evaluate.py`` maps them to the refine environment's
    ``MultiTurnConfig`` and the loop's ``SamplingParams``."""

    rounds: int = 3  # generations per problem at most: the first attempt and rounds-1 repairs
    feedback: FeedbackFormat = "details"
    max_failures_shown: int = 3
    max_feedback_chars: int = 300  # per field (input, got, an error message, a test name)
    max_feedback_tokens: int = 512  # the whole feedback before the instruction (feedback.py)
    history: Literal["full", "last"] = "full"
    generation: GenerationParams = field(default_factory=GenerationParams)
    limits: Limits = field(default_factory=lambda: Limits(timeout_s=10, cpu_time_s=10))
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"RefineConfig.rounds must be >= 1 (1 = no repair), got {self.rounds}")
        if self.max_failures_shown < 1 or self.max_feedback_chars < 20 or self.max_feedback_tokens < 16:
            raise ValueError(
                "max_failures_shown must be >= 1, max_feedback_chars >= 20 and max_feedback_tokens >= 16"
            )


@dataclass(frozen=True)
class Attempt:
    """One generation and its verdicts. ``hidden_passed`` is for reports only (never shown or used)."""

    turn: int  # 1-based
    messages: tuple[tuple[str, str], ...]  # the (role, content) conversation this attempt answered
    completion: str
    code: str | None  # the extracted program, None when no code block was found
    visible_passed: bool
    visible_reason: str
    visible_fraction: float
    visible_tests: tuple[tuple[str, str], ...]  # (name, verdict) of each visible test
    hidden_passed: bool
    prompt_tokens: int
    completion_tokens: int
    feedback: str | None = None  # what the model was told after this attempt (None: it stopped here)
    error: str | None = None  # the backend could not answer (no text; the problem stops here)


def best_visible_index(attempts: Sequence[Attempt]) -> int:
    """The attempt resampling returns: visible pass first, then pass fraction, then the earliest."""

    def key(i: int) -> tuple[bool, float, int]:
        return attempts[i].visible_passed, attempts[i].visible_fraction, -i

    return max(range(len(attempts)), key=key)


@dataclass(frozen=True)
class ProblemRun:
    task_id: str
    condition: str
    attempts: tuple[Attempt, ...]
    final_index: int = -1  # which attempt is the final program (the resampling baseline selects)

    @property
    def final(self) -> Attempt:
        return self.attempts[self.final_index]


def problem_run(episode: Episode, condition: str) -> ProblemRun:
    """The attempts an evaluation episode recorded (``info["attempts"]``), as the report reads them."""
    attempts = tuple(episode.info.get("attempts", ()))
    if not attempts:  # every model turn is recorded, an error included: none means a broken environment
        raise ValueError(f"episode of {episode.task_id!r} recorded no attempts (record_attempts off?)")
    final = best_visible_index(attempts) if condition == "resample" else -1
    return ProblemRun(episode.task_id, condition, attempts, final_index=final)
