"""Long prompts in bounded memory: activation checkpointing, the shared-width micro-batch budget, the
``train/padding_share`` metric and the full-logits path's ``logits_to_keep`` (issue 26)."""

from __future__ import annotations

import torch
from tests.unit.trainer.test_prefix import _batch

from execrl.rollout.models import tiny_model
from execrl.trainer.batching import microbatch_rows, padded_cost
from execrl.trainer.checkpointing import activation_checkpointing, decoder_layers
from execrl.trainer.logprobs import policy_forward
from execrl.trainer.prefix import computed_positions, find_shared_prefix


def _grads(
    model: torch.nn.Module, *, share: bool, checkpoint: bool
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    ids, attention, response = _batch()
    model.zero_grad(set_to_none=True)
    with activation_checkpointing(model, enabled=checkpoint):
        logp, entropy, _ = policy_forward(
            model, ids, attention, token_mask=response, share_prompt=share, entropy_grad=True
        )
        weights = torch.linspace(-1.0, 2.0, ids.numel(), dtype=logp.dtype).view(ids.shape)
        ((logp * weights).sum() + 0.1 * (entropy * response).sum()).backward()
    return logp.detach(), [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def test_checkpointed_shared_pass_matches_the_plain_pass() -> None:
    """Guards the replay-safe context cache: a recompute that appended the context's keys/values a second
    time (a plain DynamicCache) would change every row's attention and so the gradients."""
    model = tiny_model(vocab_size=64, hidden_size=32, init_std=0.3).double()
    plain_logp, plain = _grads(model, share=False, checkpoint=False)
    for share in (False, True):
        logp, grads = _grads(model, share=share, checkpoint=True)
        torch.testing.assert_close(logp, plain_logp, rtol=0, atol=1e-10)
        assert len(grads) == len(plain) and plain
        for got, want in zip(grads, plain, strict=True):
            assert float((got - want).norm()) <= 1e-6 * max(float(want.norm()), 1e-3)


def test_checkpointing_restores_the_layers_and_wraps_only_inside_the_block() -> None:
    model = tiny_model(vocab_size=64, hidden_size=32)
    layers = decoder_layers(model)
    assert layers and all("forward" not in layer.__dict__ for layer in layers)
    with activation_checkpointing(model):
        assert all("forward" in layer.__dict__ for layer in layers)
    assert all("forward" not in layer.__dict__ for layer in layers)


def test_padded_cost_counts_a_shared_context_once_per_group() -> None:
    # 4 rows of one group over columns [0, 9], context [0, 6): 1 x 6 + 4 x 4 = 22, not 4 x 10 = 40.
    assert padded_cost(4, 1, 0, 9, 6) == 22
    assert padded_cost(4, 1, 0, 9, None) == 40
    assert padded_cost(4, 2, 0, 9, 6) == 2 * 6 + 4 * 4


def test_a_long_prompt_group_stays_in_one_microbatch() -> None:
    """Guards against splitting a long prompt's group row by row (each row then recomputes the prompt):
    8 rows x 40 columns = 320 > 100 padded tokens, but the shared pass computes 32 + 8 x 8 = 96."""
    mask = torch.ones(8, 40, dtype=torch.long)
    groups = torch.zeros(8, dtype=torch.long)
    parts = microbatch_rows(mask, 100, groups=groups, shared_width=32)
    assert len(parts) == 1 and parts[0][0].tolist() == list(range(8))
    assert len(microbatch_rows(mask, 100, groups=groups)) == 4  # rows x width: 2 rows of 40 per part


def test_computed_positions_by_hand() -> None:
    ids, attention, response = _batch()  # 9 rows x 11 columns, context width 6, 3 distinct prompts
    padded, computed = computed_positions(attention, None)
    assert (padded, computed) == (int((attention == 0).sum()), 9 * 11)
    shared = find_shared_prefix(ids, attention, response)
    assert shared is not None
    padded, computed = computed_positions(attention, shared)
    context_pad = (6 - 6) + (6 - 3) + (6 - 5)  # the three prompts left-padded to 6
    tail_pad = int((attention[:, 6:] == 0).sum())
    assert (padded, computed) == (context_pad + tail_pad, 3 * 6 + 9 * 5)


def test_full_logits_path_computes_only_the_scored_positions_logits() -> None:
    """A model with logit post-processing runs the plain HF forward; it must ask for the logits from the first
    scored position's context on (``logits_to_keep``), not [N, S, V], and still score the same values."""
    model = tiny_model(vocab_size=64, hidden_size=32, init_std=0.3).double()
    ids, attention, response = _batch()
    with torch.no_grad():
        want, _, _ = policy_forward(model, ids, attention, token_mask=response, share_prompt=False)
        model.config.logit_scale = 1.0  # forces the full-logits path (cannot split lm_head off)
        seen: list[int] = []
        hook = model.lm_head.register_forward_hook(lambda _m, _i, out: seen.append(out.shape[1]))
        got, _, _ = policy_forward(model, ids, attention, token_mask=response, share_prompt=False)
        hook.remove()
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
    assert seen == [ids.shape[1] - 5]  # the first scored column is 6: logits from column 5 on


def test_vocab_projection_never_sees_more_than_a_chunk_of_positions() -> None:
    """Guards against a [tokens x vocab] float tensor of a whole long row: the lm_head (and so log_softmax
    and the entropy) runs on at most ``chunk_tokens`` scored positions at a time, forward and recompute."""
    model = tiny_model(vocab_size=64, hidden_size=32, init_std=0.3).double()
    ids, attention, response = _batch()
    rows_seen: list[int] = []
    hook = model.lm_head.register_forward_hook(lambda _m, inputs, _o: rows_seen.append(inputs[0].shape[0]))
    logp, entropy, _ = policy_forward(
        model, ids, attention, token_mask=response, chunk_tokens=4, entropy_grad=True, share_prompt=True
    )
    (logp.sum() + entropy.sum()).backward()
    hook.remove()
    scored = int(response[:, 1:].sum())
    assert scored > 4 and rows_seen and max(rows_seen) <= 4
    assert sum(rows_seen) >= scored  # every scored position went through, in chunks (plus recomputes)
