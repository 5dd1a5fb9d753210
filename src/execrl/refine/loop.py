"""Execute and refine: generate -> run the visible tests -> feedback -> regenerate, up to ``rounds`` turns.

One problem's conversation is ``[task prompt, attempt 1, feedback 1, attempt 2, ...]`` (RLEF keeps every
earlier attempt in context; ``history="last"`` keeps only the latest, as Reflexion does). A problem stops
as soon as its visible tests pass, or after ``rounds`` generations; its final program is the last attempt.
Problems run together: each turn is one backend call over every still-active problem and one sandbox
batch. Problems with no visible tests get no feedback and stop after the first attempt (15 of HumanEval's
164 have no docstring example; they count in every condition alike).

A conversation the backend cannot answer (``Reply.error``: a context-length 400, a dead endpoint) is an
attempt with ``error`` set that failed everything; that problem stops, the others go on.

Hidden tests never enter a prompt: feedback is rendered from a visible-test score only. Every attempt is
*also* scored on the hidden tests, for the per-round report ("had we stopped at round r"), and that score
goes to the trace and the report, never into a message or a decision of the loop.

Conditions (``execrl refine`` runs all three on the same shared first attempts; see ``evaluate.py``):
``own`` feedback; ``random`` feedback (another problem's feedback of the same turn: the control that shows
whether the feedback's content is used at all); and independent resampling from the original prompt
(:func:`run_resample`, the matched-budget baseline of Olausson et al. 2024, "Is Self-Repair a Silver
Bullet?", and Kapoor et al. 2024).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from execrl.refine.backends import ChatBackend, GenerationParams, Reply
from execrl.refine.feedback import FeedbackFormat, render_feedback
from execrl.rewards import RewardConfig, Score, extract_code, score_batch
from execrl.sandbox.types import Limits
from execrl.tasks.schema import CodeSpec, Task, prompt_for_chat

if TYPE_CHECKING:
    from execrl.refine.trace import TraceWriter
    from execrl.rewards.batch import SyncRunner

__all__ = [
    "Attempt",
    "ProblemRun",
    "RefineConfig",
    "best_visible_index",
    "first_attempts",
    "run_refine",
    "run_resample",
]

FeedbackSource = Literal["own", "random"]


@dataclass(frozen=True)
class RefineConfig:
    rounds: int = 3  # generations per problem at most: the first attempt and rounds-1 repairs
    feedback: FeedbackFormat = "details"
    max_failures_shown: int = 3
    max_feedback_chars: int = 300  # per field (input, got, an error message, a test name)
    max_feedback_tokens: int = 512  # the whole feedback before the instruction (feedback.py)
    history: Literal["full", "last"] = "full"
    generation: GenerationParams = field(default_factory=GenerationParams)
    limits: Limits = field(default_factory=lambda: Limits(timeout_s=10, cpu_time_s=10))
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"RefineConfig.rounds must be >= 1 (1 = no repair), got {self.rounds}")
        if self.max_failures_shown < 1 or self.max_feedback_chars < 20 or self.max_feedback_tokens < 16:
            raise ValueError(
                "max_failures_shown must be >= 1, max_feedback_chars >= 20 and max_feedback_tokens >= 16"
            )


@dataclass(frozen=True)
class Attempt:
    """One generation and its verdicts. ``hidden_passed`` is for reports only (never shown or used)."""

    turn: int  # 1-based
    messages: tuple[tuple[str, str], ...]  # the (role, content) conversation this attempt answered
    completion: str
    code: str | None  # the extracted program, None when no code block was found
    visible_passed: bool
    visible_reason: str
    visible_fraction: float
    visible_tests: tuple[tuple[str, str], ...]  # (name, verdict) of each visible test
    hidden_passed: bool
    prompt_tokens: int
    completion_tokens: int
    feedback: str | None = None  # what the model was told after this attempt (None: it stopped here)
    error: str | None = None  # the backend could not answer (no text; the problem stops here)


@dataclass(frozen=True)
class ProblemRun:
    task_id: str
    condition: str
    attempts: tuple[Attempt, ...]
    final_index: int = -1  # which attempt is the final program (the resampling baseline selects)

    @property
    def final(self) -> Attempt:
        return self.attempts[self.final_index]


def _messages(task: Task) -> list[dict[str, str]]:
    prompt = prompt_for_chat(task.prompt)
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def _code(task: Task, completion: str) -> str | None:
    spec = task.spec
    language, entry = (spec.language, spec.entry_point) if isinstance(spec, CodeSpec) else ("python", None)
    found = extract_code(completion, language, entry)
    return found.code if found is not None and found.code.strip() else None


def _scores(
    tasks: Sequence[Task], texts: Sequence[str], runner: SyncRunner, config: RefineConfig
) -> tuple[list[Score | None], list[Score]]:
    """(visible score or None when the task has none, hidden score) of each completion."""
    visible_cfg = RewardConfig(limits=config.limits, use_hidden_tests=False)
    hidden_cfg = RewardConfig(limits=config.limits, use_hidden_tests=True)
    with_visible = [i for i, t in enumerate(tasks) if t.visible_tests]
    visible: list[Score | None] = [None] * len(tasks)
    found = score_batch(
        [tasks[i] for i in with_visible],
        [texts[i] for i in with_visible],
        sandbox=runner,
        config=visible_cfg,
    )
    for i, score in zip(with_visible, found, strict=True):
        visible[i] = score
    hidden = score_batch(list(tasks), list(texts), sandbox=runner, config=hidden_cfg)
    return visible, hidden


def _attempt(
    task: Task, turn: int, messages: list[dict[str, str]], reply: Reply, visible: Score | None, hidden: Score
) -> Attempt:
    if reply.error is not None:
        return Attempt(
            turn=turn,
            messages=tuple((m["role"], m["content"]) for m in messages),
            completion="",
            code=None,
            visible_passed=False,
            visible_reason=f"endpoint_error: {reply.error}",
            visible_fraction=0.0,
            visible_tests=(),
            hidden_passed=False,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=0,
            error=reply.error,
        )
    tests = visible.execution.tests if visible is not None and visible.execution is not None else ()
    return Attempt(
        turn=turn,
        messages=tuple((m["role"], m["content"]) for m in messages),
        completion=reply.text,
        code=_code(task, reply.text),
        visible_passed=visible.passed if visible is not None else False,
        visible_reason=visible.reason if visible is not None else "no_visible_tests",
        visible_fraction=visible.pass_fraction if visible is not None else 0.0,
        visible_tests=tuple((t.name, t.verdict.value) for t in tests),
        hidden_passed=hidden.passed,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
    )


def _generate_and_score(
    tasks: Sequence[Task],
    conversations: list[list[dict[str, str]]],
    turn: int,
    backend: ChatBackend,
    runner: SyncRunner,
    config: RefineConfig,
    seed: int,
) -> tuple[list[Attempt], list[Score | None]]:
    params = dataclasses.replace(config.generation, seed=seed)
    replies = backend.complete(conversations, params)
    visible, hidden = _scores(tasks, [r.text for r in replies], runner, config)
    attempts = [
        _attempt(t, turn, c, r, v, h)
        for t, c, r, v, h in zip(tasks, conversations, replies, visible, hidden, strict=True)
    ]
    # A problem the backend could not answer stops: its next turn would only be longer.
    return attempts, [None if r.error is not None else v for r, v in zip(replies, visible, strict=True)]


def first_attempts(
    tasks: Sequence[Task], backend: ChatBackend, runner: SyncRunner, config: RefineConfig
) -> tuple[list[Attempt], list[Score | None]]:
    """Turn 1 of every problem (shared by all conditions, so they differ only after it)."""
    return _generate_and_score(tasks, [_messages(t) for t in tasks], 1, backend, runner, config, config.seed)


def _feedback(score: Score | None, config: RefineConfig, tokenizer: Any) -> str | None:
    if score is None or score.passed:
        return None
    return render_feedback(
        score,
        config.feedback,
        max_failures=config.max_failures_shown,
        max_chars=config.max_feedback_chars,
        max_tokens=config.max_feedback_tokens,
        tokenizer=tokenizer,
    )


def _swap_feedback(texts: list[str], rng: random.Random) -> list[str]:
    """Each problem gets the feedback of a different problem of the same turn (a random derangement)."""
    if len(texts) < 2:
        return texts  # nothing to swap with: the caller records this (counts as own feedback)
    order = list(range(len(texts)))
    rng.shuffle(order)
    shifted = {order[k]: order[(k + 1) % len(order)] for k in range(len(order))}
    return [texts[shifted[i]] for i in range(len(texts))]


# Builds the next turn's conversations for the still-failing problems ``active`` (it may annotate their
# latest attempts, e.g. with the feedback shown): (attempts, last visible scores, active, turn) -> convs.
NextTurn = Callable[[list[list[Attempt]], list["Score | None"], list[int], int], list[list[dict[str, str]]]]


def _turns(
    tasks: Sequence[Task],
    backend: ChatBackend,
    runner: SyncRunner,
    config: RefineConfig,
    first: tuple[list[Attempt], list[Score | None]],
    next_turn: NextTurn,
    seed_offset: int,
) -> list[list[Attempt]]:
    """Turns 2..rounds for the problems whose visible tests still fail (the early stop of every condition)."""
    attempts = [[a] for a in first[0]]
    last_scores = list(first[1])
    for turn in range(2, config.rounds + 1):
        active = [i for i, score in enumerate(last_scores) if score is not None and not score.passed]
        if not active:
            break
        conversations = next_turn(attempts, last_scores, active, turn)
        seed = config.seed + 7919 * turn + seed_offset
        chosen = [tasks[i] for i in active]
        new, scores = _generate_and_score(chosen, conversations, turn, backend, runner, config, seed)
        for i, attempt, score in zip(active, new, scores, strict=True):
            attempts[i].append(attempt)
            last_scores[i] = score
    return attempts


def run_refine(
    tasks: Sequence[Task],
    backend: ChatBackend,
    runner: SyncRunner,
    config: RefineConfig,
    *,
    first: tuple[list[Attempt], list[Score | None]],
    source: FeedbackSource = "own",
    trace: TraceWriter | None = None,
) -> list[ProblemRun]:
    """The loop, from shared first attempts. ``source="random"`` is the random-feedback control."""
    rng = random.Random(config.seed + 17)

    def next_turn(
        attempts: list[list[Attempt]], scores: list[Score | None], active: list[int], turn: int
    ) -> list[list[dict[str, str]]]:
        tokenizer = getattr(backend, "tokenizer", None)
        feedback = [_feedback(scores[i], config, tokenizer) or "" for i in active]
        if source == "random":
            feedback = _swap_feedback(feedback, rng)
        conversations = []
        for i, text in zip(active, feedback, strict=True):
            attempts[i][-1] = dataclasses.replace(attempts[i][-1], feedback=text)
            conversations.append(_next_messages(tasks[i], attempts[i][-1], text, config))
        return conversations

    attempts = _turns(tasks, backend, runner, config, first, next_turn, seed_offset=0)
    condition = "refine" if source == "own" else "random_feedback"
    return _finish(
        [ProblemRun(t.id, condition, tuple(a)) for t, a in zip(tasks, attempts, strict=True)], trace
    )


def _finish(runs: list[ProblemRun], trace: TraceWriter | None) -> list[ProblemRun]:
    if trace is not None:
        trace.write_runs(runs)
    return runs


def _next_messages(
    task: Task, previous: Attempt, feedback: str, config: RefineConfig
) -> list[dict[str, str]]:
    history = [{"role": r, "content": c} for r, c in previous.messages]
    if config.history == "last":
        history = _messages(task)
    return [
        *history,
        {"role": "assistant", "content": previous.completion},
        {"role": "user", "content": feedback},
    ]


def run_resample(
    tasks: Sequence[Task],
    backend: ChatBackend,
    runner: SyncRunner,
    config: RefineConfig,
    *,
    first: tuple[list[Attempt], list[Score | None]],
    trace: TraceWriter | None = None,
) -> list[ProblemRun]:
    """Matched-budget baseline: fresh samples of the original prompt while the visible tests fail.

    Same early stop, so problem by problem it spends exactly the generations the loop spends; the final
    program is the best on the visible tests (highest pass fraction, earliest on ties), then hidden-scored.
    """

    def next_turn(
        attempts: list[list[Attempt]], scores: list[Score | None], active: list[int], turn: int
    ) -> list[list[dict[str, str]]]:
        return [_messages(tasks[i]) for i in active]

    attempts = _turns(tasks, backend, runner, config, first, next_turn, seed_offset=1)
    runs = [
        ProblemRun(t.id, "resample", tuple(a), final_index=best_visible_index(a))
        for t, a in zip(tasks, attempts, strict=True)
    ]
    return _finish(runs, trace)


def best_visible_index(attempts: Sequence[Attempt]) -> int:
    """The attempt resampling returns: visible pass first, then pass fraction, then the earliest."""

    def key(i: int) -> tuple[bool, float, int]:
        return attempts[i].visible_passed, attempts[i].visible_fraction, -i

    return max(range(len(attempts)), key=key)
