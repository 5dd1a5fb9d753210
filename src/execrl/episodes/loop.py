"""The one rollout loop: an environment and a model backend in, episodes out.

    episodes = run_episodes(environment, backend, tasks, params=params, max_episode_tokens=1024)

Every recipe samples through this function (single-turn GRPO/PPO, refine RL, tool RL, their held-out
evaluations, one-step-off async, the Ray executor), and so do ``execrl refine`` and ``execrl tools run``
(with the HTTP backend). One call:

1. ``environment.start`` opens what the call needs; each task's first turn is ONE request for
   ``params.samples_per_prompt`` continuations (the group shares its prompt's keys/values);
2. each finished model turn is appended to its episode, the environment answers every turn the backend
   returned together (``respond``), its messages are appended within the episode's token budget, and the
   episode's next turn is submitted at once: with the local engine the live episodes of a turn form one
   engine call (lock-step), with an engine that takes requests one by one they are batched continuously;
3. when every episode is done, ``close`` releases the sessions and ``judge`` scores the final answers (with
   ``judge_early`` each batch of finished episodes is judged in a background thread while the others
   generate: the streamed scoring of ``rollout.stream_scoring``).

Seeds: turn t (0-based) of task i samples with ``seed_for(i, t)``; the default, ``params.seed + 7919 * t``,
gives every request of a lock-step turn the same seed, so a turn is one engine call and a run samples the
same wherever it runs (in process, on Ray, resumed). Budgets: a request asks for at most what is left of
``max_episode_tokens`` (tokens after the first prompt); environment messages are cut to fit it
(``render.append_messages``); an episode stops with ``episode_tokens`` when nothing is left.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from execrl.episodes.environment import Final, LiveEnvironment
from execrl.episodes.render import TemplateDrift
from execrl.episodes.types import (
    Completion,
    Context,
    Episode,
    Prompt,
    Response,
    TurnRequest,
    TurnView,
    Verdict,
)

if TYPE_CHECKING:
    from execrl.episodes.backend import Backend
    from execrl.episodes.environment import Environment
    from execrl.rollout.types import SamplingParams
    from execrl.tasks.schema import Task

__all__ = ["RolloutResult", "SeedRule", "run_episodes", "turn_seeds"]

log = logging.getLogger("execrl.episodes")
SeedRule = Callable[[int, int], int]  # (task index, turn index from 0) -> seed of that request
TURN_SEED_STRIDE = 7919


def turn_seeds(seed: int) -> SeedRule:
    """Every request of turn t samples with ``seed + 7919 * t`` (lock-step: one engine call per turn)."""
    return lambda _task, turn: seed + TURN_SEED_STRIDE * turn


@dataclass(frozen=True)
class RolloutResult:
    """One rollout call's episodes (task-major) and where its time went."""

    episodes: tuple[Episode, ...]
    rollout_s: float  # the whole call: generation, the environment's answers, the judge
    generate_s: float  # waiting on the backend (the local engine's sampling)

    @property
    def model_tokens(self) -> int:
        return sum(e.model_tokens for e in self.episodes)


@dataclass
class _Draft:
    """An episode while it runs (loop-internal; frozen into an ``Episode`` at the end)."""

    task_index: int
    sample: int
    context: Context
    turns: int = 0  # model turns taken (a restarted context keeps counting)
    info: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    stop: str = ""
    error: str = ""
    done: bool = False
    judged: bool = False

    def finish(self, stop: str, error: str = "") -> None:
        self.done, self.stop, self.error = True, stop, error or self.error

    def count(self, name: str, value: float) -> None:
        self.info[name] = self.info.get(name, 0.0) + value


