"""``refine``: the execution-feedback environment (RLEF: Gehring et al. 2024, arXiv 2410.02089), for multi-turn
RL (``refine.max_turns > 1``) and for ``execrl refine``'s evaluation of self-repair.

Each model turn's program runs the task's **visible** tests in the sandbox; a failed turn gets their
feedback as the next user message (``feedback.py``: special tokens removed, bounded in tokens), a passing
one (or the last allowed) ends the episode. A task is refinable when it is not a ``code`` task or has
visible tests; others stop after one turn. The reward is the final program's score on the **hidden**
tests, minus ``invalid_turn_penalty`` for every turn without valid code (no code, syntax or compile
error). Hidden tests never enter a message.

Evaluation (``record_attempts``): every attempt is also scored on the hidden tests, for the per-round
report ("had we stopped at round r"), and kept as an ``Attempt`` (``info["attempts"]``); that score never
enters a message or a decision. Conditions: ``refine`` (own feedback), ``random_feedback`` (another
problem's feedback of the same turn, a derangement: does the model use the content at all?) and
``resample`` (a fresh sample of the original prompt while the visible tests fail, whose final program is
the best on the visible tests: the matched-budget baseline of Olausson et al. 2024). ``history="last"``
keeps only the latest attempt in context (Reflexion). ``resample`` and ``history="last"`` restart the
context, so their episodes are for evaluation, not training.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from execrl.episodes.environment import Final
from execrl.episodes.single import first_messages, verdict_of
from execrl.episodes.types import Episode, Message, Prompt, Response, TurnView, Verdict
from execrl.refine.feedback import FeedbackFormat, render_feedback
from execrl.refine.runs import Attempt, best_visible_index
from execrl.rewards import RewardConfig, Score, extract_code, score_batch
from execrl.tasks.schema import CodeSpec, Task

if TYPE_CHECKING:
    from execrl.config import TrainConfig
    from execrl.episodes.backend import Backend
    from execrl.rewards.batch import SyncRunner

__all__ = ["INVALID_CODE", "Attempt", "MultiTurnConfig", "RefineEnvironment", "best_visible_index"]

INVALID_CODE = frozenset({"no_code_found", "syntax_error", "compile_error"})
Condition = Literal["refine", "random_feedback", "resample"]


@dataclass(frozen=True)
class MultiTurnConfig:
    max_turns: int = 3
    feedback: FeedbackFormat = "details"
    invalid_turn_penalty: float = 0.0  # subtracted per turn without valid code
    reward: RewardConfig = field(default_factory=RewardConfig)
    reuse_kv_max_bytes: int = 2 << 30  # keys/values kept between turns; 0 re-prefills every turn
    max_failures_shown: int = 3
    max_feedback_chars: int = 300  # per field (input, got, an error message, a test name)
    max_feedback_tokens: int = 512  # the whole feedback before the instruction (feedback.py)

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if not 0 <= self.invalid_turn_penalty <= 1:
            raise ValueError(f"invalid_turn_penalty must lie in [0, 1], got {self.invalid_turn_penalty}")
        if self.reuse_kv_max_bytes < 0:
            raise ValueError(f"reuse_kv_max_bytes must be >= 0, got {self.reuse_kv_max_bytes}")
        if self.max_failures_shown < 1 or self.max_feedback_chars < 20 or self.max_feedback_tokens < 16:
            raise ValueError(
                "max_failures_shown must be >= 1, max_feedback_chars >= 20 and max_feedback_tokens >= 16"
            )


@dataclass(frozen=True)
class RefineEnvironment:
    """Visible-test feedback between turns (module docstring)."""

    runner: SyncRunner
    config: MultiTurnConfig
    condition: Condition = "refine"
    history: Literal["full", "last"] = "full"
    record_attempts: bool = False
    seed: int = 0  # of the random-feedback derangement
    name: str = "refine"

    @classmethod
    def from_config(
        cls, config: TrainConfig, *, runner: SyncRunner, reward: RewardConfig
    ) -> RefineEnvironment:
        """Multi-turn RL's environment: ``[refine]`` by name (the feedback caps keep their defaults)."""
        from execrl.config import build

        multi = build(
            MultiTurnConfig, config.refine, reward=reward, defaults=(
                "reuse_kv_max_bytes", "max_failures_shown", "max_feedback_chars", "max_feedback_tokens"),
        )  # fmt: skip
        return cls(runner, multi)

    def start(self, tasks: Sequence[Task], samples_per_task: int, backend: Backend) -> _Live:
        return _Live(self, list(tasks), getattr(backend, "tokenizer", None), random.Random(self.seed + 17))

    def metrics(self, episodes: Sequence[Episode], *, step_s: float = 0.0) -> dict[str, float]:
        from execrl.refine.metrics import refine_metrics

        return refine_metrics(episodes)


