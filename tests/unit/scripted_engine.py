"""An engine that answers from a script instead of a model, for the tool-episode tests and the serve
tool-call tests: each call's prompts are recorded, and a turn is the script's text tokenised, cut after
``</tool_call>`` (the stop string) or closed with ``<|im_end|>`` as a model would."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from execrl.rollout.types import RolloutBatch, RolloutStats, SamplingParams


class ScriptedEngine:
    def __init__(self, tokenizer: Any, script: Callable[[int, str], str]) -> None:
        """``script(turn index of the episode, decoded context) -> the turn's text``."""
        self.tokenizer, self.script = tokenizer, script
        self.prompts: list[list[int]] = []
        self.pad_token_id = tokenizer.pad_token_id or 0

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        rows: list[list[int]] = []
        for prompt in prompts:
            self.prompts.append(list(prompt))
            context = self.tokenizer.decode(list(prompt), skip_special_tokens=False)
            turn = context.count("<|im_start|>assistant") - 1
            for _ in range(params.samples_per_prompt):
                text = self.script(turn, context)
                stop = next((s for s in params.stop_strings if s in text), None)
                ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
                rows.append(ids if stop and text.endswith(stop) else [*ids, end])
        rows = [r[: params.max_new_tokens] for r in rows]
        width, n = max(len(r) for r in rows), len(rows)
        ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = True
        zeros = torch.zeros((n, width))
        return RolloutBatch(
            prompt_token_ids=tuple(tuple(p) for p in prompts), completion_ids=ids, logprobs=zeros,
            sampling_logprobs=zeros, response_mask=mask,
            group_index=torch.arange(n) // params.samples_per_prompt, finish_reasons=("stop",) * n,
            texts=tuple(self.tokenizer.decode(r, skip_special_tokens=True) for r in rows),
            samples_per_prompt=params.samples_per_prompt, pad_token_id=self.pad_token_id,
            stats=RolloutStats(prefill_s=0.0, decode_s=0.0, total_s=0.0, prompt_tokens=0,
                               generated_tokens=int(mask.sum()), decode_steps=width),
        )  # fmt: skip
