"""``single``: the one-turn environment of the GRPO/PPO recipes: the task's prompt, one model turn, the
completion judged by the reward path (``score_batch``: the domain's verifier, code run in the sandbox)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from execrl.episodes.environment import Final
from execrl.episodes.types import Episode, Prompt, Response, TurnView, Verdict
from execrl.rewards import RewardConfig, Score, score_batch
from execrl.tasks.schema import Task, prompt_for_chat

if TYPE_CHECKING:
    from execrl.config import TrainConfig
    from execrl.episodes.backend import Backend
    from execrl.rewards.batch import SyncRunner

__all__ = ["SingleTurn", "first_messages", "verdict_of"]


def first_messages(task: Task) -> tuple[dict[str, Any], ...]:
    """The task's prompt as chat messages (a plain string is one user message)."""
    prompt = prompt_for_chat(task.prompt)
    return (
        ({"role": "user", "content": prompt},) if isinstance(prompt, str) else tuple(dict(m) for m in prompt)
    )


def verdict_of(score: Score, *, penalty: float = 0.0) -> Verdict:
    """A reward path's score as a verdict, ``penalty`` subtracted from its reward."""
    return Verdict(score.reward - penalty, score.valid, score.passed, score.reason_code, score)


@dataclass(frozen=True)
class SingleTurn:
    """One turn per episode, judged by ``reward`` on ``runner`` (the sandbox or a service client)."""

    runner: SyncRunner
    reward: RewardConfig
    name: str = "single"

    @classmethod
    def from_config(cls, config: TrainConfig, *, runner: SyncRunner, reward: RewardConfig) -> SingleTurn:
        return cls(runner, reward)

    def start(self, tasks: Sequence[Task], samples_per_task: int, backend: Backend) -> _Live:
        return _Live(list(tasks), self)

    def metrics(self, episodes: Sequence[Episode], *, step_s: float = 0.0) -> dict[str, float]:
        return {}


@dataclass
class _Live:
    tasks: list[Task]
    env: SingleTurn
    max_turns: int = 1

    def prompt(self, task_index: int) -> Prompt:
        return Prompt(first_messages(self.tasks[task_index]))

    def respond(self, turns: Sequence[TurnView]) -> list[Response]:
        return [Response(done=True, stop="answer") for _ in turns]

    def judge(self, finals: Sequence[Final]) -> list[Verdict]:
        tasks = [self.tasks[f.task_index] for f in finals]
        scores = score_batch(tasks, [f.text for f in finals], sandbox=self.env.runner, config=self.env.reward)
        return [verdict_of(s) for s in scores]

    def close(self) -> None:
        """Nothing to release."""

    def report(self) -> dict[int, dict[str, Any]]:
        return {}
