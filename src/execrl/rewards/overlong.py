"""DAPO's two remedies for completions cut at the length cap (Yu et al. 2025, "DAPO", arXiv 2503.14476, §3.4).

A completion cut at ``max_new_tokens`` usually fails its tests because it is unfinished, not because its
reasoning is wrong; scoring it like any wrong answer teaches the policy noise. DAPO proposes:

- **Overlong reward shaping** ("soft overlong punishment", eq. 13): with cap ``L_max`` and a buffer of
  ``L_cache`` tokens before it, a completion of ``|y|`` tokens gets

      0                                  if |y| <= L_max - L_cache
      ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
      -1                                 if |y| > L_max

  added to its reward, times ``penalty_factor`` (verl's ``overlong_buffer.penalty_factor``). Generation stops
  at the cap, so ``|y| > L_max`` never happens here: a completion that reached the cap gets ``-factor``.
- **Overlong filtering**: truncated samples are masked out of the loss (their reward still counts in their
  group's advantages, as in TRL's ``mask_truncated_completions``).

Pure functions over lengths and finish reasons (no torch: ``rewards`` is torch-free). Limits: the length is
the completion's token count as the engine reports it; with a length curriculum (``rollout.length_stages``)
``max_new_tokens`` must be the cap of the step that sampled the completion.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["overlong_keep", "overlong_penalties", "overlong_penalty"]


def overlong_penalty(
    length: int, *, max_new_tokens: int, buffer_tokens: int, penalty_factor: float = 1.0
) -> float:
    """DAPO's soft overlong punishment for one completion of ``length`` tokens (a value <= 0; see module
    doc). ``buffer_tokens=0`` turns it off (returns 0)."""
    if buffer_tokens < 0 or max_new_tokens < 1 or length < 0:
        raise ValueError(
            f"overlong_penalty: need length >= 0, max_new_tokens >= 1, buffer_tokens >= 0; got {length}, "
            f"{max_new_tokens}, {buffer_tokens}"
        )
    if buffer_tokens == 0:
        return 0.0
    if buffer_tokens > max_new_tokens:
        raise ValueError(
            f"algorithm.overlong_buffer_tokens ({buffer_tokens}) must not exceed the cap max_new_tokens "
            f"({max_new_tokens})"
        )
    free = max_new_tokens - buffer_tokens  # L_max - L_cache
    if length <= free:
        return 0.0
    if length > max_new_tokens:
        return -penalty_factor
    return penalty_factor * (free - length) / buffer_tokens


def overlong_penalties(
    lengths: Sequence[int], *, max_new_tokens: int, buffer_tokens: int, penalty_factor: float = 1.0
) -> list[float]:
    """``overlong_penalty`` of each completion, in order."""
    return [
        overlong_penalty(
            n, max_new_tokens=max_new_tokens, buffer_tokens=buffer_tokens, penalty_factor=penalty_factor
        )
        for n in lengths
    ]


def overlong_keep(finish_reasons: Sequence[str]) -> list[bool]:
    """Overlong filtering: False for each completion the cap cut (finish reason ``"length"``), whose loss is
    then masked out; True for every other one."""
    return [reason != "length" for reason in finish_reasons]
