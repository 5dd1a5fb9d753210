"""Next-token selection: temperature, top-k, top-p, greedy; returns both log-probabilities.

Pure functions on logits (no model, no cache) so they are tested directly. Nucleus sampling follows Holtzman
et al., "The Curious Case of Neural Text Degeneration" (ICLR 2020): keep the smallest set of most likely
tokens whose probability mass reaches ``top_p`` (the top token is always kept).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from execrl.rollout.types import SamplingParams

__all__ = ["SampledTokens", "inverse_cdf_sample", "sample_next_tokens", "truncated_logits"]


@dataclass(frozen=True, eq=False)
class SampledTokens:
    tokens: torch.Tensor  # [A] int64
    logprobs: torch.Tensor  # [A] float32, log-softmax of the raw logits (temperature 1)
    sampling_logprobs: torch.Tensor  # [A] float32, under the distribution actually sampled from


def sample_next_tokens(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator
) -> SampledTokens:
    """Pick one token per row of ``logits`` ([A, V], float32) and report its log-probabilities.

    One pass computes the row max, the unnormalised probabilities ``exp(x - max)`` and their sum; the draw
    reuses them and the log-probability is ``x[token] - max - log(sum)``. At temperature 1 without
    truncation the model's and the sampler's log-probability are the same number.
    """
    logits = logits.float()
    if params.greedy:
        tokens = logits.argmax(dim=-1)  # [A]; first maximum on ties, like transformers' greedy search
        sampling_logprobs = torch.zeros(tokens.shape, dtype=torch.float32)
        return SampledTokens(
            tokens=tokens, logprobs=_gather_log_softmax(logits, tokens), sampling_logprobs=sampling_logprobs
        )
    scaled = logits if params.temperature == 1.0 else logits / params.temperature
    candidates, candidate_ids = truncated_logits(scaled, params)  # [A, K]
    top = candidates.amax(dim=-1, keepdim=True)  # [A, 1]
    weights = torch.exp(candidates - top)  # [A, K] unnormalised probabilities, 0 where pruned
    choice = inverse_cdf_sample(weights, generator)  # [A, 1]
    log_total = weights.sum(dim=-1, keepdim=True).log()  # [A, 1]
    sampling_logprobs = (candidates.gather(1, choice) - top - log_total).squeeze(1)
    tokens = choice.squeeze(1) if candidate_ids is None else candidate_ids.gather(1, choice).squeeze(1)
    if candidate_ids is None and params.temperature == 1.0:
        model_logprobs = sampling_logprobs
    else:
        model_logprobs = _gather_log_softmax(logits, tokens)
    return SampledTokens(tokens=tokens, logprobs=model_logprobs, sampling_logprobs=sampling_logprobs)


def inverse_cdf_sample(weights: torch.Tensor, generator: torch.Generator, block: int = 256) -> torch.Tensor:
    """One draw per row of ``weights`` ([A, K], non-negative, any positive total) -> [A, 1] column indices.

    Inverse-CDF sampling needs one uniform number per row. ``torch.multinomial`` (used by
    ``model.generate``) draws one exponential per vocabulary entry instead, which on CPU costs more than
    the rest of the sampling step (about 60 ms for 64 x 49152). A full-width ``cumsum`` is itself slow (a
    sequential scan per row, ~2 ms at 64 x 49152), so wide rows are searched in two levels: block sums,
    then a scan inside the one block the draw falls in. A zero-weight entry is never chosen: the search
    returns the first index whose cumulative weight exceeds the target, and rounding at the edges is
    clamped to the last positive entry.
    """
    rows, width = weights.shape
    target = torch.rand((rows, 1), generator=generator)  # [A, 1] in [0, 1)
    if width <= 2 * block:
        return _search(weights, target)
    if width % block:  # zero-weight padding up to whole blocks; padding is never chosen
        weights = torch.nn.functional.pad(weights, (0, block - width % block))
        width = weights.shape[1]
    blocks = weights.view(rows, width // block, block)  # [A, B, block]
    block_weights = blocks.sum(dim=-1)  # [A, B]
    chosen = _search(block_weights, target)  # [A, 1]
    block_cdf = block_weights.cumsum(dim=-1)
    before = block_cdf.gather(1, chosen) - block_weights.gather(1, chosen)  # mass of earlier blocks
    scaled = target * block_cdf[:, -1:]  # the target in weight units
    inside = blocks.gather(1, chosen[:, :, None].expand(rows, 1, block)).squeeze(1)  # [A, block]
    local = (scaled - before).clamp_(min=0.0) / inside.sum(dim=-1, keepdim=True).clamp_(min=1e-30)
    return chosen * block + _search(inside, local.clamp_(max=1.0 - 2**-24))


def _search(weights: torch.Tensor, fraction: torch.Tensor) -> torch.Tensor:
    """First column whose cumulative weight exceeds ``fraction`` [A, 1] of the row total -> [A, 1]."""
    cdf = weights.cumsum(dim=-1)  # [A, K]
    found = torch.searchsorted(cdf, fraction * cdf[:, -1:], right=True)
    columns = torch.arange(weights.shape[-1], device=weights.device)
    last_positive = torch.where(weights > 0, columns, 0).amax(dim=-1, keepdim=True)  # [A, 1]
    return torch.minimum(found, last_positive)


def truncated_logits(
    scaled_logits: torch.Tensor, params: SamplingParams
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Apply top-k then top-p to temperature-scaled logits [A, V].

    Returns ``(candidates, candidate_ids)``: with no truncation, the logits themselves and ``None`` (the
    column IS the token id); otherwise the logits of the candidates sorted descending ([A, K], pruned ones
    set to -inf) and their token ids. Working in the top-k space avoids sorting the whole vocabulary.
    """
    vocab = scaled_logits.shape[-1]
    use_top_k = 0 < params.top_k < vocab
    if not use_top_k and params.top_p >= 1.0:
        return scaled_logits, None
    if use_top_k:
        candidates, candidate_ids = torch.topk(scaled_logits, params.top_k, dim=-1)  # sorted descending
    else:
        candidates, candidate_ids = torch.sort(scaled_logits, dim=-1, descending=True)
    if params.top_p < 1.0:
        probs = torch.softmax(candidates, dim=-1)  # [A, K], renormalised over the top-k when top-k is on
        mass_before = probs.cumsum(dim=-1) - probs  # probability of strictly more likely candidates
        candidates = candidates.masked_fill(mass_before >= params.top_p, float("-inf"))
    return candidates, candidate_ids


def _gather_log_softmax(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[tokens] without materialising the [A, V] log-softmax."""
    picked = logits.gather(1, tokens.unsqueeze(1)).squeeze(1)  # [A]
    return picked - torch.logsumexp(logits, dim=-1)
