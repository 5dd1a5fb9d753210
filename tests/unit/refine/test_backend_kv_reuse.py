"""Refine episodes on the local backend with KV reuse across turns answer exactly as without it, and prefill
less from turn 2 on (the rollout loop's session keeps the engine's prefix cache between turns)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from execrl.episodes import Episode, LocalBackend, run_episodes
from execrl.refine.env import MultiTurnConfig, RefineEnvironment
from execrl.rollout import HFEngine
from execrl.rollout.models import default_tokenizer, tiny_model
from execrl.rollout.types import RolloutBatch, SamplingParams
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.sandbox.types import CodeTest
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata


class Recorder:
    """The engine, with each ``generate`` call's reused prompt tokens recorded (its cache is the engine's)."""

    def __init__(self, engine: HFEngine) -> None:
        self.engine = engine
        self.reused: list[int] = []
        self.pad_token_id = engine.pad_token_id

    @property
    def prefix_cache(self) -> Any:
        return self.engine.prefix_cache

    @prefix_cache.setter
    def prefix_cache(self, cache: Any) -> None:
        self.engine.prefix_cache = cache

    @property
    def can_reuse_prefixes(self) -> bool:
        return self.engine.can_reuse_prefixes

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
        batch = self.engine.generate(prompts, params)
        self.reused.append(batch.stats.reused_prompt_tokens)
        return batch


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as box:
        yield box


def _tasks() -> list[Task]:
    return [
        Task(
            id=f"t{i}",
            domain="code",
            prompt=prompt,
            spec=CodeSpec(kind="function", entry_point="f"),
            metadata=TaskMetadata(family="toy", split="test"),
            visible_tests=(CodeTest(name="example_0", code="assert f(1) == 2"),),
            hidden_tests=(CodeTest(name="hidden", code="assert f(2) == 3"),),
        )  # fmt: skip
        for i, prompt in enumerate(
            ["Write add(a, b).", "Write a function that reverses a string, with a docstring."]
        )
    ]


def _three_turns(engine: Recorder, tokenizer: Any, sandbox: Sandbox, reuse_bytes: int) -> list[Episode]:
    environment = RefineEnvironment(sandbox, MultiTurnConfig(max_turns=3))
    backend = LocalBackend(engine, tokenizer, reuse_kv_max_bytes=reuse_bytes)  # type: ignore[arg-type]
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=6, temperature=0.0)
    return list(run_episodes(environment, backend, _tasks(), params=params).episodes)


def test_local_backend_reuse_gives_the_same_turns_and_reuses_earlier_turns(sandbox: Sandbox) -> None:
    model, tokenizer = tiny_model(seed=0, init_std=0.5), default_tokenizer()
    plain, cached = Recorder(HFEngine(model, tokenizer)), Recorder(HFEngine(model, tokenizer))
    without = _three_turns(plain, tokenizer, sandbox, reuse_bytes=0)
    with_reuse = _three_turns(cached, tokenizer, sandbox, reuse_bytes=2 << 30)
    assert [len(e.turns) for e in with_reuse] == [3, 3]  # a random model never passes: every turn runs
    assert [e.token_ids for e in with_reuse] == [e.token_ids for e in without]
    assert plain.reused == [0, 0, 0]
    # Turn 1: nothing stored yet (a call's entries are stored when it ends). Turn 2 reuses at least each
    # first prompt (its context extends the first turn's exactly), turn 3 more.
    assert cached.reused[0] == 0
    assert cached.reused[1] >= sum(e.prompt_tokens for e in with_reuse)
    assert cached.reused[2] > cached.reused[1]
    assert cached.prefix_cache is None  # the cache lives inside the rollout call, freed after it
