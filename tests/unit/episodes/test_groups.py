"""DAPO dynamic sampling over episodes (``execrl.episodes.groups``): informative groups, refill, give up."""

from __future__ import annotations

from fakes import _episode, _task

from execrl.episodes import RolloutResult
from execrl.episodes.groups import informative_groups, sample_groups
from execrl.tasks.schema import Task


def _result(rewards: list[float], completion: int, samples: int = 2) -> RolloutResult:
    episodes = [_episode(k // samples, [1], [completion], r) for k, r in enumerate(rewards)]
    return RolloutResult(tuple(episodes), rollout_s=1.0, generate_s=0.5)


def test_informative_groups_ignore_invalid_rewards() -> None:
    episodes = [_episode(0, [1], [2], 1), _episode(0, [1], [2], 1), _episode(1, [1], [2], 0),
                _episode(1, [1], [2], 1), _episode(2, [1], [2], 0, valid=False), _episode(2, [1], [2], 0)]  # fmt: skip
    assert informative_groups(episodes) == [1]


def test_dynamic_sampling_refills_zero_variance_groups_until_full() -> None:
    rounds: list[int] = []

    def sample(tasks: list[Task], round_: int) -> RolloutResult:
        rounds.append(round_)
        # round 0: group 0 all-pass (dropped), group 1 mixed; round 1: both mixed
        return _result([1, 1, 0, 1] if round_ == 0 else [0, 1, 1, 0], completion=2 + round_)

    out = sample_groups([_task(0), _task(1)], lambda k: [_task(10 + k), _task(20 + k)], sample, dynamic=True,
                        max_resample_rounds=3)  # fmt: skip
    assert rounds == [0, 1] and out.rounds == 2 and out.dropped_groups == 1
    assert [t.id for t in out.tasks] == ["t/1", "t/10"]
    assert [e.task_index for e in out.episodes] == [0, 0, 1, 1]  # renumbered to the kept tasks
    assert [e.reward for e in out.episodes] == [0, 1, 0, 1]
    assert [e.token_ids[-1] for e in out.episodes] == [2, 2, 3, 3]
    assert len(out.outcomes) == 4  # every group sampled, dropped ones too (the scheduler learns from all)
    assert (out.rollout_s, out.generate_s) == (2.0, 1.0)  # both rounds' time


def test_dynamic_sampling_gives_up_after_max_rounds_and_keeps_the_first_round() -> None:
    first = [_task(0), _task(1)]
    out = sample_groups(first, lambda k: [_task(5), _task(6)], lambda tasks, r: _result([0] * 4, 2), dynamic=True,
                        max_resample_rounds=2)  # fmt: skip
    assert out.rounds == 3 and list(out.tasks) == first and out.dropped_groups == 6 and len(out.episodes) == 4


def test_without_dynamic_sampling_one_round_is_kept_whole() -> None:
    out = sample_groups([_task(0), _task(1)], lambda k: [], lambda tasks, r: _result([1, 1, 0, 0], 2),
                        dynamic=False, max_resample_rounds=3)  # fmt: skip
    assert out.rounds == 1 and out.dropped_groups == 0 and len(out.episodes) == 4
