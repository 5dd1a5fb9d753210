"""``SharedFirstTurns``: a backend wrapper that gives every condition of ``execrl refine`` the same first
attempts, and turns in lock step.

Shared first attempts: the conditions (own feedback, random feedback, resampling) must differ only after
the first attempt, or the paired comparison mixes the model's first-turn luck into every delta. The first
request of each episode in a rollout call is sampled once (the first condition, ``refine``) and the result
is recorded under the request's key; in a later call the first request of the same key with the same
context gets the recorded turn back without calling the model. Later turns always go to the model (a
resampled turn asks the same context again, but it is not the episode's first request of that call).

Lock step: ``wait`` returns every request in flight together, so the environment answers all of a turn's
episodes in one call, as the old refine loop did. Random feedback deranges the feedback among the episodes
answered together; an endpoint that returned requests one by one would shrink that set (and make it
depend on timing).

KV reuse across conditions: the wrapper never opens the wrapped backend's ``session``; the caller opens one
around all conditions (``evaluate.py``), so with the local engine the prefix cache lives across them and a
control's turn 2 reuses the shared prompt and first attempt, as the old backend-lifetime cache did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from execrl.episodes.backend import Backend
    from execrl.episodes.types import Completion, Context, Message, Prompt, TurnRequest, TurnResult

__all__ = ["SharedFirstTurns"]


class SharedFirstTurns:
    """``backend`` with shared first turns and lock-step waits (module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self.inner = backend
        self.tokenizer: Any = getattr(backend, "tokenizer", None)  # the refine environment's feedback counts
        self.first_turns_s = 0.0  # time spent sampling the recorded first turns
        self.replayed = 0  # first turns answered from the record
        self._recorded: dict[int, tuple[Context, tuple[Completion, ...]]] = {}
        self._asked: set[int] = set()  # keys with a request in this rollout call
        self._recording: dict[int, Context] = {}  # first requests sent to the model, by key
        self._ready: list[TurnResult] = []

    def open(self, prompt: Prompt) -> Context:
        return self.inner.open(prompt)

    def renders_tools(self, declarations: Sequence[Mapping[str, Any]]) -> bool:
        return self.inner.renders_tools(declarations)

    def submit(self, request: TurnRequest) -> None:
        from execrl.episodes.types import TurnResult

        first = request.key not in self._asked
        self._asked.add(request.key)
        kept = self._recorded.get(request.key) if first else None
        if (
            kept is not None
            and kept[0] == request.context
            and len(kept[1]) == request.params.samples_per_prompt
        ):
            self._ready.append(TurnResult(request.key, kept[1]))
            self.replayed += 1
            return
        if first:
            self._recording[request.key] = request.context
        self.inner.submit(request)

    def wait(self) -> list[TurnResult]:
        """Every request in flight (replayed ones included), in key order; ``[]`` when none is."""
        out, self._ready = self._ready, []
        started = time.perf_counter()
        recording = bool(self._recording)
        while results := self.inner.wait():
            out += results
        if recording:
            self.first_turns_s += time.perf_counter() - started
        for result in out:
            context = self._recording.pop(result.key, None)
            if context is not None:
                self._recorded[result.key] = (context, result.completions)
        return sorted(out, key=lambda r: r.key)

    def append_turn(self, context: Context, completion: Completion) -> Context:
        return self.inner.append_turn(context, completion)

    def append_messages(
        self,
        context: Context,
        messages: Sequence[Message],
        *,
        content_caps: Sequence[int | None],
        wrappers: Sequence[tuple[str, str] | None],
        budget_left: int | None,
    ) -> tuple[Context, int] | None:
        return self.inner.append_messages(
            context, messages, content_caps=content_caps, wrappers=wrappers, budget_left=budget_left
        )

    def tokens_used(self, context: Context) -> int | None:
        return self.inner.tokens_used(context)

    @contextmanager
    def session(self, max_turns: int) -> Iterator[None]:
        """One rollout call: its first requests are the episodes' first turns (the wrapped backend's own
        session is the caller's, around all calls)."""
        self._asked = set()
        yield
