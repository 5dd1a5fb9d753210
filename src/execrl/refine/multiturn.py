"""Multi-turn rollouts for RL on execution feedback (RLEF: Gehring et al. 2024, arXiv 2410.02089).

An episode is one context: the task prompt, the model's turn, the sandbox's feedback on the visible tests,
the model's next turn, ... up to ``max_turns``. The loss covers only the model's own sampled tokens
(``model_mask``); the reward is the final program's score on the **hidden** tests, minus
``invalid_turn_penalty`` for every turn that produced no code or code that does not compile.

Token ids never drift between turns: the model's turns are kept as the exact sampled ids (re-tokenising
their text can give different ids: verl #3960), and the tokens appended after a turn are the chat
template's own text between "the conversation so far" and "the conversation plus the feedback message,
with the generation prompt", tokenised on its own. Because chat-template special tokens split the text,
this equals tokenising the whole conversation at once (``tests/unit/refine/test_multiturn.py`` checks it
on SmolLM2's template). A template that rewrites earlier turns (e.g. strips reasoning) breaks this and
:func:`feedback_ids` raises instead of silently drifting.

A task is refinable when it is not a ``code`` task or has visible tests; others stop after one turn.

KV reuse: inside one :func:`rollout_episodes` call the engine keeps each episode's keys/values between
turns (:func:`execrl.rollout.engine.reusing_prefixes`, up to ``reuse_kv_max_bytes``), so turn t prefills
only the last sampled token, the feedback and the assistant header; since the context ids are exactly
the previous turn's prompt + sampled ids, every lookup hits. The cache is freed when the call returns
(the next call follows an optimizer step, whose weights make the keys stale anyway).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from execrl.refine.feedback import FeedbackFormat, render_feedback
from execrl.rewards import RewardConfig, Score, score_batch
from execrl.rollout.prompts import extension_ids, render_chat, turn_content
from execrl.tasks.schema import Task, prompt_for_chat

if TYPE_CHECKING:
    import torch

    from execrl.rewards.batch import SyncRunner
    from execrl.rollout.engine import Engine
    from execrl.rollout.types import SamplingParams
    from execrl.trainer import TrainBatch

__all__ = [
    "Episode",
    "MultiTurnConfig",
    "episodes_to_train_batch",
    "feedback_ids",
    "rollout_episodes",
    "turn_content",
]

INVALID_CODE = frozenset({"no_code_found", "syntax_error", "compile_error"})


@dataclass(frozen=True)
class MultiTurnConfig:
    max_turns: int = 3
    feedback: FeedbackFormat = "details"
    invalid_turn_penalty: float = 0.0  # subtracted per turn without valid code
    reward: RewardConfig = field(default_factory=RewardConfig)
    reuse_kv_max_bytes: int = 2 << 30  # keys/values kept between turns; 0 re-prefills every turn

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if not 0 <= self.invalid_turn_penalty <= 1:
            raise ValueError(f"invalid_turn_penalty must lie in [0, 1], got {self.invalid_turn_penalty}")
        if self.reuse_kv_max_bytes < 0:
            raise ValueError(f"reuse_kv_max_bytes must be >= 0, got {self.reuse_kv_max_bytes}")


@dataclass
class Episode:
    task_index: int
    messages: list[dict[str, str]]
    token_ids: list[int]  # the whole context: prompt, model turns, feedback
    model_mask: list[bool]  # True on the model's sampled tokens
    turns: int = 0
    invalid_turns: int = 0
    last_text: str = ""
    done: bool = False
    visible_passed: bool = False  # the last scored turn passed the visible tests
    reward: float = 0.0  # hidden-test reward of the final program minus the invalid-turn penalties
    valid: bool = True
    passed: bool = False  # the final program passed the hidden tests
    hidden_reason: str = ""  # reason code of the hidden-test score (e.g. "sandbox_error")


def _render(tokenizer: Any, messages: list[dict[str, str]], *, generation_prompt: bool) -> str:
    return render_chat(tokenizer, messages, generation_prompt=generation_prompt)


def feedback_ids(
    tokenizer: Any, context_ids: Sequence[int], messages: list[dict[str, str]], text: str
) -> list[int]:
    """Ids to append to ``context_ids`` (ending with a model turn) for a user message ``text``, such that
    the result is the template's rendering of ``messages + [user text]`` with the generation prompt
    (``execrl.rollout.prompts.extension_ids``: raises for a template that rewrites earlier turns)."""
    return extension_ids(tokenizer, context_ids, messages, [{"role": "user", "content": text}])


def _start(tokenizer: Any, task: Task, index: int) -> Episode:
    prompt = prompt_for_chat(task.prompt)
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    ids = list(
        tokenizer(_render(tokenizer, messages, generation_prompt=True), add_special_tokens=False)["input_ids"]
    )
    return Episode(index, messages, ids, [False] * len(ids))


def _refinable(task: Task) -> bool:
    return task.domain != "code" or bool(task.visible_tests)


def _generate(
    engine: Engine, tokenizer: Any, episodes: list[Episode], params: SamplingParams, samples: int
) -> list[Episode]:
    """One model turn for each episode (``samples`` copies of each, rows prompt-major)."""
    batch = engine.generate([e.token_ids for e in episodes], replace(params, samples_per_prompt=samples))
    out = []
    for row in range(batch.num_rows):
        base = episodes[row // samples]
        ids = batch.completion_token_ids(row)
        out.append(
            replace(
                base,
                messages=[*base.messages, {"role": "assistant", "content": turn_content(tokenizer, ids)}],
                token_ids=[*base.token_ids, *ids],
                model_mask=[*base.model_mask, *([True] * len(ids))],
                turns=base.turns + 1,
                last_text=batch.texts[row],
            )
        )
    return out


def _visible_scores(
    tasks: Sequence[Task], episodes: list[Episode], runner: SyncRunner, config: MultiTurnConfig
) -> list[Score]:
    visible = replace(config.reward, use_hidden_tests=False)
    chosen = [tasks[e.task_index] for e in episodes]
    return score_batch(chosen, [e.last_text for e in episodes], sandbox=runner, config=visible)


def _after_turn(
    tokenizer: Any,
    tasks: Sequence[Task],
    episodes: list[Episode],
    runner: SyncRunner,
    config: MultiTurnConfig,
) -> None:
    """Score the new turns on the visible tests; failed ones get feedback appended, the rest stop."""
    live = [e for e in episodes if not e.done]
    refinable = [e for e in live if _refinable(tasks[e.task_index])]
    for e in live:
        e.done = e.turns >= config.max_turns or not _refinable(tasks[e.task_index])
    scores = _visible_scores(tasks, refinable, runner, config) if refinable else []
    for e, score in zip(refinable, scores, strict=True):
        e.invalid_turns += score.reason_code in INVALID_CODE
        e.visible_passed = score.passed
        if score.passed or e.done:
            e.done = True
            continue
        text = render_feedback(score, config.feedback, tokenizer=tokenizer)  # special tokens removed
        extra = feedback_ids(tokenizer, e.token_ids, e.messages, text)
        e.messages.append({"role": "user", "content": text})
        e.token_ids.extend(extra)
        e.model_mask.extend([False] * len(extra))


def rollout_episodes(
    engine: Engine,
    tokenizer: Any,
    tasks: Sequence[Task],
    runner: SyncRunner,
    *,
    samples_per_prompt: int,
    params: SamplingParams,
    config: MultiTurnConfig,
) -> list[Episode]:
    """``samples_per_prompt`` episodes per task (task-major), each up to ``max_turns`` model turns, with
    the final reward from the hidden tests."""
    from execrl.rollout.engine import reusing_prefixes

    with reusing_prefixes(engine, max_bytes=config.reuse_kv_max_bytes, max_conversations=1 << 20):
        episodes = _generate(
            engine,
            tokenizer,
            [_start(tokenizer, t, i) for i, t in enumerate(tasks)],
            params,
            samples_per_prompt,
        )
        _after_turn(tokenizer, tasks, episodes, runner, config)
        for turn in range(1, config.max_turns):
            live = [i for i, e in enumerate(episodes) if not e.done]
            if not live:
                break
            fresh = _generate(
                engine,
                tokenizer,
                [episodes[i] for i in live],
                replace(params, seed=params.seed + 7919 * turn),
                1,
            )
            for i, e in zip(live, fresh, strict=True):
                episodes[i] = e
            _after_turn(tokenizer, tasks, episodes, runner, config)
    hidden = score_batch(
        [tasks[e.task_index] for e in episodes],
        [e.last_text for e in episodes],
        sandbox=runner,
        config=replace(config.reward, use_hidden_tests=True),
    )
    for e, score in zip(episodes, hidden, strict=True):
        invalid_now = score.reason_code in INVALID_CODE and not _refinable(tasks[e.task_index])
        e.invalid_turns += invalid_now
        e.reward = score.reward - config.invalid_turn_penalty * e.invalid_turns
        e.valid, e.passed, e.hidden_reason = score.valid, score.passed, score.reason_code
    return episodes


def episodes_to_train_batch(
    episodes: Sequence[Episode], advantages: torch.Tensor, pad_token_id: int
) -> TrainBatch:
    """Left-padded ``[N, S]`` batch; ``response_mask`` is 1 only on the model's sampled tokens."""
    from execrl.trainer import masked_train_batch

    return masked_train_batch(
        [e.token_ids for e in episodes], [e.model_mask for e in episodes], advantages,
        valid=[e.valid for e in episodes], pad_token_id=pad_token_id,
    )  # fmt: skip
