"""What a verifier returns (``Score``), how rewards are shaped (``RewardConfig``) and the verifier interface.

Why a two-phase interface: code rewards are the bottleneck of every RL framework we studied (verl #1130,
fastrl #6: serial local execution eats 40 % of a step). A verifier that calls the sandbox itself forces
one-by-one execution. Here a verifier only *prepares* an ``ExecutionRequest`` (or decides on its own, e.g.
no code found) and later *finishes* the score from the ``ExecutionResult``; ``score_batch`` sends every
prepared request of a batch to the sandbox in one concurrent call. A pure verifier (math, structured) is a
plain function ``(task, completion, config) -> Score``; the registry adapts it (see ``PureVerifier``).

Invalid is not zero: ``Score.valid=False`` marks a sample whose reward is unknown (the verifier raised, the
sandbox broke). The trainer excludes it from the advantage and the metrics count it, instead of teaching
the policy that a correct answer scored 0 because a worker died (open-r1's ``except Exception: None``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from execrl.sandbox.types import ExecutionRequest, ExecutionResult, Limits

if TYPE_CHECKING:
    from execrl.tasks.schema import Task

RewardMode = Literal["binary", "partial"]


@dataclass(frozen=True)
class Score:
    """The verdict of one completion.

    ``reason`` is ``"<code>"`` or ``"<code>: <human detail>"``; the code (``reason_code``) is a stable
    machine-friendly token ("passed", "wrong_answer", "no_code_found", "syntax_error", "timeout",
    "runtime_error", "memory_limit", "output_limit", "compile_error", "sandbox_error", "verifier_error",
    "no_answer_found", "no_json_found", "invalid_json", "schema_mismatch", "wrong_value") that metrics
    count; the detail is for people ("expected 3/4, got 0.7").
    """

    reward: float
    valid: bool
    passed: bool
    pass_fraction: float
    reason: str
    execution: ExecutionResult | None = None
    audit: Score | None = None  # the same execution's score on the task's audit tests (``rewards/blind.py``)

    def __post_init__(self) -> None:
        if not math.isfinite(self.reward):
            raise ValueError(f"Score.reward must be finite, got {self.reward!r} (reason {self.reason!r})")
        if not 0.0 <= self.pass_fraction <= 1.0:
            raise ValueError(f"Score.pass_fraction must be in [0, 1], got {self.pass_fraction!r}")
        if not self.reason:
            raise ValueError("Score.reason is empty; say why this reward was given (e.g. 'passed')")

    @property
    def reason_code(self) -> str:
        """The machine-friendly part of ``reason`` (before the first ':')."""
        return self.reason.split(":", 1)[0].strip()

    @classmethod
    def success(cls, *, pass_fraction: float = 1.0, execution: ExecutionResult | None = None) -> Score:
        """Full reward: everything checked passed."""
        return cls(
            reward=1.0,
            valid=True,
            passed=True,
            pass_fraction=pass_fraction,
            reason="passed",
            execution=execution,
        )

    @classmethod
    def failure(
        cls,
        reason: str,
        *,
        reward: float = 0.0,
        pass_fraction: float = 0.0,
        execution: ExecutionResult | None = None,
    ) -> Score:
        """A valid score that did not pass (wrong answer, no code, penalties as a negative ``reward``)."""
        return cls(
            reward=reward,
            valid=True,
            passed=False,
            pass_fraction=pass_fraction,
            reason=reason,
            execution=execution,
        )

    @classmethod
    def invalid(cls, reason: str, execution: ExecutionResult | None = None) -> Score:
        """A score to exclude from the advantage: reward 0 only as a placeholder, never trained on."""
        return cls(
            reward=0.0, valid=False, passed=False, pass_fraction=0.0, reason=reason, execution=execution
        )


@dataclass(frozen=True)
class RewardConfig:
    """How outcomes become rewards.

    ``mode``: ``binary`` gives 1 only if every test passes (DeepCoder's choice: partial credit invites
    special-casing the easy tests); ``partial`` gives the share of tests passed (also the share of
    ``expected_values`` matched for structured outputs).
    Penalties are non-negative numbers *subtracted* from the reward of that outcome (0 = same reward as a
    wrong answer): ``no_code_penalty`` when no code block can be extracted, ``syntax_error_penalty`` when
    the program does not compile (checked locally before any sandbox call, or a sandbox compile error),
    ``timeout_penalty`` when the execution hit its time limit.
    ``limits`` are the sandbox limits of every code execution. ``use_hidden_tests`` scores on the task's
    hidden tests (training, evaluation); ``False`` uses the visible ones (the refine loop's feedback).
    ``with_audit``: a task's audit tests run in the same execution as its hidden tests, shuffled among
    them, and the score carries their verdict in ``Score.audit`` (the blind audit, ``rewards/blind.py``);
    the reward itself reads the hidden tests only.
    A score's ``reason`` and ``execution`` quote the tests they ran ("expected 3, got 4"): never show the
    policy a score computed on hidden tests, or the grader leaks into the prompt.
    """

    mode: RewardMode = "binary"
    no_code_penalty: float = 0.0
    syntax_error_penalty: float = 0.0
    timeout_penalty: float = 0.0
    limits: Limits = field(default_factory=Limits)
    use_hidden_tests: bool = True
    with_audit: bool = False

    def __post_init__(self) -> None:
        if self.mode not in ("binary", "partial"):
            raise ValueError(f"RewardConfig.mode={self.mode!r} is unknown; set 'binary' or 'partial'")
        for name in ("no_code_penalty", "syntax_error_penalty", "timeout_penalty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"RewardConfig.{name} must be a finite number, got {value!r}")
            if value < 0:
                raise ValueError(
                    f"RewardConfig.{name}={value!r} is negative; penalties are subtracted, set a value >= 0"
                )


@runtime_checkable
class Verifier(Protocol):
    """The interface every registered verifier exposes (see the module docstring for why two phases).

    ``prepare`` returns a ``Score`` when it can decide without running anything (a pure verifier always
    does), else the ``ExecutionRequest`` to run. ``finish`` turns that request's result into a ``Score``;
    it is only called for completions whose ``prepare`` returned a request. Both may raise on a broken
    task; ``score_batch`` turns that into an invalid ``Score`` ("verifier_error: ...").
    """

    def prepare(self, task: Task, completion: str, config: RewardConfig) -> ExecutionRequest | Score: ...

    def finish(self, task: Task, completion: str, result: ExecutionResult, config: RewardConfig) -> Score: ...


PureVerifierFn = Callable[["Task", str, RewardConfig], Score]


class PureVerifier:
    """Adapts a function ``(task, completion, config) -> Score`` to the ``Verifier`` interface."""

    def __init__(self, fn: PureVerifierFn) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__

    def prepare(self, task: Task, completion: str, config: RewardConfig) -> Score:
        score = self.fn(task, completion, config)
        if not isinstance(score, Score):
            raise TypeError(
                f"verifier {self.fn.__qualname__} returned {type(score).__name__}, expected a Score"
            )
        return score

    def finish(self, task: Task, completion: str, result: ExecutionResult, config: RewardConfig) -> Score:
        raise TypeError(f"{self.fn.__qualname__} is a pure verifier; it never asks for an execution")

    def __repr__(self) -> str:
        return f"PureVerifier({self.fn.__module__}.{self.fn.__qualname__})"
