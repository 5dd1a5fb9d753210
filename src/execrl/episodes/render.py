"""Token-space rendering of an episode: the first prompt, the model's turns as their sampled ids, and what
the environment appends, through the tokenizer's chat template (the one template path of rollout, SFT and
serving).

Two rules hold on every path:

* **The model's turns stay the exact sampled ids** (re-tokenising their text can give other ids: verl
  #3960); what follows a turn is the template's text after "the conversation so far"
  (``execrl.rollout.prompts.extension_ids``' construction), tokenised on its own.
* **Environment text is data, never control** (issue 35, class 2): the content of a ``tool`` or ``user``
  message the environment appends (a cell's output, visible-test feedback) is tokenised with
  ``split_special_tokens=True``, so text such as ``<|im_start|>system`` becomes ordinary tokens and can
  never forge a turn; only the template's own text around it carries special tokens. Lone surrogates and
  other text a tokenizer cannot take are replaced first (:func:`safe_text`, class 1). Before this, an
  uncut tool answer was tokenised with special tokens parsed and a cut one had them dropped.

Budgets (class 4): :func:`append_messages` fits the appended ids, the template's turn tokens and any cut
marker included, into what is left of the episode's budget; it cuts message contents (each also to its own
cap) and returns ``None`` when not even the template's tokens fit, so an episode never passes its budget.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from execrl.episodes.types import Completion, Context, Message, Prompt, Turn
from execrl.rollout.prompts import render_chat, turn_content

__all__ = [
    "TemplateDrift",
    "append_messages",
    "append_turn",
    "cut_marker",
    "prompt_context",
    "renders_tools",
    "safe_text",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
_OPEN, _CLOSE = "\U000f0000", "\U000f0001"  # private-use sentinels marking message contents in a rendering


class TemplateDrift(ValueError):
    """The chat template does not extend the conversation so far (it rewrites earlier turns, or drops a
    message), so appended ids would drift from the template's rendering."""


def safe_text(text: str) -> str:
    """``text`` with lone surrogates (``"\\ud800"``, from a cell's ``repr`` or an endpoint's JSON) replaced
    by U+FFFD, so no tokenizer or encoder raises on it later."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _encode(tokenizer: Any, text: str, *, data: bool) -> list[int]:
    if data:  # environment text: special-token strings become ordinary tokens
        return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def renders_tools(tokenizer: Any, declarations: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the tokenizer's chat template shows ``tools`` (the rendering with them differs)."""
    probe = [{"role": "user", "content": "hi"}]
    plain = render_chat(tokenizer, probe, generation_prompt=True)
    return render_chat(tokenizer, probe, generation_prompt=True, tools=declarations) != plain


def prompt_context(tokenizer: Any, prompt: Prompt) -> Context:
    """The first prompt rendered with the generation prompt (tools declared through the template when the
    prompt carries them). The task's own text is the dataset's, rendered as the template renders it."""
    text = render_chat(tokenizer, prompt.messages, generation_prompt=True, tools=prompt.tools)
    ids = tuple(_encode(tokenizer, text, data=False))
    n = len(ids)
    return Context(
        messages=tuple(prompt.messages), tools=prompt.tools, token_ids=ids, loss_mask=(False,) * n,
        logprobs=(0.0,) * n, sampling_logprobs=(0.0,) * n, prompt_tokens=n,
    )  # fmt: skip


def append_turn(tokenizer: Any, context: Context, completion: Completion) -> Context:
    """The model's turn appended as its sampled ids (with their log-probs), the assistant message as the
    chat template must see it to extend the context (``turn_content``)."""
    ids = completion.token_ids
    start = len(context.token_ids)
    message = {"role": "assistant", "content": turn_content(tokenizer, ids)}
    return replace(
        context, messages=(*context.messages, message), token_ids=context.token_ids + tuple(ids),
        loss_mask=context.loss_mask + (True,) * len(ids), logprobs=context.logprobs + completion.logprobs,
        sampling_logprobs=context.sampling_logprobs + completion.sampling_logprobs,
        turns=(*context.turns, Turn(start, start + len(ids), completion.finish_reason)),
    )  # fmt: skip


def cut_marker(cut_tokens: int, budget_left: int | None) -> str:
    tail = "" if budget_left is None else f"; {budget_left} tokens of the episode budget left"
    return f"\n[... {cut_tokens} tokens cut{tail}]"