def refinable(task: Task) -> bool:
    return task.domain != "code" or bool(task.visible_tests)


def _code(task: Task, completion: str) -> str | None:
    spec = task.spec
    language, entry = (spec.language, spec.entry_point) if isinstance(spec, CodeSpec) else ("python", None)
    found = extract_code(completion, language, entry)
    return found.code if found is not None and found.code.strip() else None


@dataclass
class _State:
    invalid_turns: int = 0
    visible_passed: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    messages: tuple[Message, ...] = ()  # the conversation the next attempt answers


@dataclass
class _Live:
    env: RefineEnvironment
    tasks: list[Task]
    tokenizer: Any
    rng: random.Random
    states: dict[int, _State] = field(default_factory=dict)

    @property
    def max_turns(self) -> int:
        return self.env.config.max_turns

    def prompt(self, task_index: int) -> Prompt:
        return Prompt(first_messages(self.tasks[task_index]))

    def _refinable(self, task: Task) -> bool:
        """Training refines any non-code task too; the evaluation gives feedback only where visible tests
        exist (a problem without them stops after its first attempt, in every condition alike)."""
        return bool(task.visible_tests) if self.env.record_attempts else refinable(task)

    def _scores(self, tasks: list[Task], texts: list[str], hidden: bool) -> list[Score]:
        config = replace(self.env.config.reward, use_hidden_tests=hidden)
        return score_batch(tasks, texts, sandbox=self.env.runner, config=config) if tasks else []

    def respond(self, turns: Sequence[TurnView]) -> list[Response]:
        """Score every new turn on the visible tests at once; failed ones get feedback, the rest stop."""
        ok = [v for v in turns if not v.error]
        scored = [v for v in ok if self._refinable(self.tasks[v.task_index])]
        visible = dict(zip((v.episode for v in scored), self._scores(
            [self.tasks[v.task_index] for v in scored], [v.text for v in scored], hidden=False), strict=True))  # fmt: skip
        hidden: dict[int, Score] = {}
        if self.env.record_attempts:
            hidden = dict(zip((v.episode for v in ok), self._scores(
                [self.tasks[v.task_index] for v in ok], [v.text for v in ok], hidden=True), strict=True))  # fmt: skip
        feedback = self._feedback([visible.get(v.episode) for v in turns])
        return [self._respond(v, visible.get(v.episode), hidden.get(v.episode), f)
                for v, f in zip(turns, feedback, strict=True)]  # fmt: skip

    def _feedback(self, scores: list[Score | None]) -> list[str]:
        config = self.env.config
        texts = [
            "" if s is None or s.passed else render_feedback(
                s, config.feedback, max_failures=config.max_failures_shown, max_chars=config.max_feedback_chars,
                max_tokens=config.max_feedback_tokens, tokenizer=self.tokenizer,
            )
            for s in scores
        ]  # fmt: skip
        if self.env.condition != "random_feedback":
            return texts
        failing = [i for i, t in enumerate(texts) if t]
        if len(failing) < 2:
            return texts  # nothing to swap with: counts as own feedback
        order = list(failing)
        self.rng.shuffle(order)
        shifted = {order[k]: order[(k + 1) % len(order)] for k in range(len(order))}
        return [texts[shifted[i]] if i in shifted else t for i, t in enumerate(texts)]

    def _respond(
        self, view: TurnView, visible: Score | None, hidden: Score | None, feedback: str
    ) -> Response:
        state = self.states.setdefault(view.episode, _State(messages=self.prompt(view.task_index).messages))
        task = self.tasks[view.task_index]
        done = view.turn >= self.max_turns or not self._refinable(task) or bool(view.error)
        if visible is not None:
            state.invalid_turns += visible.reason_code in INVALID_CODE
            state.visible_passed = visible.passed
            done = done or visible.passed
        if self.env.record_attempts:
            state.attempts.append(
                self._attempt(task, view, state, visible, hidden, None if done else feedback)
            )
        if done:
            return Response(done=True, stop="answer" if visible is None or visible.passed else "max_turns")
        message: Message = {"role": "user", "content": feedback}
        answered: tuple[Message, ...] = (*state.messages, {"role": "assistant", "content": view.text})
        if self.env.condition == "resample":
            return Response(False, restart_with=self.prompt(view.task_index).messages)
        if self.env.history == "last":
            state.messages = (*self.prompt(view.task_index).messages, answered[-1], message)
            return Response(False, restart_with=state.messages)
        state.messages = (*answered, message)
        return Response(False, messages=(message,))

    def _attempt(self, task: Task, view: TurnView, state: _State, visible: Score | None, hidden: Score | None,
                 feedback: str | None) -> Attempt:  # fmt: skip
        tests = visible.execution.tests if visible is not None and visible.execution is not None else ()
        reason = f"endpoint_error: {view.error}" if view.error else (
            visible.reason if visible is not None else "no_visible_tests")  # fmt: skip
        return Attempt(
            turn=view.turn, messages=tuple((str(m["role"]), str(m["content"])) for m in state.messages),
            completion=view.text, code=None if view.error else _code(task, view.text),
            visible_passed=bool(visible and visible.passed), visible_reason=reason,
            visible_fraction=visible.pass_fraction if visible is not None else 0.0,
            visible_tests=tuple((t.name, t.verdict.value) for t in tests),
            hidden_passed=bool(hidden and hidden.passed), prompt_tokens=view.prompt_tokens,
            completion_tokens=view.completion_tokens, feedback=feedback, error=view.error or None,
        )  # fmt: skip

    def judge(self, finals: Sequence[Final]) -> list[Verdict]:
        """The final program on the hidden tests (resampling: the attempt best on the visible tests), minus
        the invalid-turn penalty."""
        texts = []
        for f in finals:
            attempts = self.states.get(f.episode, _State()).attempts
            chosen = (
                attempts[best_visible_index(attempts)]
                if self.env.condition == "resample" and attempts
                else None
            )
            texts.append(chosen.completion if chosen is not None else f.text)
        hidden = self._scores([self.tasks[f.task_index] for f in finals], texts, hidden=True)
        out = []
        for f, score in zip(finals, hidden, strict=True):
            state = self.states.setdefault(f.episode, _State())
            invalid_now = score.reason_code in INVALID_CODE and not self._refinable(self.tasks[f.task_index])
            state.invalid_turns += invalid_now
            out.append(verdict_of(score, penalty=self.env.config.invalid_turn_penalty * state.invalid_turns))
        return out

    def close(self) -> None:
        """Nothing to release: the visible and hidden tests run in fresh jails."""

    def report(self) -> dict[int, dict[str, Any]]:
        return {
            e: {
                "invalid_turns": float(s.invalid_turns),
                "visible_passed": float(s.visible_passed),
                **({"attempts": tuple(s.attempts)} if self.env.record_attempts else {}),
            }
            for e, s in self.states.items()
        }
