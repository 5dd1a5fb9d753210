"""Rollout -> TrainBatch conversion and DAPO dynamic sampling (select, concat, refill)."""

from __future__ import annotations

import torch

from execrl.components.sampling import ScoredGroups, concat_groups, informative_groups, sample_groups
from execrl.recipes.batch import to_train_batch, trainer_logprob_gap
from execrl.rewards import Score
from execrl.rollout.types import RolloutBatch, RolloutStats
from execrl.tasks.schema import MathSpec, Task, TaskMetadata

PAD = 0


def _rollout(prompts: list[list[int]], completions: list[list[int]], samples: int) -> RolloutBatch:
    width = max(len(c) for c in completions)
    n = len(completions)
    ids = torch.full((n, width), PAD, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.bool)
    logp = torch.zeros((n, width))
    for i, c in enumerate(completions):
        ids[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = True
        logp[i, : len(c)] = -0.5 * torch.arange(1, len(c) + 1, dtype=torch.float32)
    stats = RolloutStats(
        prefill_s=0.1,
        decode_s=0.2,
        total_s=0.3,
        prompt_tokens=9,
        generated_tokens=int(mask.sum()),
        decode_steps=width,
    )
    return RolloutBatch(
        prompt_token_ids=tuple(tuple(p) for p in prompts),
        completion_ids=ids,
        logprobs=logp,
        sampling_logprobs=logp,
        response_mask=mask,
        group_index=torch.arange(n) // samples,
        finish_reasons=("stop",) * n,
        texts=tuple(f"t{i}" for i in range(n)),
        samples_per_prompt=samples,
        pad_token_id=PAD,
        stats=stats,
    )


def _score(reward: float, valid: bool = True) -> Score:
    if not valid:
        return Score.invalid("sandbox_error: test")
    return Score(reward=reward, valid=True, passed=reward == 1.0, pass_fraction=reward, reason="passed")


def _task(i: int) -> Task:
    return Task(id=f"t/{i}", domain="math", prompt="p", spec=MathSpec("1"), metadata=TaskMetadata("f"))


def test_train_batch_left_pads_prompts_and_aligns_completions() -> None:
    rollout = _rollout([[5, 6, 7], [8]], [[11, 12], [13], [14, 15], [16]], samples=2)
    batch = to_train_batch(
        rollout,
        torch.tensor([1.0, -1.0, 0.5, -0.5]),
        torch.ones(4, dtype=torch.bool),
        old_logprobs_from_rollout=True,
    )
    assert batch.input_ids.tolist() == [
        [5, 6, 7, 11, 12],
        [5, 6, 7, 13, PAD],
        [PAD, PAD, 8, 14, 15],
        [PAD, PAD, 8, 16, PAD],
    ]
    assert batch.attention_mask.tolist() == [
        [1, 1, 1, 1, 1],
        [1, 1, 1, 1, 0],
        [0, 0, 1, 1, 1],
        [0, 0, 1, 1, 0],
    ]
    assert batch.response_mask.tolist() == [
        [0, 0, 0, 1, 1],
        [0, 0, 0, 1, 0],
        [0, 0, 0, 1, 1],
        [0, 0, 0, 1, 0],
    ]
    assert batch.old_logprobs is not None and batch.old_logprobs[0, 3:].tolist() == [-0.5, -1.0]


def test_trainer_and_rollout_log_probs_agree_and_a_changed_model_shows() -> None:
    """Generation (KV cache, left padding) and the trainer's teacher-forced pass must give one log-prob."""
    from execrl.rollout import SamplingParams, create_engine, encode_prompts
    from execrl.rollout.models import default_tokenizer, tiny_model

    model, tokenizer = tiny_model(seed=3, init_std=0.3), default_tokenizer()
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    for temperature in (1.0, 0.7):
        rollout = engine.generate(
            encode_prompts(tokenizer, ["Hi", "A longer prompt, with more tokens."]),
            SamplingParams(samples_per_prompt=3, max_new_tokens=6, temperature=temperature),
        )
        batch = to_train_batch(
            rollout, torch.zeros(6), torch.ones(6, dtype=torch.bool), old_logprobs_from_rollout=True
        )
        assert trainer_logprob_gap(model, batch, rollout, rows=6, temperature=temperature) < 1e-4
    other = tiny_model(seed=4, init_std=0.3)
    assert trainer_logprob_gap(other, batch, rollout, rows=6, temperature=0.7) > 1e-2


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
