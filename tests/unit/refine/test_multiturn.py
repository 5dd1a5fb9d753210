"""Multi-turn refine episodes (RL on execution feedback) through the one rollout loop: ``run_episodes`` with
the refine environment, the local backend on a scripted engine and the real sandbox. The model's sampled
ids are kept as sampled, turn-by-turn ids equal the whole conversation's tokenisation (verl #3960), only the
model's tokens are trained on, invalid turns are penalised, non-refinable tasks stop after one turn."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import torch
from scripted_engine import ScriptedEngine

from execrl.episodes import Episode, LocalBackend, episodes_to_batch, run_episodes
from execrl.refine.env import MultiTurnConfig, RefineEnvironment
from execrl.rewards import RewardConfig
from execrl.rollout.models import default_tokenizer
from execrl.rollout.types import RolloutBatch, RolloutStats, SamplingParams
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.sandbox.types import CodeTest
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata

WRONG = "```python\ndef double(x):\n    return x + 1\n```"
STILL_WRONG = "Fixed:\n```python\ndef double(x):\n    return x * 3\n```"
RIGHT = "```python\ndef double(x):\n    return 2 * x\n```"


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    return default_tokenizer()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as box:
        yield box


def _task(*, visible: bool = True) -> Task:
    return Task(
        id="double", domain="code", prompt="Write double(x) returning twice x.",
        spec=CodeSpec(kind="function", entry_point="double"), metadata=TaskMetadata(family="toy", split="train"),
        visible_tests=(CodeTest(name="example_0", code="assert double(2) == 4, 'double(2)'"),) if visible else (),
        hidden_tests=(CodeTest(name="hidden", code="assert double(21) == 42"),),
    )  # fmt: skip


def _run(engine: Any, tokenizer: Any, sandbox: Sandbox, task: Task, *, max_new_tokens: int = 64,
         **config: Any) -> Episode:  # fmt: skip
    environment = RefineEnvironment(sandbox, MultiTurnConfig(reward=RewardConfig(), **config))
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=max_new_tokens)
    (episode,) = run_episodes(environment, LocalBackend(engine, tokenizer), [task], params=params).episodes  # type: ignore[arg-type]
    return episode


def _scripted(tokenizer: Any, turns: Sequence[str]) -> ScriptedEngine:
    return ScriptedEngine(tokenizer, lambda turn, _context: turns[min(turn, len(turns) - 1)])


def _whole(tokenizer: Any, messages: Sequence[Any]) -> list[int]:
    text = tokenizer.apply_chat_template(
        [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _sampled(tokenizer: Any, text: str, *, closed: bool = True) -> list[int]:
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return [*ids, tokenizer.convert_tokens_to_ids("<|im_end|>")] if closed else ids


def test_ids_exact_across_turns_and_only_model_tokens_trained(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    """Guards against token drift between turns (verl #3960): each turn's context is exactly the template's
    tokenisation of the whole conversation so far, the engine was sent exactly those ids, each turn keeps
    the ids it sampled, and the loss mask (and the train batch's response mask) covers only them."""
    engine = _scripted(tokenizer, [WRONG, STILL_WRONG, RIGHT])
    e = _run(engine, tokenizer, sandbox, _task())
    assert [m["role"] for m in e.messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert "got: 3" in e.messages[2]["content"] and "got: 6" in e.messages[4]["content"]  # visible feedback
    assert (len(e.turns), e.passed, e.reward, e.stop) == (3, True, 1.0, "answer")
    ids = list(e.token_ids)
    for k, (turn, text) in enumerate(zip(e.turns, [WRONG, STILL_WRONG, RIGHT], strict=True)):
        assert ids[: turn.start] == _whole(tokenizer, e.messages[: 1 + 2 * k]) == engine.prompts[k]
        assert ids[turn.start : turn.end] == _sampled(tokenizer, text)
    spans = {i for t in e.turns for i in range(t.start, t.end)}
    assert list(e.loss_mask) == [i in spans for i in range(len(ids))]
    batch = episodes_to_batch(
        [e], torch.tensor([1.0]), torch.tensor([True]), pad_token_id=0, old_logprobs_from_rollout=False
    )
    assert batch.response_mask[0].tolist() == [int(m) for m in e.loss_mask]


def test_truncated_turn_without_eos_is_closed_by_the_template(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    cut = "def f(x):\n    return"
    engine = _scripted(tokenizer, [cut + " x + 1 and then a long story", RIGHT])
    e = _run(engine, tokenizer, sandbox, _task(), max_new_tokens=len(_sampled(tokenizer, cut, closed=False)))
    assert e.messages[1]["content"] == cut and e.messages[2]["role"] == "user"
    assert list(e.token_ids[: e.turns[1].start]) == _whole(tokenizer, e.messages[:3])


class FixedIds(ScriptedEngine):
    """An engine whose turns are given as ids (a model may sample a non-canonical split of a word)."""

    def __init__(self, tokenizer: Any, turns: Callable[[int], list[int]]) -> None:
        super().__init__(tokenizer, lambda _turn, _context: "")
        self.turns = turns

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
        rows = []
        for prompt in prompts:
            self.prompts.append(list(prompt))
            context = self.tokenizer.decode(list(prompt), skip_special_tokens=False)
            rows.append(self.turns(context.count("<|im_start|>assistant") - 1))
        ids = torch.tensor(rows)
        n, width = ids.shape
        zeros = torch.zeros((n, width))
        return RolloutBatch(
            prompt_token_ids=tuple(tuple(p) for p in prompts), completion_ids=ids, logprobs=zeros,
            sampling_logprobs=zeros, response_mask=torch.ones((n, width), dtype=torch.bool),
            group_index=torch.arange(n), finish_reasons=("stop",) * n,
            texts=tuple(self.tokenizer.decode(r, skip_special_tokens=True) for r in rows),
            samples_per_prompt=1, pad_token_id=self.pad_token_id,
            stats=RolloutStats(prefill_s=0.0, decode_s=0.0, total_s=0.0, prompt_tokens=0,
                               generated_tokens=n * width, decode_steps=width),
        )  # fmt: skip


def test_sampled_ids_are_kept_even_when_not_canonical(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    """A model may emit 'hello' as five tokens where the tokenizer would use one; the context keeps them."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pieces = [tokenizer.convert_tokens_to_ids(c) for c in "hello"]
    assert pieces != list(tokenizer("hello", add_special_tokens=False)["input_ids"])  # really non-canonical
    engine = FixedIds(tokenizer, lambda turn: [*pieces, end] if turn == 0 else _sampled(tokenizer, RIGHT))
    e = _run(engine, tokenizer, sandbox, _task())
    assert list(e.token_ids[e.turns[0].start : e.turns[0].end]) == [*pieces, end]
    assert engine.prompts[1][: e.turns[0].end] == list(e.token_ids[: e.turns[0].end])
    assert tokenizer.decode(engine.prompts[1]) == tokenizer.apply_chat_template(
        [dict(m) for m in e.messages[:3]], tokenize=False, add_generation_prompt=True
    )


@pytest.mark.parametrize("closed", [True, False])
def test_turn_with_a_special_token_mid_turn_still_extends_the_context(
    tokenizer, sandbox, closed: bool
) -> None:  # type: ignore[no-untyped-def]
    """Regression: the multi-turn recipe crashed ("the chat template does not extend the conversation")
    when a trained tiny model emitted ``<|endoftext|>`` mid-turn: the assistant message was the engine's
    text, which drops special tokens, so it rendered shorter than the context. The message keeps them
    (``turn_content``: only the closing end-of-turn token is left out, the template writes it)."""
    text = " Newman<|endoftext|> stresses"
    engine = _scripted(tokenizer, [text, RIGHT])
    cap = len(_sampled(tokenizer, text, closed=False)) if not closed else 64
    e = _run(engine, tokenizer, sandbox, _task(), max_new_tokens=cap, max_turns=2)
    assert e.messages[1]["content"] == text and len(e.turns) == 2 and e.stop != "error"
    assert "template_drift" not in e.info
    assert list(e.token_ids[: e.turns[1].start]) == _whole(tokenizer, e.messages[:3])


def test_invalid_turns_are_penalised_in_the_reward(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    """No code and a syntax error each cost ``invalid_turn_penalty``; a wrong answer does not."""
    turns = ["I would rather not write code.", "```python\ndef double(x) return 2 * x\n```", WRONG, RIGHT]
    e = _run(_scripted(tokenizer, turns), tokenizer, sandbox, _task(), max_turns=4, invalid_turn_penalty=0.25)
    assert (len(e.turns), e.passed, e.info["invalid_turns"]) == (4, True, 2.0)
    assert e.reward == pytest.approx(1.0 - 2 * 0.25)


def test_a_task_without_visible_tests_stops_after_one_turn(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    """Nothing to give feedback from: one turn, judged on the hidden tests; its invalid answer is still
    penalised (counted by the judge, since no visible score saw it)."""
    engine = _scripted(tokenizer, ["no code at all", RIGHT])
    e = _run(engine, tokenizer, sandbox, _task(visible=False), max_turns=3, invalid_turn_penalty=0.25)
    assert (len(e.turns), len(engine.prompts), e.passed) == (1, 1, False)
    assert e.reward == pytest.approx(-0.25) and e.info["invalid_turns"] == 1.0
    right = _run(_scripted(tokenizer, [RIGHT]), tokenizer, sandbox, _task(visible=False), max_turns=3)
    assert (len(right.turns), right.passed, right.reward) == (1, True, 1.0)
