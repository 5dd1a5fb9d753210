"""The rollout loop's backend on the Ray executor: ``LocalBackend``'s engine calls, sent to rollout actors.

``RayBackend`` is the local backend (token space: the same prompt rendering, turn and message appending,
budgets) with one difference: where ``LocalBackend.wait`` runs ONE engine call over the queued requests
whose sampling parameters equal the first one's, ``RayBackend.wait`` groups the queue the same way, sends
every such call to a rollout actor at once (``RolloutCalls.start``), and returns the oldest call's rows.
The calls are the in-process run's calls (same prompts, same parameters, same seed: the loop's lock-step
turns share a seed, a streamed group has its own), taken in the same order, so a run samples the same on
either executor; several calls in flight (streamed groups) spread over the rollout actors.

Where a call runs (``RolloutCalls``): a call whose episodes an earlier call of this rollout already served
goes to that actor, so a multi-turn episode's turns stay on one actor and its prefix cache (the session
``LocalBackend.session`` opens in process, ``RolloutWorker``'s ``TurnSession`` here) serves them; others go
round robin. A dead or hung actor is replaced and the call retried on the next one (an engine call is
stateless; there the cache is cold, which costs prefill and may move log-probs by float rounding, never
the sampled-turn semantics). Each call loads the weight version ``versions.py`` chooses before it runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from execrl.distributed.ray_actors import Attempt
from execrl.distributed.ray_workers import TurnSession
from execrl.episodes import LocalBackend
from execrl.episodes.backend import completions_of
from execrl.episodes.types import TurnRequest, TurnResult

if TYPE_CHECKING:
    from execrl.distributed.faults import StepLog
    from execrl.distributed.ray_actors import ActorGroup
    from execrl.distributed.versions import WeightVersions
    from execrl.rollout.types import RolloutBatch, SamplingParams

__all__ = ["RayBackend", "RolloutCalls"]


@dataclass
class _Flight:
    """An engine call sent to a rollout actor, waiting to be collected."""

    requests: list[TurnRequest]
    prompts: list[list[int]]
    params: SamplingParams
    session: TurnSession | None
    attempt: Attempt


@dataclass
class RolloutCalls:
    """One rollout call's engine calls on the rollout actors, for step ``step`` (weights: the newest
    published version inside the staleness bound, or ``pinned``)."""

    rollout: ActorGroup
    versions: WeightVersions
    log: StepLog
    step: int
    pinned: int | None = None
    home: dict[int, int] = field(default_factory=dict)  # episode -> the actor slot that served it last

    def start(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        *,
        episodes: Sequence[int],
        session: TurnSession | None,
    ) -> Attempt:
        """Send the call: to the actor that served one of ``episodes`` before, else round robin."""
        slot = next((self.home[e] for e in episodes if e in self.home), None)
        attempt = self.rollout.start(lambda index: self._submit(index, prompts, params, session), slot)
        self.home.update(dict.fromkeys(episodes, attempt.index))
        return attempt

    def finish(self, flight: _Flight) -> RolloutBatch:
        """The call's rollout (retried on another actor if this one died or hung)."""
        what = f"engine call (step {self.step}, {len(flight.prompts)} prompts)"
        batch, used = self.rollout.call(
            what, lambda index: self._submit(index, flight.prompts, flight.params, flight.session),
            counters=self.log.counters, first=flight.attempt,
        )  # fmt: skip
        self.log.versions_used.append(used)
        self.log.staleness.append(self.step - used)
        return batch  # type: ignore[no-any-return]

    def generate(self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
        """The ``Engine`` interface: one call, outside any session."""
        prompts = [list(p) for p in prompt_token_ids]
        attempt = self.start(prompts, params, episodes=(), session=None)
        return self.finish(_Flight([], prompts, params, None, attempt))

    def end_session(self, session: TurnSession) -> None:
        """Free the session's keys/values on every actor (sent after its calls: actors run in order)."""
        for actor in list(self.rollout.actors):
            actor.end_session.remote(session.id)

    def _submit(
        self, index: int, prompts: list[list[int]], params: SamplingParams, session: TurnSession | None
    ) -> Any:
        """Runs under the rollout group's lock (``ActorGroup.start``): the load goes out before the call."""
        actor = self.rollout.actors[index]
        choice = self.versions.choose(
            (index, self.rollout.generation[index]), step=self.step, pinned=self.pinned
        )
        if choice.load is not None:
            actor.load_weights.remote(choice.version, choice.load)  # actor calls run in submission order
            self.log.weight_pushes += 1
        return actor.generate.remote(prompts, params, choice.floor, session)


class RayBackend(LocalBackend):
    """The local backend whose engine calls run on rollout actors (module docstring)."""

    def __init__(self, calls: RolloutCalls, tokenizer: Any, *, reuse_kv_max_bytes: int) -> None:
        super().__init__(calls, tokenizer, reuse_kv_max_bytes=reuse_kv_max_bytes)
        self.calls = calls
        self._waiting: list[TurnRequest] = []
        self._flying: list[_Flight] = []
        self._session: TurnSession | None = None

    def submit(self, request: TurnRequest) -> None:
        self._waiting.append(request)

    def wait(self) -> list[TurnResult]:
        """Send every queued call (``LocalBackend.wait``'s grouping, repeated), then collect the oldest."""
        while self._waiting:
            params = self._waiting[0].params
            chosen = [r for r in self._waiting if r.params == params]
            self._waiting = [r for r in self._waiting if r.params != params]
            prompts = [list(r.context.token_ids) for r in chosen]
            episodes = [e for r in chosen for e in range(r.key, r.key + r.params.samples_per_prompt)]
            attempt = self.calls.start(prompts, params, episodes=episodes, session=self._session)
            self._flying.append(_Flight(chosen, prompts, params, self._session, attempt))
        if not self._flying:
            return []
        flight = self._flying.pop(0)
        rows = completions_of(
            self.calls.finish(flight), self.tokenizer, [r.max_new_tokens for r in flight.requests]
        )
        return [TurnResult(r.key, c) for r, c in zip(flight.requests, rows, strict=True)]

    @contextmanager
    def session(self, max_turns: int) -> Iterator[None]:
        """The rollout call's session on the actors that serve it (``LocalBackend.session`` there)."""
        if max_turns < 2:  # one turn: nothing to reuse, as in process
            yield
            return
        self._session = TurnSession(uuid.uuid4().hex, max_turns, self.reuse_kv_max_bytes)
        try:
            yield
        finally:
            self.calls.end_session(self._session)
            self._session = None
