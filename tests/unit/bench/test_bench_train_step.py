"""``execrl bench train``'s execrl side runs the GRPO recipe's own step (``grpo.train_step``).

Guards against the benchmark timing a loop of its own (issue 22: a fifth copy of the step, seeded by the
retired ``seed * 1_000_003 + step`` formula) instead of the step ``execrl train`` runs.
"""

from __future__ import annotations

import argparse

import pytest

from execrl.bench import train as bench_train
from execrl.bench._trl_side import execrl_trainer_config
from execrl.rollout.models import default_tokenizer, tiny_model
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.tasks import load_suite


@pytest.mark.slow
def test_the_execrl_side_runs_the_recipe_step(monkeypatch: pytest.MonkeyPatch) -> None:
    from execrl.recipes import grpo

    calls: list[int] = []
    real_step = grpo.train_step

    def counted(run: object, step: int, **kwargs: object) -> dict[str, float]:
        calls.append(step)
        return real_step(run, step, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grpo, "train_step", counted)
    args = argparse.Namespace(steps=1, prompts=2, samples=2, max_new_tokens=4, seed=0, old_logprobs="rollout")
    model = tiny_model(seed=0, init_std=0.3)
    tasks = bench_train.pick_tasks(load_suite("functions", "train"), 2)
    config = execrl_trainer_config("dapo", learning_rate=1e-2, max_new_tokens=4)
    with Sandbox(SandboxConfig(workers=1)) as sandbox:
        reward = bench_train.CodeReward(tasks=tasks, sandbox=sandbox, config=bench_train._reward_config())
        timing = bench_train.run_execrl(model, default_tokenizer(), reward, config, args)
    assert calls == [0, 1]  # the warm-up step and one timed step, both the recipe's
    assert len(timing.step_times_s) == 2 and len(timing.generated_tokens) == 2
    assert all(0 < n <= 2 * 2 * 4 for n in timing.generated_tokens)
