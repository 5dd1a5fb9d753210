"""LocalBackend with KV reuse across turns answers exactly as without it, and prefills less from turn 2 on."""

from __future__ import annotations

from execrl.refine.backends import GenerationParams, LocalBackend
from execrl.rollout import HFEngine
from execrl.rollout.models import default_tokenizer, tiny_model

FEEDBACK = ["Your code failed: expected 3, got 2.", "Still failing: NameError: name 'x' is not defined"]


def _three_turns(backend: LocalBackend) -> tuple[list[list[str]], list[int]]:
    conversations = [
        [{"role": "user", "content": "Write add(a, b)."}],
        [{"role": "user", "content": "Write a function that reverses a string, with a docstring."}],
    ]
    params = GenerationParams(max_new_tokens=6, temperature=0.0)
    texts: list[list[str]] = [[], []]
    reused: list[int] = []
    engine = backend.engine
    for turn in range(3):
        cache = getattr(engine, "prefix_cache", None)
        before = cache.reused_tokens if cache is not None else 0
        replies = backend.complete(conversations, params)
        reused.append((cache.reused_tokens - before) if cache is not None else 0)
        for i, reply in enumerate(replies):
            texts[i].append(reply.text)
            conversations[i].append({"role": "assistant", "content": reply.text})
            if turn < 2:
                conversations[i].append({"role": "user", "content": FEEDBACK[turn]})
    return texts, reused


def test_local_backend_reuse_gives_the_same_replies_and_reuses_earlier_turns() -> None:
    model, tokenizer = tiny_model(seed=0, init_std=0.5), default_tokenizer()
    plain = LocalBackend(HFEngine(model, tokenizer), tokenizer, name="plain", reuse_kv_max_bytes=0)
    cached = LocalBackend(HFEngine(model, tokenizer), tokenizer, name="cached")
    assert plain.engine.prefix_cache is None  # type: ignore[attr-defined]
    texts_plain, reused_plain = _three_turns(plain)
    texts_cached, reused_cached = _three_turns(cached)
    assert texts_cached == texts_plain
    assert reused_plain == [0, 0, 0]
    # Turn 1: nothing stored yet (a call's entries are stored when it ends). Turn 2 reuses at least each
    # first prompt (re-rendered by the template as a prefix of the second), turn 3 more.
    prompt_tokens = [len(c) for c in _encoded(tokenizer)]
    assert reused_cached[0] == 0
    assert reused_cached[1] >= sum(prompt_tokens) and reused_cached[2] > reused_cached[1]


def _encoded(tokenizer: object) -> list[list[int]]:
    from execrl.rollout.prompts import encode_prompts

    return encode_prompts(
        tokenizer,  # type: ignore[arg-type]
        ["Write add(a, b).", "Write a function that reverses a string, with a docstring."],
    )
