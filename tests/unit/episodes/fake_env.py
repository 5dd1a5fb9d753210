"""A scripted environment for the loop's unit tests: no sandbox. Each model turn is answered with the
messages ``reply(turn_view)`` returns (None: the episode is done); the judge rewards 1.0 when the final
text contains ``good``. Every call is recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from execrl.episodes import Final, Prompt, Response, TurnView, Verdict
from execrl.tasks.schema import Task

Reply = Callable[[TurnView], Response]


def done(_view: TurnView) -> Response:
    return Response(done=True, stop="answer")


@dataclass
class ScriptedEnvironment:
    reply: Reply = done
    max_turns: int = 4
    stop_strings: tuple[str, ...] = ()
    name: str = "scripted"
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def start(self, tasks: Sequence[Task], samples_per_task: int, backend: Any) -> _Live:
        self.calls.append(("start", (len(tasks), samples_per_task)))
        return _Live(self, list(tasks))

    def metrics(self, episodes: Sequence[Any], *, step_s: float = 0.0) -> dict[str, float]:
        return {}


@dataclass
class _Live:
    env: ScriptedEnvironment
    tasks: list[Task]

    @property
    def max_turns(self) -> int:
        return self.env.max_turns

    def prompt(self, task_index: int) -> Prompt:
        task = self.tasks[task_index]
        return Prompt(({"role": "user", "content": str(task.prompt)},), stop_strings=self.env.stop_strings)

    def respond(self, turns: Sequence[TurnView]) -> list[Response]:
        self.env.calls.append(("respond", [v.episode for v in turns]))
        return [self.env.reply(v) for v in turns]

    def judge(self, finals: Sequence[Final]) -> list[Verdict]:
        self.env.calls.append(("judge", [f.episode for f in finals]))
        return [Verdict(float("good" in f.text), True, "good" in f.text, "scripted") for f in finals]

    def close(self) -> None:
        self.env.calls.append(("close", None))

    def report(self) -> dict[int, dict[str, Any]]:
        return {}