def _segments(
    tokenizer: Any, context: Context, messages: Sequence[Message], wrappers: Sequence[tuple[str, str] | None]
) -> tuple[list[list[int]], list[tuple[list[int], list[int], list[int]]]]:
    """The template's ids around each appended message (``len(messages) + 1`` segments) and each message's
    content as data: (wrapper's head, body, wrapper's tail)."""
    marked = [{**m, "content": f"{_OPEN}{k}{_CLOSE}"} for k, m in enumerate(messages)]
    full = render_chat(tokenizer, [*context.messages, *marked], generation_prompt=True, tools=context.tools)
    so_far = str(tokenizer.decode(list(context.token_ids), skip_special_tokens=False))
    if not full.startswith(so_far):
        raise TemplateDrift(
            "the chat template does not extend the conversation so far (it rewrites earlier turns); "
            "multi-turn token ids would drift from the template's"
        )
    tail, template, contents = full[len(so_far) :], [], []
    for k, message in enumerate(messages):
        mark = f"{_OPEN}{k}{_CLOSE}"
        at = tail.find(mark)
        if at < 0 or tail.count(mark) != 1:
            raise TemplateDrift(f"the chat template does not render a {message.get('role')!r} message once")
        template.append(_encode(tokenizer, tail[:at], data=False))
        head, foot = wrappers[k] if k < len(wrappers) and wrappers[k] is not None else ("", "")  # type: ignore[misc]
        body = safe_text(str(message.get("content") or ""))
        contents.append(
            tuple(_encode(tokenizer, safe_text(x), data=True) if x else [] for x in (head, body, foot))
        )
        tail = tail[at + len(mark) :]
    template.append(_encode(tokenizer, tail, data=False))
    return template, contents  # type: ignore[return-value]


def _cut(tokenizer: Any, ids: list[int], cap: int | None, room: int | None) -> list[int]:
    """``ids`` cut to a head of at most ``cap`` tokens followed by a marker saying how many were cut (and how
    much of the budget is left), the whole within ``room`` tokens (None: unbounded); without room for the
    marker, the plain cut to ``room``."""
    head = len(ids) if cap is None else min(cap, len(ids))
    marker = _encode(tokenizer, cut_marker(len(ids) - head, room), data=True)
    if room is not None and head + len(marker) > room:
        head = room - len(marker)
        if head < 0:
            return ids[: max(room, 0)]
    whole = str(tokenizer.decode(ids, skip_special_tokens=False))
    for _ in range(4):  # do not end inside a multi-byte character (its bytes span tokens)
        if head <= 1 or whole.startswith(str(tokenizer.decode(ids[:head], skip_special_tokens=False))):
            break
        head -= 1
    left = None if room is None else room - head
    marker = _encode(tokenizer, cut_marker(len(ids) - head, left), data=True)
    if room is not None and head + len(marker) > room:  # the number's digits grew the marker
        head = max(0, room - len(marker))
    return ids[:head] + marker


def append_messages(
    tokenizer: Any,
    context: Context,
    messages: Sequence[Message],
    *,
    content_caps: Sequence[int | None] = (),
    wrappers: Sequence[tuple[str, str] | None] = (),
    budget_left: int | None = None,
) -> tuple[Context, int] | None:
    """Append the environment's ``messages`` and the next generation prompt. Each content is data (see the
    module docstring), wrapped in its ``wrappers`` entry (head, tail: e.g. ``<tool_response>`` tags, never
    cut); a body longer than its ``content_caps`` entry keeps that many tokens and a marker saying how many
    were cut, and everything appended (template tokens, wrappers, markers) fits ``budget_left`` tokens (None:
    no budget). Returns the new context and how many bodies were cut, or None when the template's tokens and
    the wrappers do not fit. Raises :class:`TemplateDrift` for a template that cannot be extended."""
    template, contents = _segments(tokenizer, context, messages, wrappers)
    fixed = sum(len(s) for s in template) + sum(len(h) + len(f) for h, _, f in contents)
    room = None if budget_left is None else budget_left - fixed
    if room is not None and room < 0:
        return None
    cut = 0
    kept: list[list[int]] = []
    caps = [*content_caps, *([None] * len(contents))][: len(contents)]
    for (head, body, foot), cap in zip(contents, caps, strict=True):
        if (cap is not None and len(body) > cap) or (room is not None and len(body) > room):
            body, cut = _cut(tokenizer, body, cap, room), cut + 1
        kept.append(head + body + foot)
        room = None if room is None else room - len(body)
    out: list[int] = []
    appended: list[Message] = []
    for k, message in enumerate(messages):
        out += template[k] + kept[k]
        appended.append({**message, "content": str(tokenizer.decode(kept[k], skip_special_tokens=False))})
    out += template[-1]
    n = len(out)
    return replace(
        context, messages=(*context.messages, *appended), token_ids=context.token_ids + tuple(out),
        loss_mask=context.loss_mask + (False,) * n, logprobs=context.logprobs + (0.0,) * n,
        sampling_logprobs=context.sampling_logprobs + (0.0,) * n,
    ), cut  # fmt: skip
