"""The SFT loss on packed rows (``trainer/packing.py``, ``trainer/sft.py``): best-fit-decreasing bins, rows
without padding, attention kept inside each conversation, loss only on the target tokens."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import VOCAB, make_tiny_lm

import execrl.trainer.sft as sft
from execrl.trainer.packing import bin_fill, pack_bins, packed_row, prefix_groups
from execrl.trainer.sft import conversation_losses, packed_attention, token_losses


def _conversations(seed: int = 0) -> list[tuple[list[int], list[bool]]]:
    """Three conversations: a prompt, then a masked/target pattern like assistant turns and tool answers."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for length, targets in [(9, range(4, 9)), (12, [*range(3, 6), *range(9, 12)]), (7, range(5, 7))]:
        ids = torch.randint(1, VOCAB, (length,), generator=gen).tolist()
        out.append((ids, [i in set(targets) for i in range(length)]))
    return out


def _losses(model: torch.nn.Module, conversations: list[tuple[list[int], list[bool]]]) -> torch.Tensor:
    with torch.no_grad(), packed_attention(model):
        return token_losses(model, packed_row(conversations))


def test_pack_bins_best_fit_decreasing_by_hand() -> None:
    # capacity 10: 7 -> bin0 (3 left); 5 -> bin1 (5 left); 4 -> bin1 (1 left, the tightest fit); 3 -> bin0;
    # 2 -> bin2 (no room left anywhere); 1 -> bin1 (1 left, tightest)
    assert pack_bins([5, 7, 2, 4, 3, 1], 10) == [[1, 4], [0, 3, 5], [2]]
    assert bin_fill([5, 7, 2, 4, 3, 1], [[1, 4], [0, 3, 5], [2]], 10) == pytest.approx(22 / 30)
    with pytest.raises(ValueError, match="more than the capacity"):
        pack_bins([11], 10)


def test_packed_row_restarts_positions_and_never_targets_a_first_token() -> None:
    row = packed_row([([5, 6, 7], [True, True, True]), ([8, 9], [False, True])])
    assert row.input_ids.tolist() == [[5, 6, 7, 8, 9]]
    assert row.position_ids.tolist() == [[0, 1, 2, 0, 1]]
    assert row.target_mask.tolist() == [[False, True, True, False, True]]
    assert row.segments == ((0, 3), (3, 5))


def test_only_masked_tokens_are_targets_and_equal_the_full_logits_cross_entropy() -> None:
    """Token by token: the loss has one entry per target token, equal to the cross-entropy computed from the
    model's own full logits at exactly those positions."""
    model = make_tiny_lm()
    ids, mask = _conversations()[1]
    got = _losses(model, [(ids, mask)])
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]  # [T, V]
    wanted = [F.cross_entropy(logits[t - 1], torch.tensor(ids[t])) for t in range(1, len(ids)) if mask[t]]
    assert got.shape == (sum(mask),)
    assert torch.allclose(got, torch.stack(wanted).to(got.dtype), atol=1e-10)


def test_packing_does_not_leak_attention_across_conversations() -> None:
    """Each conversation's losses in a packed row equal its losses alone; and equal what transformers' own
    block-diagonal mask (sdpa, packed position ids) gives."""
    model = make_tiny_lm()
    conversations = _conversations()
    alone = torch.cat([_losses(model, [c]) for c in conversations])
    packed = _losses(model, conversations)
    assert torch.allclose(packed, alone, atol=1e-10)
    row = packed_row(conversations)
    with torch.no_grad():
        logits = model(input_ids=row.input_ids, position_ids=row.position_ids, use_cache=False).logits[0]
    positions = row.target_mask[0].nonzero().squeeze(-1)
    reference = F.cross_entropy(logits[positions - 1], row.input_ids[0, positions], reduction="none")
    assert torch.allclose(packed, reference, atol=1e-10)