@dataclass
class _Rollout:
    live: LiveEnvironment
    backend: Backend
    params: SamplingParams
    seed_for: SeedRule
    max_episode_tokens: int | None
    prompts: list[Prompt]
    starts: list[Context]
    drafts: list[_Draft | None]
    generate_s: float = 0.0

    def left(self, draft: _Draft) -> int | None:
        if self.max_episode_tokens is None:
            return None
        used = self.backend.tokens_used(draft.context)
        return None if used is None else self.max_episode_tokens - used

    def ask(
        self, key: int, task: int, context: Context, *, samples: int, turn: int, left: int | None
    ) -> None:
        params = dataclasses.replace(
            self.params, samples_per_prompt=samples, seed=self.seed_for(task, turn),
            stop_strings=(*self.params.stop_strings, *self.prompts[task].stop_strings),
        )  # fmt: skip
        cap = params.max_new_tokens if left is None else min(params.max_new_tokens, left)
        self.backend.submit(TurnRequest(key, context, params, cap))

    def take(self, key: int, completions: Sequence[Completion]) -> list[TurnView]:
        """Append each sampled turn to its episode; the views the environment answers."""
        views = []
        samples = self.params.samples_per_prompt
        for j, completion in enumerate(completions):
            e = key + j
            draft = self.drafts[e]
            if draft is None:
                draft = self.drafts[e] = _Draft(e // samples, e % samples, self.starts[e // samples])
            before = self.backend.tokens_used(draft.context) or 0
            prompt_tokens = completion.usage_prompt_tokens or len(draft.context.token_ids)
            draft.turns += 1
            if completion.error:
                draft.error = completion.error
            else:
                draft.context = self.backend.append_turn(draft.context, completion)
                draft.text = completion.text
            used = (self.backend.tokens_used(draft.context) or 0) - before
            views.append(TurnView(
                e, draft.task_index, draft.turns, completion.text, completion.finish_reason,
                completion.tool_calls, self.left(draft), completion.error, prompt_tokens,
                completion.usage_completion_tokens or len(completion.token_ids) or used,
            ))  # fmt: skip
        return views

    def answer(self, view: TurnView, response: Response) -> None:
        """Apply the environment's response; submit the episode's next turn unless it is done."""
        draft = self.drafts[view.episode]
        assert draft is not None
        for name, value in response.info.items():
            draft.count(name, value)
        if view.error:
            draft.finish("error")
            return
        if response.done:
            draft.finish(response.stop or "answer")
            return
        if response.restart_with is not None:
            prompt = dataclasses.replace(self.prompts[draft.task_index], messages=response.restart_with)
            draft.context = self.backend.open(prompt)
        elif response.messages and not self._append(draft, response):
            return
        left = self.left(draft)
        if draft.turns >= self.live.max_turns:
            draft.finish("max_turns")
        elif left is not None and left <= 0:
            draft.finish("episode_tokens")
        else:
            self.ask(view.episode, draft.task_index, draft.context, samples=1, turn=draft.turns, left=left)

    def _append(self, draft: _Draft, response: Response) -> bool:
        try:
            appended = self.backend.append_messages(
                draft.context, response.messages, content_caps=response.content_token_caps,
                wrappers=response.content_wrappers, budget_left=self.left(draft),
            )  # fmt: skip
        except TemplateDrift as exc:  # a turn the template renders otherwise: this episode only
            draft.count("template_drift", 1.0)
            draft.finish("error", str(exc))
            return False
        if appended is None:
            draft.finish("episode_tokens")
            return False
        draft.context, cut = appended
        draft.count("truncated_outputs", float(cut))
        return True


def run_episodes(
    environment: Environment,
    backend: Backend,
    tasks: Sequence[Task],
    *,
    params: SamplingParams,
    max_episode_tokens: int | None = None,
    seed_for: SeedRule | None = None,
    judge_early: bool = False,
) -> RolloutResult:
    """``params.samples_per_prompt`` episodes per task (task-major), each judged (module docstring)."""
    started = time.perf_counter()
    samples = params.samples_per_prompt
    live = environment.start(tasks, samples, backend)
    try:
        prompts = [live.prompt(i) for i in range(len(tasks))]
        rollout = _Rollout(
            live, backend, params, seed_for or turn_seeds(params.seed), max_episode_tokens, prompts,
            [backend.open(p) for p in prompts], [None] * (len(tasks) * samples),
        )  # fmt: skip
        with (
            backend.session(live.max_turns),
            ThreadPoolExecutor(1, thread_name_prefix="execrl-judge") as pool,
        ):
            early = _drive(rollout, pool if judge_early else None)
        drafts = _complete(rollout.drafts)
    finally:
        live.close()
    verdicts = dict(v for future in early for v in future.result())
    verdicts.update(_judge(live, [(e, d) for e, d in enumerate(drafts) if e not in verdicts]))
    extra = live.report()
    for draft in drafts:
        draft.info["tokens_used"] = float(backend.tokens_used(draft.context) or 0)
    episodes = tuple(_episode(d, tasks, verdicts[e], extra.get(e, {})) for e, d in enumerate(drafts))
    return RolloutResult(episodes, time.perf_counter() - started, rollout.generate_s)


def _drive(rollout: _Rollout, judges: ThreadPoolExecutor | None) -> list[Future[list[tuple[int, Verdict]]]]:
    """Every task's first turn, then turns until the backend has nothing left; with ``judges``, each batch's
    finished episodes are judged in that thread meanwhile."""
    samples = rollout.params.samples_per_prompt
    for i, context in enumerate(rollout.starts):
        rollout.ask(i * samples, i, context, samples=samples, turn=0, left=rollout.max_episode_tokens)
    early = []
    while True:
        waited = time.perf_counter()
        results = rollout.backend.wait()
        rollout.generate_s += time.perf_counter() - waited
        if not results:
            break
        views = [v for r in results for v in rollout.take(r.key, r.completions)]
        for view, response in zip(views, rollout.live.respond(views) if views else [], strict=True):
            rollout.answer(view, response)
        if judges is not None:
            touched = {e for r in results for e in range(r.key, r.key + len(r.completions))}
            early.append(judges.submit(_judge, rollout.live, _finished(rollout, touched)))
    return early


def _complete(drafts: Sequence[_Draft | None]) -> list[_Draft]:
    missing = [e for e, d in enumerate(drafts) if d is None or not d.done]
    if missing:
        raise RuntimeError(f"the backend returned no turn for episodes {missing[:5]}")
    return [d for d in drafts if d is not None]


def _finished(rollout: _Rollout, touched: set[int]) -> list[tuple[int, _Draft]]:
    """Episodes that became done in this batch (judged early, once)."""
    out = []
    for e in sorted(touched):
        draft = rollout.drafts[e]
        if draft is not None and draft.done and not draft.judged:
            draft.judged = True
            out.append((e, draft))
    return out


def _judge(live: LiveEnvironment, drafts: Sequence[tuple[int, _Draft]]) -> list[tuple[int, Verdict]]:
    """Verdicts of finished episodes; one that ended in a backend error has no answer to judge: invalid."""
    errors = [(e, Verdict(0.0, False, False, "backend_error")) for e, d in drafts if d.stop == "error"]
    judged = [(e, d) for e, d in drafts if d.stop != "error"]
    finals = [Final(e, d.task_index, d.text, d.stop, dict(d.info)) for e, d in judged]
    verdicts = live.judge(finals) if finals else []
    return errors + [(e, v) for (e, _), v in zip(judged, verdicts, strict=True)]


def _episode(draft: _Draft, tasks: Sequence[Task], verdict: Verdict, extra: dict[str, Any]) -> Episode:
    context = draft.context
    return Episode(
        task_index=draft.task_index, task_id=tasks[draft.task_index].id, sample=draft.sample,
        token_ids=context.token_ids, loss_mask=context.loss_mask, logprobs=context.logprobs,
        sampling_logprobs=context.sampling_logprobs, prompt_tokens=context.prompt_tokens,
        turns=context.turns, messages=context.messages, text=draft.text, stop=draft.stop,
        verdict=verdict, info={**draft.info, **extra}, error=draft.error,
    )  # fmt: skip
