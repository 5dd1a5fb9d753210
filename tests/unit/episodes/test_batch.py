"""The one batch builder (``execrl.episodes.batch``): prompts left-padded, the rest after them; the loss
mask on the model's tokens only; the rollout's log-probs in the same columns; and the generation/training
log-prob gap on real episodes."""

from __future__ import annotations

import torch
from fake_env import ScriptedEnvironment
from fakes import PAD, _episode

from execrl.episodes import (
    Episode,
    LocalBackend,
    Response,
    Turn,
    TurnView,
    Verdict,
    episodes_to_batch,
    run_episodes,
)
from execrl.episodes.batch import aligned_logprobs
from execrl.recipes.batch import trainer_logprob_gap
from execrl.rollout.types import SamplingParams
from execrl.tasks.schema import MathSpec, Task, TaskMetadata


def test_one_turn_episodes_left_pad_prompts_and_align_completions() -> None:
    """The layout the shared-prompt forward needs (the old single-turn ``to_train_batch``'s, unchanged)."""
    episodes = [_episode(0, [5, 6, 7], [11, 12], 1.0), _episode(0, [5, 6, 7], [13], 0.0),
                _episode(1, [8], [14, 15], 1.0), _episode(1, [8], [16], 0.0)]  # fmt: skip
    batch = episodes_to_batch(episodes, torch.tensor([1.0, -1.0, 0.5, -0.5]), torch.ones(4, dtype=torch.bool),
                              pad_token_id=PAD, old_logprobs_from_rollout=True)  # fmt: skip
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
    assert torch.equal(aligned_logprobs(episodes, sampling=True), batch.old_logprobs)


def test_a_multi_turn_episode_masks_the_environment_and_keeps_its_group_prompt_aligned() -> None:
    # prompt [1, 2] | model [3, 4] | environment [9, 9] | model [5]
    ids, mask = (1, 2, 3, 4, 9, 9, 5), (False, False, True, True, False, False, True)
    multi = Episode(0, "t/0", 0, ids, mask, (0.0,) * 7, (0, 0, -1.0, -1.0, 0, 0, -2.0), 2,
                    (Turn(2, 4, "stop"), Turn(6, 7, "stop")), (), "", "answer", Verdict(1.0, True, True, "passed"))  # fmt: skip
    single = _episode(0, [1, 2], [7], 0.0)
    batch = episodes_to_batch([multi, single], torch.tensor([1.0, -1.0]), torch.ones(2, dtype=torch.bool),
                              pad_token_id=PAD, old_logprobs_from_rollout=True)  # fmt: skip
    assert batch.input_ids.tolist() == [[1, 2, 3, 4, 9, 9, 5], [1, 2, 7, PAD, PAD, PAD, PAD]]
    assert batch.response_mask.tolist() == [[0, 0, 1, 1, 0, 0, 1], [0, 0, 1, 0, 0, 0, 0]]
    assert batch.old_logprobs is not None and batch.old_logprobs[0].tolist() == [0, 0, -1.0, -1.0, 0, 0, -2.0]


def test_trainer_and_rollout_log_probs_agree_and_a_changed_model_shows() -> None:
    """Generation (KV cache, left padding, a prefix cache across turns) and the trainer's teacher-forced
    pass must give one log-prob, for one-turn and multi-turn episodes."""
    from execrl.rollout import create_engine
    from execrl.rollout.models import default_tokenizer, tiny_model

    model, tokenizer = tiny_model(seed=3, init_std=0.3), default_tokenizer()
    tasks = [Task(id=f"t/{i}", domain="math", prompt=p, spec=MathSpec("1"), metadata=TaskMetadata("f"))
             for i, p in enumerate(["Hi", "A longer prompt, with more tokens."])]  # fmt: skip

    def feedback(view: TurnView) -> Response:
        return Response(done=view.turn >= 2, messages=({"role": "user", "content": "again"},))

    for temperature, env in ((1.0, ScriptedEnvironment()), (0.7, ScriptedEnvironment(reply=feedback))):
        backend = LocalBackend(create_engine("hf", model=model, tokenizer=tokenizer), tokenizer)
        params = SamplingParams(samples_per_prompt=3, max_new_tokens=6, temperature=temperature)
        episodes = run_episodes(env, backend, tasks, params=params).episodes
        batch = episodes_to_batch(episodes, torch.zeros(6), torch.ones(6, dtype=torch.bool), pad_token_id=0,
                                  old_logprobs_from_rollout=True)  # fmt: skip
        assert trainer_logprob_gap(model, batch, episodes, rows=6, temperature=temperature) < 1e-4
    other = tiny_model(seed=4, init_std=0.3)
    assert trainer_logprob_gap(other, batch, episodes, rows=6, temperature=0.7) > 1e-2
