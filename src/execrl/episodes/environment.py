"""The environment seam of the rollout loop, and the registry of environments.

An ``Environment`` is the config-bound, picklable description (built once per run, sent to a Ray worker as
is); ``Environment.start(tasks, samples_per_task, backend)`` opens what one rollout call needs (sandbox
sessions forked per sample, say) and returns a ``LiveEnvironment`` the loop drives:

* ``prompt(task_index)``: the task's first messages, tools and stop strings;
* ``respond(turns)``: for each newest model turn, the messages to append (a ``tool`` answer, visible-test
  feedback) or done; a batch, so an environment can score many turns in one sandbox call;
* ``judge(finals)``: each finished episode's final answer on the hidden tests (or any reward): the verdict
  the advantages see. Hidden tests never reach a prompt;
* ``close()``: release what ``start`` opened; ``report()``: per-episode records known only at the end (a
  session's peak memory, the attempts of a refine evaluation).

Built in: ``single`` (one turn, judged: the GRPO/PPO recipes' completions), ``refine`` (visible-test
feedback between turns, ``execrl.refine.env``), ``tools`` (tool calls on forkable sandbox sessions,
``execrl.tools.env``). A user adds one with ``register_environment("name", "my_pkg.env:MyEnvironment")`` or
by passing the dotted path as the name; environments of higher layers are registered by path, so this
module imports none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from execrl.episodes.types import Episode, Prompt, Response, TurnView, Verdict

if TYPE_CHECKING:
    from execrl.episodes.backend import Backend
    from execrl.tasks.schema import Task

__all__ = [
    "Environment",
    "Final",
    "LiveEnvironment",
    "environment_class",
    "list_environments",
    "register_environment",
]


@dataclass(frozen=True)
class Final:
    """A finished episode handed to the judge."""

    episode: int
    task_index: int
    text: str  # the final answer (the last model turn's text)
    stop: str
    info: Mapping[str, float] = field(default_factory=dict)


class LiveEnvironment(Protocol):
    @property
    def max_turns(self) -> int:
        """Model turns at most (the loop's bound; the environment usually stops earlier)."""
        ...

    def prompt(self, task_index: int) -> Prompt: ...

    def respond(self, turns: Sequence[TurnView]) -> list[Response]: ...

    def judge(self, finals: Sequence[Final]) -> list[Verdict]: ...

    def close(self) -> None:
        """Release what ``start`` opened (called once, before ``judge`` unless judged early)."""
        ...

    def report(self) -> dict[int, dict[str, Any]]:
        """Per-episode records known only at the end (a session's peak memory, refine's attempts)."""
        ...


class Environment(Protocol):
    @property
    def name(self) -> str:
        """Names the environment's evaluation files and metrics (``refine``, ``tools``, yours)."""
        ...

    def start(self, tasks: Sequence[Task], samples_per_task: int, backend: Backend) -> LiveEnvironment: ...

    def metrics(self, episodes: Sequence[Episode], *, step_s: float = 0.0) -> dict[str, float]:
        """This environment's own step metrics (``refine/*``, ``tools/*``); the loop's common ones
        (rewards, lengths, truncation) come from ``execrl.episodes.metrics``."""
        ...


_BUILTIN = {
    "single": "execrl.episodes.single:SingleTurn",
    "refine": "execrl.refine.env:RefineEnvironment",
    "tools": "execrl.tools.env:ToolEnvironment",
}
_REGISTERED: dict[str, str] = {}


def register_environment(name: str, path: str) -> None:
    """Register ``module:attribute`` (an environment class or factory) under ``name``; a taken name raises."""
    if name in _BUILTIN or name in _REGISTERED:
        raise ValueError(f"environment {name!r} is already registered")
    if ":" not in path:
        raise ValueError(f"environment {name!r}: expected 'module:attribute', got {path!r}")
    _REGISTERED[name] = path


def list_environments() -> list[str]:
    return sorted({*_BUILTIN, *_REGISTERED})


def environment_class(name: str) -> Any:
    """The class (or factory) registered as ``name``, or named by a ``module:attribute`` path."""
    path = _BUILTIN.get(name) or _REGISTERED.get(name) or (name if ":" in name else None)
    if path is None:
        raise ValueError(f"unknown environment {name!r}; known: {', '.join(list_environments())}")
    module, _, attribute = path.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"environment {name!r}: cannot import {path!r}: {exc}") from exc
