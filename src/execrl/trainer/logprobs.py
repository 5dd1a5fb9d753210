"""Token log-probs and entropies of given sequences under a causal LM, plus the PPO value head/critic.

Memory: a full ``[N, S, V]`` logits tensor is the largest activation of an LLM step (8 x 1024 tokens x 49k
vocab x 4 bytes = 1.6 GB for SmolLM2). We run the decoder trunk once, then apply ``lm_head`` and
``log_softmax`` to chunks of ``chunk_tokens`` hidden states and keep only the gathered log-prob and the
entropy per token. Under autograd each chunk is recomputed in backward (``torch.utils.checkpoint``), so the
chunk's logits are not kept either; a micro-batch that fits in one chunk skips the recompute (one chunk's
log-probs are alive at the peak either way). ``token_mask`` restricts the work to the positions the loss needs
(usually the response tokens), which also skips the prompt's ``lm_head``. Measured on CPU (8 x 512 tokens,
49k vocab, forward + backward): peak memory growth 3.1 GB with full logits, 0.81 GB with 1024-token chunks,
0.25 GB with 256; the price is recomputing ``lm_head`` in backward plus the entropy (about 1.7x the time of
the full-logits path on CPU in that run).

Alignment: outputs are ``[N, S]`` aligned with ``input_ids``: ``logprobs[:, t] = log p(input_ids[:, t] |
input_ids[:, :t])``; column 0 and any token right after padding (no context) are 0. So ``response_mask``
[N, S] applies to them directly.
Positions are ``cumsum(attention_mask) - 1``, as in Hugging Face generation, so left padding does not
shift positions (and trimming pad columns changes nothing).

Limits: the split into trunk + ``lm_head`` is used for models exposing ``get_decoder()`` and
``get_output_embeddings()`` without logit post-processing; models with ``final_logit_softcapping`` or a
``logit_scale`` (Gemma 2, Cohere) fall back to the model's own full-vocabulary logits.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from execrl.trainer.prefix import SharedPrefix, can_share, find_shared_prefix, forward_shared

_LOGIT_POSTPROCESSING = ("final_logit_softcapping", "logit_scale")


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """``cumsum(mask) - 1`` clamped at 0: positions that ignore left padding; [N, S] -> [N, S]."""
    return (attention_mask.long().cumsum(dim=-1) - 1).clamp(min=0)


def _can_split(model: nn.Module) -> bool:
    config = getattr(model, "config", None)
    if any(getattr(config, name, None) is not None for name in _LOGIT_POSTPROCESSING):
        return False
    return callable(getattr(model, "get_decoder", None)) and callable(
        getattr(model, "get_output_embeddings", None)
    )


def _decoder(model: nn.Module) -> Any:
    loose: Any = model  # Hugging Face API, untyped for nn.Module
    return loose.get_decoder() if callable(getattr(model, "get_decoder", None)) else model


def scored_positions(attention_mask: Tensor, token_mask: Tensor | None) -> Tensor:
    """[N, S] bool: the positions ``policy_forward`` scores (in ``token_mask``, default every real token, with a
    real token before them)."""
    wanted = torch.zeros_like(attention_mask, dtype=torch.bool)
    scored = attention_mask if token_mask is None else token_mask  # [N, S]
    wanted[:, 1:] = (scored[:, 1:] > 0) & (attention_mask[:, :-1] > 0)
    return wanted


def shared_layout(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor, token_mask: Tensor | None, *, share: bool
) -> SharedPrefix | None:
    """The shared context ``policy_forward(..., share_prompt=share)`` uses on this batch, or None when it
    runs the plain pass (sharing off, nothing shared, or a model that cannot share)."""
    if not (share and _can_split(model) and can_share(_decoder(model))):
        return None
    return find_shared_prefix(input_ids, attention_mask, scored_positions(attention_mask, token_mask))


def forward_hidden(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor, *, shared_context_of: Tensor | None = None
) -> Tensor:
    """Last hidden states of the decoder trunk (after the final norm), [N, S] -> [N, S, H].

    With ``shared_context_of`` (the [N, S] mask of the positions that will be scored), rows sharing the same
    context before the first scored column compute it once (:mod:`execrl.trainer.prefix`); hidden states
    before that column are then the shared context's.
    """
    decoder = _decoder(model)
    positions = position_ids_from_mask(attention_mask)
    if shared_context_of is not None:
        shared = find_shared_prefix(input_ids, attention_mask, shared_context_of)
        if shared is not None:
            hidden_shared = forward_shared(decoder, input_ids, attention_mask, positions, shared)
            if hidden_shared is not None:
                return hidden_shared
    out = decoder(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, use_cache=False)
    hidden: Tensor = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    return hidden


def _logp_entropy(
    logits: Tensor, targets: Tensor, temperature: float, entropy_grad: bool
) -> tuple[Tensor, Tensor]:
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature  # [K, V]
    log_probs = torch.log_softmax(logits, dim=-1)  # [K, V]
    token_logp = log_probs.gather(-1, targets[:, None]).squeeze(-1)  # [K]
    # Without entropy_grad the entropy must not enter autograd: its saved [K, V] tensors would never be
    # unpacked in backward and so stay alive (per chunk) until the whole graph is freed.
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        entropy = -(log_probs.exp() * log_probs).sum(dim=-1)  # [K]
    return token_logp, entropy


def _chunked(fn: Any, inputs: Tensor, targets: Tensor, chunk_tokens: int) -> tuple[Tensor, Tensor]:
    # One chunk gains nothing from recomputing in backward: its [K, V] log-probs would be alive at the
    # same time either way (as the only chunk), so skip the second lm_head pass.
    use_checkpoint = torch.is_grad_enabled() and inputs.requires_grad and inputs.shape[0] > chunk_tokens
    logps, entropies = [], []
    for start in range(0, inputs.shape[0], chunk_tokens):
        part, part_targets = inputs[start : start + chunk_tokens], targets[start : start + chunk_tokens]
        if use_checkpoint:
            logp, entropy = checkpoint(fn, part, part_targets, use_reentrant=False)
        else:
            logp, entropy = fn(part, part_targets)
        logps.append(logp)
        entropies.append(entropy)
    if not logps:
        empty = inputs.new_zeros(0, dtype=torch.promote_types(inputs.dtype, torch.float32))
        return empty, empty
    return torch.cat(logps), torch.cat(entropies)


def policy_forward(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    *,
    token_mask: Tensor | None = None,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
    return_hidden: bool = False,
    entropy_grad: bool = False,
    share_prompt: bool = True,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """``compute_logprobs`` that can also return the trunk's hidden states [N, S, H] (for a value head).

    The entropy carries a gradient only with ``entropy_grad=True`` (an entropy bonus in the loss).
    ``share_prompt``: rows with the same context before their first scored token compute it once
    (:mod:`execrl.trainer.prefix`); the returned hidden states before that column are the shared ones.
    """
    if input_ids.shape != attention_mask.shape or input_ids.dim() != 2:
        raise ValueError(
            f"input_ids and attention_mask must share one [N, S] shape, got {tuple(input_ids.shape)} "
            f"and {tuple(attention_mask.shape)}"
        )
    wanted = scored_positions(attention_mask, token_mask)  # needs a real token before it
    rows, cols = wanted.nonzero(as_tuple=True)  # positions t >= 1 to score
    targets = input_ids[rows, cols]  # [K]
    hidden: Tensor | None = None
    if _can_split(model):
        context = wanted if share_prompt else None
        hidden = forward_hidden(model, input_ids, attention_mask, shared_context_of=context)  # [N, S, H]
        loose: Any = model  # Hugging Face API, untyped for nn.Module
        head: Any = loose.get_output_embeddings()

        def score(states: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
            return _logp_entropy(head(states), tgt, temperature, entropy_grad)

        logp, entropy = _chunked(score, hidden[rows, cols - 1], targets, chunk_tokens)
    else:
        if return_hidden:
            raise ValueError("return_hidden needs a model with get_decoder() and no logit post-processing")
        keep = _logits_to_keep(model, input_ids.shape[1], cols)
        logits = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_from_mask(attention_mask),
            **({} if keep is None else {"logits_to_keep": keep}),
        ).logits  # [N, K, V]: the last K positions (K = S without logits_to_keep)
        offset = input_ids.shape[1] - logits.shape[1]

        def score_logits(chunk: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
            return _logp_entropy(chunk, tgt, temperature, entropy_grad)

        logp, entropy = _chunked(score_logits, logits[rows, cols - 1 - offset], targets, chunk_tokens)
    out_logp = logp.new_zeros(input_ids.shape).index_put((rows, cols), logp)  # [N, S]
    out_entropy = entropy.new_zeros(input_ids.shape).index_put((rows, cols), entropy)  # [N, S]
    return out_logp, out_entropy, hidden if return_hidden else None


def _logits_to_keep(model: nn.Module, width: int, cols: Tensor) -> int | None:
    """How many last positions' logits the full-logits path needs (from the first scored position's
    context on), or None when the model takes no ``logits_to_keep`` (it then computes all ``width``)."""
    import inspect

    if "logits_to_keep" not in inspect.signature(model.forward).parameters:
        return None
    first = int(cols.min()) - 1 if cols.numel() else width - 1
    return width - first


def compute_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    *,
    token_mask: Tensor | None = None,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
    share_prompt: bool = True,
) -> tuple[Tensor, Tensor]:
    """Log-probs and entropies of the given tokens under ``model``: [N, S] -> ([N, S], [N, S]).

    ``temperature`` must equal the sampling temperature, or the ratio to the rollout's log-probs is biased
    (TRL #4159). Positions outside ``token_mask`` (default: ``attention_mask``) and column 0 are 0. Runs with
    whatever grad mode the caller set: wrap in ``torch.no_grad()`` for old/reference log-probs.
    """
    logp, entropy, _ = policy_forward(
        model,
        input_ids,
        attention_mask,
        token_mask=token_mask,
        temperature=temperature,
        chunk_tokens=chunk_tokens,
        share_prompt=share_prompt,
    )
    return logp, entropy


class ValueHead(nn.Module):
    """PPO critic head on a trunk's last hidden state: ``Linear(hidden_size, 1)``.

    Two ways to use it (``policy_update(value_model=...)``):

    * shared trunk: pass a ``ValueHead``; it reads the policy's hidden states (no extra forward pass, but
      value gradients flow into the policy trunk, as in the original PPO-for-LM setups);
    * separate critic: pass a ``Critic`` (own trunk + head): one more forward/backward, no interference.

    Values are aligned like log-probs: ``values[:, t]`` is read at position ``t-1``, i.e. the state before
    token ``t`` was generated; column 0 is 0. Either way the head's parameters must be in the optimizer.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.linear.weight, std=1.0 / (hidden_size + 1) ** 0.5)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        """[N, S, H] -> [N, S] values aligned with the tokens they precede."""
        values = self.linear(hidden[:, :-1].to(self.linear.weight.dtype)).squeeze(-1)  # [N, S-1]
        return torch.cat([values.new_zeros(values.shape[0], 1), values], dim=1)


class Critic(nn.Module):
    """A separate value model: a causal LM's trunk (``backbone``, e.g. a second copy of the policy) + head."""

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = ValueHead(hidden_size)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, *, shared_context_of: Tensor | None = None
    ) -> Tensor:
        """[N, S] token ids -> [N, S] values (aligned as in ``ValueHead``).

        ``shared_context_of`` (the [N, S] mask of the positions whose values are used): rows with the same
        context before its first column compute that context once, as in ``forward_hidden``.
        """
        hidden = forward_hidden(
            self.backbone, input_ids, attention_mask, shared_context_of=shared_context_of
        )  # [N, S, H]
        values: Tensor = self.head(hidden.to(self.head.linear.weight.dtype))
        return values
