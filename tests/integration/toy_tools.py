"""A toy tool domain whose answer only the ``python`` tool can give, and a supervised warm start that
makes a tiny random model call it in some episodes, for the tool recipe's "reward rises" test.

The task: the episode's session holds ``n``, one digit repeated ``REPEAT`` times (set by the task's
trusted setup cell, never shown in the prompt, which is the same for every task); the model must answer
the digit (judged by the math verifier on the hidden answer, like the ``tools`` suite). Without the tool
a guess is right one time in ten; with the call ``{"name": "python", "arguments": {"code": "n"}}`` the
tool answers ``Out: 77...7`` and the model copies the digit. The digit is repeated because a 2-layer,
64-wide model does not learn to copy one token out of a ~300-token context in a test's budget (measured:
no progress in 120 steps); repeated 64 times it learns the copy in about 50.

The warm start is supervised, on transcripts of the real episode machinery (the ``tools`` environment in
the one rollout loop with a scripted engine, real sandbox sessions, the real tool answers and chat-template ids), two kinds:
*decision* transcripts, trained on every model token, whose first turn is a well-formed call, a
malformed one (the argument ``cod``: answered with a ``bad_arguments`` error, then a guess) or a direct
guess in the proportions ``mix``; and *copy* transcripts (well-formed calls), trained only on the final
answer after the tool answer. So before RL the model calls in about ``mix[0] + mix[1]`` of its
episodes, copies well when it calls well, and guesses otherwise: RL has something to raise.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from execrl.episodes import Episode, LocalBackend, run_episodes
from execrl.tasks.schema import MathSpec, SessionSpec, Task, TaskMetadata
from execrl.tools import ToolConfig, ToolEnvironment

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))  # scripted_engine.py
from scripted_engine import ScriptedEngine  # noqa: E402

REPEAT = 64
PROMPT = "n is one digit repeated. Which digit? Answer with the digit."
TOOL_LIMITS = {"max_turn_tokens": 32, "max_episode_tokens": 160, "max_tool_calls": 1}


def _call(argument: str) -> str:
    call = {"name": "python", "arguments": {argument: "n"}}
    return f"<tool_call>{json.dumps(call, separators=(',', ':'))}</tool_call>"


GOOD_CALL, BAD_CALL = _call("code"), _call("cod")


def toy_tool_tasks(count: int, split: str, *, offset: int = 0) -> list[Task]:
    """``count`` tasks, digits cycling 0..9; identical prompts, the digit only in the session."""
    return [
        Task(
            id=f"toytool/{split}/{i}",
            domain="math",
            prompt=PROMPT,
            spec=MathSpec(answer=str(i % 10)),
            metadata=TaskMetadata(family="toytool", split=split),  # type: ignore[arg-type]
            session=SessionSpec(setup=(f"n = {str(i % 10) * REPEAT}",)),
        )  # fmt: skip
        for i in range(offset, offset + count)
    ]


def _script(rng: random.Random, mix: Sequence[float]) -> Any:
    def script(turn: int, context: str) -> str:
        if turn == 0:
            first = rng.choices([GOOD_CALL, BAD_CALL, ""], weights=mix)[0]
            return first or str(rng.randrange(10))
        seen = re.findall(r"Out: (\d)", context)  # the tool's answer, or none after an error
        return seen[-1] if seen else str(rng.randrange(10))

    return script


def transcripts(
    tokenizer: Any, tasks: Sequence[Task], sandbox: Any, *, mix: Sequence[float], seed: int, samples: int
) -> list[Episode]:
    """``samples`` scripted episodes per task (calls drawn from ``mix``), through the real episode loop."""
    engine = ScriptedEngine(tokenizer, _script(random.Random(seed), mix))
    from execrl.rollout.types import SamplingParams

    config = ToolConfig(**TOOL_LIMITS)  # type: ignore[arg-type]
    params = SamplingParams(samples_per_prompt=samples, max_new_tokens=config.max_turn_tokens)
    out: list[Episode] = []
    for start in range(0, len(tasks), 8):  # 8 templates and their forks at a time (the sandbox's slots)
        result = run_episodes(ToolEnvironment(sandbox, config), LocalBackend(engine, tokenizer),
                              tasks[start : start + 8], params=params, max_episode_tokens=config.max_episode_tokens)  # fmt: skip
        out += result.episodes
    return out


def _final_turn(mask: Sequence[bool]) -> list[bool]:
    """``mask`` kept only on its last run of True (the final answer)."""
    last = max(i for i, m in enumerate(mask) if m)
    first = last
    while first > 0 and mask[first - 1]:
        first -= 1
    return [first <= i <= last for i in range(len(mask))]


def _batch(rows: Sequence[tuple[list[int], list[bool]]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)  # [B, T]
    mask = torch.zeros((len(rows), width), dtype=torch.bool)  # [B, T]
    for r, (row_ids, row_mask) in enumerate(rows):
        ids[r, : len(row_ids)] = torch.tensor(row_ids)
        mask[r, : len(row_mask)] = torch.tensor(row_mask)
    return ids, mask


def _loss(model: Any, rows: Sequence[tuple[list[int], list[bool]]], pad: int) -> torch.Tensor:
    """Mean cross-entropy on the masked tokens (``lm_head`` on those positions only)."""
    ids, mask = _batch(rows, pad)
    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]  # [B, T-1, H]
    scored = mask[:, 1:]  # [B, T-1]: position t predicts token t+1
    logits = model.lm_head(hidden[scored])  # [M, V]
    return torch.nn.functional.cross_entropy(logits, ids[:, 1:][scored])


def warm_start(
    model: Any, decision: Sequence[Episode], copies: Sequence[Episode], *, steps: int,
    learning_rate: float, rows_per_step: int, seed: int, pad: int,
) -> list[float]:  # fmt: skip
    """AdamW on loss(decision transcripts, all model tokens) + loss(copy transcripts, final answer only);
    returns the loss per step."""
    examples = [(list(e.token_ids), list(e.loss_mask)) for e in decision]
    answers = [
        (list(e.token_ids), _final_turn(e.loss_mask))
        for e in copies
        if e.info.get("tool_calls") and not e.info.get("parse_errors")
    ]
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    rng, losses = random.Random(seed), []
    model.train()
    for step in range(steps):
        for group in optimizer.param_groups:  # linear warm-up over the first 10 steps
            group["lr"] = learning_rate * min(1.0, (step + 1) / 10)
        loss = _loss(model, rng.sample(examples, rows_per_step), pad)
        loss = loss + _loss(model, rng.sample(answers, rows_per_step), pad)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
