"""The evaluation harness: sample completions, score them in the sandbox, report pass@k with intervals.

Honesty rules this module keeps (from the evaluation pain points in research/eval_refine.md):
- pass@k uses the unbiased estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on
  Code") and is only reported for k <= samples per task; intervals are a percentile bootstrap over tasks.
- Scoring uses the hidden tests only; invalid scores (sandbox errors) are counted and reported, and a task
  with an invalid sample is scored as failed for that sample but listed in ``diagnostics``.
- The harness measures its own noise: the same completions are scored twice and must agree exactly
  (``rescoring_agreement`` = 1.0), since a flaky verifier would otherwise show up as model variance.
- Greedy decoding does not depend on how many prompts share a batch (left padding with correct position
  ids; a known lm-eval bug); ``tests/unit/eval`` checks batch size 1 against batch size 4.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from execrl.eval.passk import TaskCounts, pass_at_k_per_task
from execrl.eval.stats import Estimate, bootstrap_ci
from execrl.rewards import RewardConfig, Score, score_batch
from execrl.tasks.schema import Task, prompt_for_chat

if TYPE_CHECKING:
    from execrl.rollout.hf_engine import HFEngine
    from execrl.sandbox import Sandbox

# Reasons that mean "the model's output could not be turned into an answer at all".
EXTRACTION_FAILURES = frozenset({"no_code_found", "no_answer_found", "no_json_found"})


@dataclass(frozen=True)
class EvalConfig:
    samples_per_task: int = 1
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 256
    prompts_per_batch: int = 8
    seed: int = 0
    ks: tuple[int, ...] = (1, 5, 10, 100)
    bootstrap_resamples: int = 2000

    def __post_init__(self) -> None:
        if self.samples_per_task < 1 or self.prompts_per_batch < 1 or self.max_new_tokens < 1:
            raise ValueError("samples_per_task, prompts_per_batch and max_new_tokens must all be >= 1")
        if self.temperature == 0 and self.samples_per_task > 1:
            raise ValueError(
                "greedy decoding (temperature 0) gives identical samples; set samples_per_task=1 "
                "or a temperature > 0"
            )

    @property
    def valid_ks(self) -> tuple[int, ...]:
        return tuple(k for k in self.ks if k <= self.samples_per_task)


@dataclass(frozen=True)
class TaskEval:
    """Every sample of one task, as scored (the per-task record the harness saves)."""

    task_id: str
    completions: tuple[str, ...]
    rewards: tuple[float, ...]
    passed: tuple[bool, ...]
    valid: tuple[bool, ...]
    reasons: tuple[str, ...]
    finish_reasons: tuple[str, ...]
    lengths_tokens: tuple[int, ...]

    @property
    def counts(self) -> TaskCounts:
        return TaskCounts(samples=len(self.passed), correct=sum(self.passed))

    @property
    def mean_reward(self) -> float:
        return sum(self.rewards) / len(self.rewards)


@dataclass(frozen=True)
class EvalResult:
    suite: str
    model: str
    config: EvalConfig
    pass_at_k: dict[str, Estimate]
    mean_reward: Estimate
    diagnostics: dict[str, float]
    tasks: tuple[TaskEval, ...] = field(repr=False)
    # [tasks][samples], as scored; kept for the audit (``Score.audit``), not in ``to_dict``
    scores: tuple[tuple[Score, ...], ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "model": self.model,
            "n_tasks": len(self.tasks),
            "config": asdict(self.config),
            "pass_at_k": {k: v.as_dict() for k, v in self.pass_at_k.items()},
            "mean_reward": self.mean_reward.as_dict(),
            "diagnostics": self.diagnostics,
            "tasks": [asdict(t) for t in self.tasks],
        }


@dataclass(frozen=True)
class Generations:
    texts: list[list[str]]  # [tasks][samples]
    finish_reasons: list[list[str]]
    lengths_tokens: list[list[int]]
    tokens_per_s: float


def generate(engine: HFEngine, tasks: Sequence[Task], config: EvalConfig) -> Generations:
    """Sample ``config.samples_per_task`` completions per task, ``prompts_per_batch`` prompts at a time."""
    from execrl.rollout.prompts import encode_prompts
    from execrl.rollout.types import SamplingParams

    params = SamplingParams(
        samples_per_prompt=config.samples_per_task,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        seed=config.seed,
    )
    texts: list[list[str]] = []
    finish: list[list[str]] = []
    lengths: list[list[int]] = []
    tokens = 0
    seconds = 0.0
    for start in range(0, len(tasks), config.prompts_per_batch):
        chunk = tasks[start : start + config.prompts_per_batch]
        batch = engine.generate(
            encode_prompts(engine.tokenizer, [prompt_for_chat(t.prompt) for t in chunk]), params
        )
        n = config.samples_per_task
        row_lengths = batch.completion_lengths.tolist()
        for i in range(len(chunk)):
            rows = range(i * n, (i + 1) * n)
            texts.append([batch.texts[r] for r in rows])
            finish.append([batch.finish_reasons[r] for r in rows])
            lengths.append([int(row_lengths[r]) for r in rows])
        tokens += batch.stats.generated_tokens
        seconds += batch.stats.total_s
    return Generations(texts, finish, lengths, tokens / seconds if seconds > 0 else 0.0)


def score_generations(
    tasks: Sequence[Task], texts: Sequence[Sequence[str]], *, sandbox: Sandbox | None, reward: RewardConfig
) -> list[list[Score]]:
    """Score every sample of every task in one concurrent sandbox batch; [tasks][samples]."""
    flat_tasks = [task for task, samples in zip(tasks, texts, strict=True) for _ in samples]
    flat_texts = [text for samples in texts for text in samples]
    flat = score_batch(flat_tasks, flat_texts, sandbox=sandbox, config=reward)
    out: list[list[Score]] = []
    offset = 0
    for samples in texts:
        out.append(flat[offset : offset + len(samples)])
        offset += len(samples)
    return out


def evaluate(
    engine: HFEngine,
    tasks: Sequence[Task],
    *,
    suite: str,
    model_name: str,
    config: EvalConfig,
    sandbox: Sandbox | None = None,
    reward: RewardConfig | None = None,
) -> EvalResult:
    """Generate, score (twice, to measure the harness's own noise) and summarise."""
    if not tasks:
        raise ValueError(f"suite {suite!r} has no tasks to evaluate")
    reward = reward or RewardConfig(mode="binary")
    gens = generate(engine, tasks, config)
    scores = score_generations(tasks, gens.texts, sandbox=sandbox, reward=reward)
    rescored = score_generations(tasks, gens.texts, sandbox=sandbox, reward=reward)
    per_task = tuple(
        TaskEval(
            task_id=task.id,
            completions=tuple(gens.texts[i]),
            rewards=tuple(s.reward for s in scores[i]),
            passed=tuple(s.passed for s in scores[i]),
            valid=tuple(s.valid for s in scores[i]),
            reasons=tuple(s.reason for s in scores[i]),
            finish_reasons=tuple(gens.finish_reasons[i]),
            lengths_tokens=tuple(gens.lengths_tokens[i]),
        )
        for i, task in enumerate(tasks)
    )
    opts = {"resamples": config.bootstrap_resamples, "seed": config.seed}
    counts = [t.counts for t in per_task]
    pass_at = {f"pass@{k}": bootstrap_ci(pass_at_k_per_task(counts, k), **opts) for k in config.valid_ks}
    diagnostics = diagnose(per_task, scores, rescored)
    diagnostics["tokens_per_s"] = gens.tokens_per_s
    return EvalResult(
        suite=suite,
        model=model_name,
        config=config,
        pass_at_k=pass_at,
        mean_reward=bootstrap_ci([t.mean_reward for t in per_task], **opts),
        diagnostics=diagnostics,
        tasks=per_task,
        scores=tuple(tuple(row) for row in scores),
    )


def diagnose(
    per_task: Sequence[TaskEval], scores: Sequence[Sequence[Score]], rescored: Sequence[Sequence[Score]]
) -> dict[str, float]:
    """Reliability diagnostics: truncation, extraction failures, lengths, invalid rate, rescoring noise."""
    finish = [f for t in per_task for f in t.finish_reasons]
    reasons = Counter(s.reason_code for row in scores for s in row)
    lengths = [n for t in per_task for n in t.lengths_tokens]
    total = len(finish)
    same = sum(
        (a.reward, a.passed, a.reason_code) == (b.reward, b.passed, b.reason_code)
        for row_a, row_b in zip(scores, rescored, strict=True)
        for a, b in zip(row_a, row_b, strict=True)
    )
    out = {
        "samples": float(total),
        "truncation_rate": sum(f == "length" for f in finish) / total,
        "extraction_failure_rate": sum(reasons[r] for r in EXTRACTION_FAILURES) / total,
        "invalid_rate": sum(not v for t in per_task for v in t.valid) / total,
        "length_mean_tokens": statistics.fmean(lengths),
        "length_median_tokens": float(statistics.median(lengths)),
        "length_max_tokens": float(max(lengths)),
        "rescoring_agreement": same / total,
    }
    if per_task and len(per_task[0].passed) > 1:
        # Per-sample consistency: share of tasks whose samples all agree (all pass or all fail).
        out["sample_consistency"] = sum(len(set(t.passed)) == 1 for t in per_task) / len(per_task)
    out.update({f"reason/{code}": n / total for code, n in sorted(reasons.items())})
    return out
