"""DAPO dynamic sampling in ``components.sampling``: informative groups, select, concat, refill."""

from __future__ import annotations

import torch
from fakes import _rollout, _score, _task

from execrl.components.sampling import ScoredGroups, concat_groups, informative_groups, sample_groups
from execrl.rewards import Score
from execrl.rollout.types import RolloutBatch
from execrl.tasks.schema import Task


def test_informative_groups_ignore_invalid_scores() -> None:
    scores = [_score(1), _score(1), _score(0), _score(1), _score(0, valid=False), _score(0)]
    assert informative_groups(scores, torch.tensor([0, 0, 1, 1, 2, 2])) == [1]


def test_dynamic_sampling_refills_zero_variance_groups_until_full() -> None:
    rounds: list[int] = []

    def sample(tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]:
        rounds.append(round_)
        rollout = _rollout([[1]] * len(tasks), [[2 + round_]] * (2 * len(tasks)), samples=2)
        # round 0: group 0 all-pass (dropped), group 1 mixed; round 1: both mixed
        rewards = [1, 1, 0, 1] if round_ == 0 else [0, 1, 1, 0]
        return rollout, [_score(r) for r in rewards]

    out = sample_groups(
        [_task(0), _task(1)],
        lambda k: [_task(10 + k), _task(20 + k)],
        sample,
        dynamic=True,
        max_resample_rounds=3,
    )
    assert rounds == [0, 1] and out.rounds == 2 and out.dropped_groups == 1
    assert [t.id for t in out.tasks] == ["t/1", "t/10"]
    assert out.rollout.group_index.tolist() == [0, 0, 1, 1]
    assert [s.reward for s in out.scores] == [0, 1, 0, 1]
    assert out.rollout.completion_ids[:, 0].tolist() == [2, 2, 3, 3]


def test_dynamic_sampling_gives_up_after_max_rounds_and_keeps_the_first_round() -> None:
    def sample(tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]:
        return _rollout([[1]] * len(tasks), [[2]] * (2 * len(tasks)), samples=2), [_score(0)] * (
            2 * len(tasks)
        )

    first = [_task(0), _task(1)]
    out = sample_groups(first, lambda k: [_task(5), _task(6)], sample, dynamic=True, max_resample_rounds=2)
    assert out.rounds == 3 and out.tasks == first and out.dropped_groups == 6


def test_concat_pads_to_longest_and_offsets_groups() -> None:
    a = ScoredGroups(_rollout([[1]], [[2], [3, 4, 5]], samples=2), [_task(0)], [_score(0), _score(1)])
    b = ScoredGroups(_rollout([[9]], [[6, 7], [8]], samples=2), [_task(1)], [_score(1), _score(0)])
    merged = concat_groups([a, b])
    assert merged.rollout.completion_ids.shape == (4, 3)
    assert merged.rollout.group_index.tolist() == [0, 0, 1, 1]
    assert merged.rollout.response_mask.sum(dim=1).tolist() == [1, 3, 2, 1]
    assert merged.rollout.prompt_token_ids == ((1,), (9,))
