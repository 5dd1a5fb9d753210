"""Shared-prompt forward (``execrl.trainer.prefix``): same log-probs and gradients as the plain pass."""

from __future__ import annotations

import hashlib

import torch

from execrl.rollout.models import tiny_model
from execrl.trainer.logprobs import policy_forward
from execrl.trainer.prefix import find_shared_prefix

PAD = 0


def _grpo_batch(prompts: list[list[int]], completions: list[list[list[int]]]) -> tuple[torch.Tensor, ...]:
    """Left-padded prompts then right-padded completions, one row per completion (like to_train_batch)."""
    rows = [(p, c) for p, group in zip(prompts, completions, strict=True) for c in group]
    p_max = max(len(p) for p in prompts)
    t_max = max(len(c) for _, c in rows)
    ids = torch.full((len(rows), p_max + t_max), PAD, dtype=torch.long)
    attention = torch.zeros_like(ids)
    response = torch.zeros_like(ids)
    for r, (p, c) in enumerate(rows):
        ids[r, p_max - len(p) : p_max] = torch.tensor(p)
        attention[r, p_max - len(p) : p_max] = 1
        ids[r, p_max : p_max + len(c)] = torch.tensor(c)
        attention[r, p_max : p_max + len(c)] = 1
        response[r, p_max : p_max + len(c)] = 1
    return ids, attention, response


def _batch() -> tuple[torch.Tensor, ...]:
    prompts = [[5, 9, 13, 21, 8, 7], [30, 31, 32], [40, 41, 42, 43, 44]]
    completions = [
        [[3, 4, 5], [6, 7], [3, 4, 5, 6, 9]],
        [[11], [12, 13, 14]],
        [[50, 51, 52, 53], [50, 51], [7, 7, 7], [9]],
    ]
    return _grpo_batch(prompts, completions)


def _model() -> torch.nn.Module:
    model = tiny_model(vocab_size=64, hidden_size=32, init_std=0.3).double()
    model.train()
    return model


def _logp_and_grads(
    model: torch.nn.Module, share: bool
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    ids, attention, response = _batch()
    model.zero_grad(set_to_none=True)
    logp, entropy, hidden = policy_forward(
        model, ids, attention, token_mask=response, share_prompt=share, return_hidden=True, entropy_grad=True
    )
    weights = torch.linspace(-1.0, 2.0, ids.numel(), dtype=logp.dtype).view(ids.shape)
    assert hidden is not None
    # A loss touching log-probs, entropies and the hidden states of scored positions' contexts.
    loss = (logp * weights).sum() + 0.1 * (entropy * response).sum() + hidden[:, -4:].pow(2).mean()
    loss.backward()
    grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
    return logp.detach(), entropy.detach(), grads


def test_detects_groups_and_context_width() -> None:
    ids, attention, response = _batch()
    shared = find_shared_prefix(ids, attention, response)
    assert shared is not None
    assert shared.width == 6  # prompts left-padded to the longest (6 tokens)
    assert shared.unique_rows.numel() == 3
    assert (
        shared.inverse.tolist()
        == [shared.inverse[0].item()] * 3 + [shared.inverse[3].item()] * 2 + [shared.inverse[5].item()] * 4
    )
    assert len(set(shared.inverse.tolist())) == 3


def test_no_sharing_when_every_context_differs() -> None:
    ids, attention, response = _grpo_batch([[5, 6], [7, 8]], [[[1, 2]], [[3]]])
    assert find_shared_prefix(ids, attention, response) is None


def test_pad_id_equal_to_a_real_token_does_not_merge_contexts() -> None:
    # Row 0's prompt is [PAD-valued real token, 9]; row 1's is [9] left-padded with PAD: same ids, other mask.
    ids, attention, response = _grpo_batch([[PAD, 9], [9]], [[[1], [2]], [[1], [2]]])
    assert ids[0, :2].tolist() == ids[2, :2].tolist()
    shared = find_shared_prefix(ids, attention, response)
    assert shared is not None and shared.unique_rows.numel() == 2


def test_shared_forward_matches_plain_values_and_gradients() -> None:
    model = _model()
    plain_logp, plain_entropy, plain_grads = _logp_and_grads(model, share=False)
    shared_logp, shared_entropy, shared_grads = _logp_and_grads(model, share=True)
    torch.testing.assert_close(shared_logp, plain_logp, rtol=0, atol=1e-10)
    torch.testing.assert_close(shared_entropy, plain_entropy, rtol=0, atol=1e-10)
    # Llama's RMSNorm computes in float32 even in a float64 model, and the shared pass sums the rows'
    # context gradients before that norm's backward instead of after it: agreement is float32-level.
    assert len(shared_grads) == len(plain_grads)
    assert plain_grads
    for shared, plain in zip(shared_grads, plain_grads, strict=True):
        assert float((shared - plain).norm()) <= 1e-6 * max(float(plain.norm()), 1e-3)
    assert any(float(g.abs().max()) > 1e-3 for g in plain_grads)  # the check is not vacuous


def test_shared_forward_in_no_grad_mode_matches() -> None:
    model = _model()
    ids, attention, response = _batch()
    with torch.no_grad():
        plain, _, _ = policy_forward(model, ids, attention, token_mask=response, share_prompt=False)
        shared, _, _ = policy_forward(model, ids, attention, token_mask=response, share_prompt=True)
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-10)
    assert bool((plain != 0).any())


