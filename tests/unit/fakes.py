"""Small scored rollouts and episodes for the unit tests of the rollout loop, group sampling and train
batches: a hand-made ``RolloutBatch`` (what an engine returns), ``Episode`` objects, scores and tasks, no model."""

from __future__ import annotations

import torch

from execrl.episodes import Episode, Turn, Verdict
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


def _episode(
    task_index: int, prompt: list[int], completion: list[int], reward: float, *, valid: bool = True
) -> Episode:
    """A one-turn episode: ``prompt`` then the model's ``completion`` (log-probs -0.5, -1.0, ...)."""
    ids = (*prompt, *completion)
    logp = tuple(0.0 for _ in prompt) + tuple(-0.5 * (k + 1) for k in range(len(completion)))
    turns = (Turn(len(prompt), len(ids), "stop"),)
    verdict = Verdict(
        reward, valid, valid and reward == 1.0, "passed" if valid else "sandbox_error", _score(reward, valid)
    )
    return Episode(
        task_index, f"t/{task_index}", 0, ids, (False,) * len(prompt) + (True,) * len(completion), logp, logp,
        len(prompt), turns, (), "", "answer", verdict,
    )  # fmt: skip