def test_the_leak_test_fails_under_a_plain_causal_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above has teeth: with plain causal attention over the whole row (no segments), the second
    and third conversations see the ones before them and their losses move."""

    def causal(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):  # type: ignore[no-untyped-def]
        out = F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scaling)
        return out.transpose(1, 2).contiguous(), None

    monkeypatch.setattr(sft, "segment_attention", causal)
    model = make_tiny_lm()
    conversations = _conversations()
    alone = torch.cat([_losses(model, [c]) for c in conversations])
    packed = _losses(model, conversations)
    first = sum(conversations[0][1][1:])
    assert torch.allclose(packed[:first], alone[:first], atol=1e-10)  # nothing before the first one
    assert (packed[first:] - alone[first:]).abs().max() > 1e-3


def test_chunked_loss_and_its_gradient_equal_one_chunk() -> None:
    model = make_tiny_lm()
    row = packed_row(_conversations())
    grads = []
    for chunk in (1000, 3):  # one chunk; several chunks, recomputed in backward
        model.zero_grad()
        with packed_attention(model):
            losses = token_losses(model, row, chunk_tokens=chunk)
        losses.sum().backward()
        grads.append((losses.detach(), [p.grad.clone() for p in model.parameters()]))
    assert torch.allclose(grads[0][0], grads[1][0], atol=1e-12)
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(grads[0][1], grads[1][1], strict=True))


def test_conversation_losses_split_a_row_by_conversation() -> None:
    model = make_tiny_lm()
    conversations = _conversations()
    row = packed_row(conversations)
    losses = _losses(model, conversations)
    split = conversation_losses(row, losses)
    assert [n for _, n in split] == [sum(m[1:]) for _, m in conversations]
    alone = [float(_losses(model, [c]).sum()) for c in conversations]
    assert [s for s, _ in split] == pytest.approx(alone, abs=1e-9)


def test_packed_attention_restores_the_models_attention() -> None:
    model = make_tiny_lm()
    before = model.config._attn_implementation
    with packed_attention(model):
        assert model.config._attn_implementation == sft.PACKED_ATTENTION
    assert model.config._attn_implementation == before


def _sharing(seed: int = 2) -> list[tuple[list[int], list[bool]]]:
    """Four conversations: three begin with the same 12 tokens (a system prompt), one does not."""
    gen = torch.Generator().manual_seed(seed)
    system = torch.randint(1, VOCAB, (12,), generator=gen).tolist()
    out = []
    for tail, targets in [(6, range(15, 18)), (9, range(14, 21)), (5, range(13, 17))]:
        ids = system + torch.randint(1, VOCAB, (tail,), generator=gen).tolist()
        out.append((ids, [i in set(targets) for i in range(len(ids))]))
    other = torch.randint(1, VOCAB, (10,), generator=gen).tolist()
    out.insert(1, (other, [i >= 6 for i in range(10)]))
    return out


def test_prefix_groups_by_hand() -> None:
    a, b, c = [1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 9, 9], [1, 2, 8, 8, 8, 8, 8]
    masks = [[False] * 6 + [True], [False] * 4 + [True] * 3, [False] * 6 + [True]]
    # a and b share 5 tokens, but b's first target is token 4: the prefix stops before its predecessor (3)
    assert prefix_groups(list(zip([a, b, c], masks, strict=True)), 3) == [(3, [0, 1]), (0, [2])]
    assert prefix_groups(list(zip([a, b, c], masks, strict=True)), 4) == [(0, [0]), (0, [1]), (0, [2])]


def test_a_shared_prefix_is_computed_once_and_changes_nothing() -> None:
    """Sharing the system prompt: the row holds it once, and every conversation's losses and the gradient
    equal the unshared row's."""
    model = make_tiny_lm()
    conversations = _sharing()
    results = []
    for share in (0, 8):
        row = packed_row(conversations, share_prefix_tokens=share)
        model.zero_grad()
        with packed_attention(model):
            losses = token_losses(model, row)
        losses.sum().backward()
        results.append((row, conversation_losses(row, losses), [p.grad.clone() for p in model.parameters()]))
    (plain, plain_losses, plain_grads), (shared, shared_losses, shared_grads) = results
    assert plain.tokens - shared.tokens == 2 * 12  # the 12-token prefix once, not three times
    assert shared.conversation_tokens == plain.conversation_tokens and shared.conversations == 4
    assert [n for _, n in shared_losses] == [n for _, n in plain_losses]
    assert [s for s, _ in shared_losses] == pytest.approx([s for s, _ in plain_losses], abs=1e-10)
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(plain_grads, shared_grads, strict=True))
