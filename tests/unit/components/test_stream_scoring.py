"""Streaming scoring: group g is scored while the engine generates group g+1, and the merged result keeps
the task order."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fakes import _rollout, _score, _task

from execrl.components import sampling
from execrl.components.sampling import StreamingGroupSampler
from execrl.rollout.types import SamplingParams


class _Engine:
    def __init__(self) -> None:
        self.seeds: list[int] = []
        self.generating_second = threading.Event()

    def generate(self, prompts: Any, params: SamplingParams) -> Any:
        self.seeds.append(params.seed)
        if len(self.seeds) == 2:
            self.generating_second.set()
        g = len(self.seeds)
        return _rollout([[1]], [[10 + g], [20 + g]], samples=2)


def test_groups_are_scored_while_the_next_is_generated(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _Engine()
    overlapped: list[bool] = []

    def fake_score(tasks: list[Any], texts: list[str], *, sandbox: Any, config: Any) -> list[Any]:
        if not overlapped:  # group 0's scoring: the engine must reach group 1 meanwhile (no deadlock)
            overlapped.append(engine.generating_second.wait(timeout=10))
        return [_score(float(len(overlapped) % 2)), _score(1.0)]

    monkeypatch.setattr(sampling, "score_batch", fake_score)
    monkeypatch.setattr(sampling, "encode_prompts", lambda tok, msgs: [[1]] * len(msgs))
    sampler = StreamingGroupSampler(engine, None, None, None, SamplingParams(samples_per_prompt=2), seed=3)  # type: ignore[arg-type]
    rollout, scores = sampler(5, [_task(0), _task(1), _task(2)], 0)
    assert overlapped == [True]
    assert rollout.num_prompts == 3 and rollout.group_index.tolist() == [0, 0, 1, 1, 2, 2]
    assert rollout.completion_ids[:, 0].tolist() == [11, 21, 12, 22, 13, 23]
    assert len(scores) == 6 and len(set(engine.seeds)) == 3  # one seed per group, all distinct