def test_separate_critic_shares_the_context_too() -> None:
    from execrl.trainer.logprobs import Critic

    ids, attention, response = _batch()
    critic = Critic(_model(), hidden_size=32).double()
    with torch.no_grad():
        plain = critic(ids, attention)
        shared = critic(ids, attention, shared_context_of=response)
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-10)
    assert bool((plain[:, 1:] != 0).any())


def test_activation_checkpointing_falls_back_to_the_plain_pass() -> None:
    # Hugging Face layers drop the KV cache under activation checkpointing; sharing must not be attempted.
    model = _model()
    plain_logp, _, plain_grads = _logp_and_grads(model, share=False)
    model.gradient_checkpointing_enable()
    shared_logp, _, shared_grads = _logp_and_grads(model, share=True)
    torch.testing.assert_close(shared_logp, plain_logp, rtol=0, atol=1e-10)
    for shared, plain in zip(shared_grads, plain_grads, strict=True):
        assert float((shared - plain).norm()) <= 1e-6 * max(float(plain.norm()), 1e-3)


def test_shared_forward_gradients_are_bit_reproducible_on_two_threads() -> None:
    """The rows' gradients summed into their shared context must add up in one fixed order. Indexing the
    context out with ``hidden[inverse]`` did not: its CPU backward (``index_put_`` with accumulate) splits the
    rows between threads and adds with atomics, so a context whose rows fall on both threads' sides summed in
    whichever order the threads ran, and two identical runs differed in the last bits (the prompt-cap
    SIGKILL-resume test's straight run differed from itself about one time in three)."""
    # 16 samples of one 64-token prompt, hidden 32: 32768 context elements, the size from which torch
    # parallelises that kernel; the context's rows lie on both threads' halves (rows 0-7 and 8-15).
    prompts = [[3 + i * 7 % 50 for i in range(64)]]
    completions = [[[5 + r % 9, 6 + r % 5] for r in range(16)]]
    ids, attention, response = _grpo_batch(prompts, completions)
    model = tiny_model(vocab_size=64, hidden_size=32, init_std=0.3)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        digests = set()
        for _ in range(12):
            model.zero_grad(set_to_none=True)
            logp, _, _ = policy_forward(model, ids, attention, token_mask=response, share_prompt=True)
            (logp * torch.linspace(-1.0, 1.0, ids.numel()).view(ids.shape)).sum().backward()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            digests.add(hashlib.sha1(b"".join(g.numpy().tobytes() for g in grads)).hexdigest())
    finally:
        torch.set_num_threads(threads)
    shared = find_shared_prefix(ids, attention, response)
    assert shared is not None and shared.inverse.tolist() == [0] * 16  # the layout meant
    assert len(digests) == 1, f"{len(digests)} different gradients in 12 identical passes"
