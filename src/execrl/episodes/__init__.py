"""execrl.episodes: the spine between rollout and trainer. One ``Episode`` type, one rollout loop over an
environment and a model backend, one batch builder.

    result = run_episodes(environment, backend, tasks, params=params, max_episode_tokens=1024)
    batch = episodes_to_batch(result.episodes, advantages, loss_rows, pad_token_id=..., old_logprobs_from_rollout=True)

Modules, and the path of one rollout call through them:

* ``types.py``: the data (``Episode``, ``Turn``, ``Verdict``; what a backend and an environment exchange);
* ``loop.py``: ``run_episodes``: ``environment.start`` -> each task's first turn as one request for the
  whole group -> ``backend.wait`` -> the turn appended (``backend.append_turn``) -> ``live.respond`` -> its
  messages appended within the budget (``backend.append_messages``) -> the next turn submitted -> ... ->
  ``live.close`` -> ``live.judge`` -> frozen ``Episode``s;
* ``backend.py``: the backend seam and ``LocalBackend`` (an engine in this process or behind it: ``hf``,
  vLLM, a Ray rollout worker), token space; ``render.py``: how it renders (environment text is data, never
  a control token; budgets hold); ``chat.py``: ``ChatBackend``, any OpenAI-compatible endpoint, message space;
* ``environment.py``: the environment seam and registry; ``single.py``: the one-turn environment;
  ``execrl.refine.env`` (visible-test feedback) and ``execrl.tools.env`` (tool calls on forkable sandbox
  sessions) are the other built-ins, registered by path;
* ``groups.py``: a step's groups (scheduler outcomes, DAPO dynamic sampling); ``batch.py``: episodes ->
  ``TrainBatch`` (the shared-prompt layout); ``metrics.py``: the metrics every recipe logs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers; at run time they load on first use
    from execrl.episodes.backend import Backend, LocalBackend
    from execrl.episodes.batch import episodes_to_batch, group_index, reward_tensors
    from execrl.episodes.environment import (
        Environment,
        Final,
        LiveEnvironment,
        environment_class,
        list_environments,
        register_environment,
    )
    from execrl.episodes.groups import StepEpisodes, outcomes_of, sample_groups
    from execrl.episodes.loop import RolloutResult, run_episodes, turn_seeds
    from execrl.episodes.metrics import episode_metrics, truncation_rate
    from execrl.episodes.single import SingleTurn
    from execrl.episodes.types import Episode, Prompt, Response, Turn, TurnView, Verdict

# Lazy: ``types.py`` and ``environment.py`` import no torch, so a user environment (or a benchmark's
# command module) can use them without loading the batch builder's torch.
_EXPORTS = {
    "Backend": "backend", "LocalBackend": "backend",
    "episodes_to_batch": "batch", "group_index": "batch", "reward_tensors": "batch",
    "Environment": "environment", "Final": "environment", "LiveEnvironment": "environment",
    "environment_class": "environment", "list_environments": "environment", "register_environment": "environment",
    "StepEpisodes": "groups", "outcomes_of": "groups", "sample_groups": "groups",
    "RolloutResult": "loop", "run_episodes": "loop", "turn_seeds": "loop",
    "episode_metrics": "metrics", "truncation_rate": "metrics",
    "SingleTurn": "single",
    "Episode": "types", "Prompt": "types", "Response": "types", "Turn": "types", "TurnView": "types",
    "Verdict": "types",
}  # fmt: skip
__all__ = [
    "Backend",
    "Environment",
    "Episode",
    "Final",
    "LiveEnvironment",
    "LocalBackend",
    "Prompt",
    "Response",
    "RolloutResult",
    "SingleTurn",
    "StepEpisodes",
    "Turn",
    "TurnView",
    "Verdict",
    "environment_class",
    "episode_metrics",
    "episodes_to_batch",
    "group_index",
    "list_environments",
    "outcomes_of",
    "register_environment",
    "reward_tensors",
    "run_episodes",
    "sample_groups",
    "truncation_rate",
    "turn_seeds",
]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'execrl.episodes' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"execrl.episodes.{module_name}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
