"""Proof that an exported directory reproduces the model it was exported from: its logits, read back.

``execrl export`` writes a directory meant to load with no execrl code. That a file was written proves
little: verl's model merger writes a "merged" LoRA directory byte-identical to the *base* model and nothing
warns (verl #7285, #4553), and a tied input embedding / output head can come apart in a merge
(transformers #45127). So before reporting success, export loads what it wrote with plain
``transformers.AutoModelForCausalLM.from_pretrained`` (for an adapter directory, transformers' own PEFT
integration, which loads the base model named in ``adapter_config.json`` under it) and compares the logits
on a few chat-templated prompts with the model it exported, adapters unmerged: the model as trained.

Two comparisons when adapters were folded: the directory against the dense model export folded in memory
(1e-5: serialization, tied embeddings, dtype), and against the trained model with its adapters (1e-5 of the
largest logit: the fold itself reassociates float32 sums, see ``ExportCheck.trained_tolerance``). Without a
fold (a full fine-tune, ``--adapter-only``) the one comparison is against the trained model, at 1e-5.

Limits: a few short prompts, not a proof over all inputs (a weight that only long contexts reach would
pass); the tolerances suit float32 (a bfloat16 model folded from adapters would not meet them, and is
refused as a mismatch rather than passed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "CHECK_PROMPTS",
    "LOGITS_TOLERANCE",
    "ExportCheck",
    "ExportMismatch",
    "check_export_logits",
    "check_prompt_ids",
]

LOGITS_TOLERANCE = 1e-5  # max |logit difference| allowed (relative to the largest |logit| after a fold)
CHECK_PROMPTS = (
    "Write a Python function that returns the sum of a list of integers.",
    "What does `print(len('abc'))` print?",
    "Fix the bug: def is_even(n): return n % 2 == 1",
)


@dataclass(frozen=True)
class ExportCheck:
    """What the read-back found. ``vs_trained``: max |logit difference| from the model as trained (LoRA
    adapters unmerged); ``vs_folded``: from the in-memory dense model the export wrote (None without a
    fold, where the two are the same model); ``logit_scale``: the trained model's largest |logit|."""

    vs_trained: float
    vs_folded: float | None
    logit_scale: float

    @property
    def trained_tolerance(self) -> float:
        """1e-5; after a fold 1e-5 x the largest |logit|: ``W x + s B (A x)`` and ``(W + s B A) x`` round
        differently in float32 (measured 1.6e-4 at |logit| 40 on SmolLM2-135M with rank-16 adapters), a
        wrong or missing fold moves logits by the adapters' whole effect."""
        return LOGITS_TOLERANCE * (max(1.0, self.logit_scale) if self.vs_folded is not None else 1.0)

    @property
    def ok(self) -> bool:
        folded_ok = self.vs_folded is None or self.vs_folded <= LOGITS_TOLERANCE
        return folded_ok and self.vs_trained <= self.trained_tolerance  # NaN fails both

    def summary(self) -> str:
        line = f"max |diff| {self.vs_trained:.3g} from the trained model (tolerance {self.trained_tolerance:.3g})"
        if self.vs_folded is not None:
            line += f", {self.vs_folded:.3g} from the folded model (tolerance {LOGITS_TOLERANCE:g})"
        return f"logits checked in plain transformers on {len(CHECK_PROMPTS)} chat prompts: {line}"


class ExportMismatch(RuntimeError):
    """The exported directory does not reproduce the model's logits (``ExportCheck.ok`` is false)."""

    def __init__(self, directory: Path, check: ExportCheck) -> None:
        super().__init__(f"export check failed: {directory} loaded back: {check.summary()}")
        self.check = check


def check_prompt_ids(tokenizer: PreTrainedTokenizerBase) -> list[list[int]]:
    """``CHECK_PROMPTS`` as user turns through the tokenizer's chat template, as training encodes prompts
    (``rollout.prompts.encode_prompts``); a tokenizer without a chat template encodes the plain text."""
    from execrl.rollout.prompts import encode_prompts

    if getattr(tokenizer, "chat_template", None) is not None:
        return encode_prompts(tokenizer, list(CHECK_PROMPTS))
    return [list(tokenizer(p)["input_ids"]) for p in CHECK_PROMPTS]


def check_export_logits(
    directory: Path,
    *,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    folded: PreTrainedModel | None = None,
) -> ExportCheck:
    """Load ``directory`` with plain transformers (in ``model``'s dtype) and compare its logits at every
    position of the check prompts with ``model`` (as trained) and ``folded`` (the dense model written, if
    it was folded from adapters). Pure apart from reading ``directory``."""
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(str(directory), dtype=model.dtype).eval()  # type: ignore[no-untyped-call]
    prompts = check_prompt_ids(tokenizer)
    ours = _logits(model, prompts)
    theirs = _logits(loaded, prompts)
    return ExportCheck(
        vs_trained=_max_abs_diff(ours, theirs),
        vs_folded=None if folded is None else _max_abs_diff(_logits(folded, prompts), theirs),
        logit_scale=max(float(x.abs().max()) for x in ours),
    )


def _logits(model: PreTrainedModel, prompts: list[list[int]]) -> list[torch.Tensor]:
    """Each prompt's logits [T, V] in float32, in eval mode (the model's mode is put back)."""
    import torch

    was_training = model.training
    model.eval()  # type: ignore[no-untyped-call]
    try:
        with torch.no_grad():
            return [model(torch.tensor([ids])).logits[0].float() for ids in prompts]  # [T, V] each
    finally:
        model.train(was_training)


def _max_abs_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """max |a - b| over all prompts; inf on a shape mismatch (another vocabulary) or a non-finite value
    (a NaN would otherwise compare as no difference)."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return math.inf
        diff = float((x - y).abs().max())
        if not math.isfinite(diff):
            return math.inf
        worst = max(worst, diff)
    return worst
