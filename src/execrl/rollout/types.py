"""Data crossing the rollout boundary: sampling parameters in, a :class:`RolloutBatch` out.

Row layout everywhere: prompt-major, ``row = prompt_index * samples_per_prompt + sample_index``, so the
``samples_per_prompt`` rows of one group are contiguous (what group-normalised advantages expect).

Two log-probabilities are kept per sampled token, because they differ whenever temperature != 1 or top-k /
top-p truncate the distribution:

- ``logprobs``: log pi(token | context) under the model's own distribution (softmax of the raw logits,
  temperature 1, full vocabulary). This is what a trainer's teacher-forced forward pass computes, i.e. what
  ``old_logprobs`` must equal; :func:`execrl.rollout.logprob_mismatch` checks exactly this column.
- ``sampling_logprobs``: log q(token | context) under the distribution the token was actually drawn from
  (logits / temperature, then top-k / top-p truncation, renormalised). Use it for importance-sampling
  corrections against the behaviour policy. Greedy decoding (temperature 0) is a point mass: 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

__all__ = ["FinishReason", "RolloutBatch", "RolloutStats", "SamplingParams"]

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample a group of completions per prompt.

    ``temperature=0`` means greedy (then ``samples_per_prompt`` copies are identical). ``top_k=0`` and
    ``top_p=1.0`` disable truncation. ``stop_strings`` end a completion once its text contains one (the
    tokens up to and including the one that completed the string are kept). ``stop_token_ids`` are added to
    the model's EOS ids (``<|im_end|>`` is always included when the tokenizer has it). ``ignore_eos`` keeps
    sampling past the model's EOS ids (benchmarks that need equal lengths); ``stop_token_ids`` and
    ``stop_strings`` still apply. ``seed`` seeds a ``torch.Generator`` private to the call.
    """

    samples_per_prompt: int = 8
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_strings: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.samples_per_prompt < 1:
            raise ValueError(f"SamplingParams.samples_per_prompt must be >= 1, got {self.samples_per_prompt}")
        if self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not self.temperature >= 0.0:
            raise ValueError(f"SamplingParams.temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1] (1 = off), got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"SamplingParams.top_k must be >= 0 (0 = off), got {self.top_k}")
        if isinstance(self.stop_strings, str) or any(
            not isinstance(s, str) or not s for s in self.stop_strings
        ):
            raise ValueError(
                f"SamplingParams.stop_strings must be a tuple of non-empty strings, got {self.stop_strings!r}"
            )
        if any(not isinstance(t, int) or t < 0 for t in self.stop_token_ids):
            raise ValueError(
                f"SamplingParams.stop_token_ids must be non-negative ints, got {self.stop_token_ids!r}"
            )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class RolloutStats:
    """Timing of one ``generate`` call. ``generated_tokens`` counts real (unpadded) completion tokens;
    ``reused_prompt_tokens`` of the ``prompt_tokens`` came from a prefix cache instead of the prefill."""

    prefill_s: float
    decode_s: float
    total_s: float
    prompt_tokens: int
    generated_tokens: int
    decode_steps: int
    reused_prompt_tokens: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.total_s if self.total_s > 0 else 0.0


@dataclass(frozen=True, eq=False)
class RolloutBatch:
    """Completions for ``num_prompts * samples_per_prompt`` rows (prompt-major, see module docstring).

    Tensors are on CPU; ``T`` is the longest completion in the batch; positions past a row's length hold
    ``pad_token_id`` / 0.0 / False.
    """

    prompt_token_ids: tuple[tuple[int, ...], ...]  # one per prompt
    completion_ids: torch.Tensor  # [N, T] int64, padded with pad_token_id
    logprobs: torch.Tensor  # [N, T] float32, model distribution at temperature 1
    sampling_logprobs: torch.Tensor  # [N, T] float32, the distribution actually sampled from
    response_mask: torch.Tensor  # [N, T] bool, True on generated tokens (EOS included)
    group_index: torch.Tensor  # [N] int64, prompt index of each row
    finish_reasons: tuple[FinishReason, ...]  # [N]
    texts: tuple[str, ...]  # [N] decoded completions, special tokens skipped
    samples_per_prompt: int
    pad_token_id: int
    stats: RolloutStats

    @property
    def num_prompts(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_rows(self) -> int:
        return int(self.completion_ids.shape[0])

    @property
    def completion_lengths(self) -> torch.Tensor:  # [N] int64
        return self.response_mask.sum(dim=1)

    def completion_token_ids(self, row: int) -> list[int]:
        """Unpadded completion tokens of one row."""
        length = int(self.response_mask[row].sum())
        return [int(t) for t in self.completion_ids[row, :length]]

    def prompt_for_row(self, row: int) -> tuple[int, ...]:
        return self.prompt_token_ids[int(self.group_index[row])]
