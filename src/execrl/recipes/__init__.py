"""execrl.recipes: the readable training loops, one module per algorithm, on top of every other package.

Each recipe's ``train_step`` spells out its algorithm (sample and score, advantages, train batch, update,
metrics); ``loop.py`` holds what they share around the step (the run's state, setup and finish, logging,
checkpoints, stop reasons). ``execrl train`` picks the recipe by name from the config (``recipe_name``):

* ``grpo`` (``grpo.py``): group-relative advantages (GRPO, Dr.GRPO, RLOO, REINFORCE++), the default;
* ``ppo`` (``ppo.py``): ``algorithm.advantage_estimator=gae``, a value head and GAE;
* ``async`` (``pipeline.py``): ``algorithm.async_steps=1``, step t+1's rollout overlaps step t's update,
  with the decoupled-PPO correction (GRPO's or PPO's advantages).

What an episode is (one turn; visible-test feedback with ``refine.max_turns > 1``; tool calls with
``tools.enabled``; yours with ``rollout.environment``) is the environment's business
(``execrl.episodes``), not a recipe's: every recipe runs every environment.

``execrl sft`` runs ``sft.py`` (supervised fine-tuning on chat rows, its own ``SftConfig``; rows and the
step plan in ``sft_data.py``) and ``execrl sample`` runs ``sample.py`` (rejection sampling into SFT rows),
outside this table; a config with ``[[stages]]`` runs them and the recipes in order (``stages.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from execrl.config import TrainConfig
    from execrl.recipes.loop import TrainOutcome

__all__ = ["RECIPES", "load_recipe", "recipe_name", "train"]

RECIPES: dict[str, str] = {  # name -> module with ``train(config, *, resume_dir, progress)``
    "grpo": "execrl.recipes.grpo",
    "ppo": "execrl.recipes.ppo",
    "async": "execrl.recipes.pipeline",
}


def recipe_name(config: TrainConfig) -> str:
    """The recipe a config runs: the one-step-off loop, PPO, or GRPO (the default)."""
    if config.algorithm.async_steps:
        return "async"
    return "ppo" if config.algorithm.learns_values else "grpo"


def load_recipe(name: str) -> ModuleType:
    """The recipe module ``name`` (a key of ``RECIPES``); its ``train`` runs a config end to end."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
    return importlib.import_module(RECIPES[name])


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    """Run the config's recipe (``recipe_name``), as ``execrl train`` does."""
    outcome: TrainOutcome = load_recipe(recipe_name(config)).train(
        config, resume_dir=resume_dir, progress=progress
    )
    return outcome
