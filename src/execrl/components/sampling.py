"""One step's groups: sample, score, and (optionally) DAPO dynamic sampling; or streamed, each group
scored while the next one generates (``StreamingGroupSampler``, ``rollout.stream_scoring``).

DAPO (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", arXiv 2503.14476,
section 3.2): a group whose rewards are all equal has zero advantage and teaches nothing, so groups with
zero reward variance are dropped and more prompts are sampled until the step has ``prompts_per_step``
informative groups, or ``max_resample_rounds`` extra rounds have been spent (then the step trains on what
it has; a step with no informative group at all trains on nothing, which the metrics show).

Extra prompts come from a second mixture stream (seeded apart from the main one) so the main stream's
data position, and with it exact resume, is unchanged by how many resamples a step needed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from execrl.rewards import RewardConfig, Score, score_batch
from execrl.rollout.engine import Engine
from execrl.rollout.prompts import encode_prompts
from execrl.rollout.types import RolloutBatch, RolloutStats, SamplingParams
from execrl.scheduler import GroupOutcome, Scheduler, outcomes_from_scores
from execrl.seeding import stream_seed
from execrl.tasks.schema import Task, prompt_for_chat

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from execrl.sandbox import Sandbox


@dataclass(frozen=True)
class ScoredGroups:
    rollout: RolloutBatch
    tasks: list[Task]  # one per prompt (group)
    scores: list[Score]  # one per row
    rounds: int = 1  # sampling rounds spent (1 = no resampling)
    dropped_groups: int = 0  # zero-variance groups filtered out
    outcomes: tuple[GroupOutcome, ...] = ()  # every group sampled, dropped ones included (for the scheduler)


@dataclass(frozen=True)
class GenerateCall:
    """One engine call of a sampler: groups ``first_group .. first_group + len(prompts) - 1`` of a
    (step, round), with their encoded prompts and seeded parameters. The executors run these wherever
    they run them, so a step samples the same in-process and on Ray."""

    first_group: int
    prompts: Any  # encoded prompts, one per group
    params: SamplingParams  # seeded for this call


SampleFn = Callable[[list[Task], int], tuple[RolloutBatch, list[Score]]]  # (tasks, round) -> rollout, scores


@dataclass(frozen=True)
class GroupSampler:
    """Generate ``samples_per_prompt`` completions per task and score them all in one sandbox batch.

    The seed of each generate call is a hash of (run seed, step, round) (``execrl.seeding``), so a resumed
    run samples exactly what the uninterrupted run would have, and no two (step, round) pairs share a seed.
    """

    engine: Engine
    tokenizer: PreTrainedTokenizerBase
    sandbox: Sandbox
    reward: RewardConfig
    params: SamplingParams
    seed: int
    length_cap: Callable[[int], int] | None = None  # step -> max_new_tokens (execrl.scheduler.length)

    def step_params(self, step: int, *seed_path: int) -> SamplingParams:
        """``params`` seeded with the hash of (run seed, step, ``seed_path``), capped at the step's length."""
        cap = self.params.max_new_tokens if self.length_cap is None else self.length_cap(step)
        seed = stream_seed(self.seed, "rollout", step, *seed_path)
        return dataclasses.replace(self.params, seed=seed, max_new_tokens=cap)

    def __call__(self, step: int, tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]:
        prompts, params = self.generation_inputs(step, tasks, round_)
        rollout = self.engine.generate(prompts, params)
        row_tasks = [tasks[g] for g in rollout.group_index.tolist()]
        return rollout, score_batch(row_tasks, list(rollout.texts), sandbox=self.sandbox, config=self.reward)

    def generation_inputs(self, step: int, tasks: list[Task], round_: int) -> tuple[Any, SamplingParams]:
        """The encoded prompts and the seeded sampling parameters of one generate call (every executor
        uses these, so a step samples the same wherever it runs)."""
        params = self.step_params(step, round_)
        return encode_prompts(self.tokenizer, [prompt_for_chat(t.prompt) for t in tasks]), params

    def generate_calls(self, step: int, tasks: list[Task], round_: int) -> list[GenerateCall]:
        """This sampler's engine calls for (step, round): one for every task (a streaming sampler makes
        one per task)."""
        return [GenerateCall(0, *self.generation_inputs(step, tasks, round_))]

    def sample_step(
        self,
        step: int,
        scheduler: Scheduler,
        *,
        prompts_per_step: int,
        dynamic: bool,
        max_resample_rounds: int,
    ) -> ScoredGroups:
        """The step's groups: tasks from ``scheduler``, generated and scored (DAPO refill if ``dynamic``)."""
        return sample_groups(
            scheduler.tasks_for_step(step, prompts_per_step),
            lambda extra_round: scheduler.tasks_for_step(step, prompts_per_step, extra_round + 1),
            lambda tasks, round_: self(step, tasks, round_),
            dynamic=dynamic,
            max_resample_rounds=max_resample_rounds,
        )


def group_outcomes(
    tasks: Sequence[Task], rollout: RolloutBatch, scores: Sequence[Score]
) -> list[GroupOutcome]:
    """One ``GroupOutcome`` per task of a scored rollout (what the scheduler learns from)."""
    return outcomes_from_scores(
        [t.id for t in tasks],
        [s.reward for s in scores],
        [s.passed for s in scores],
        rollout.group_index.tolist(),
    )


def informative_groups(scores: Sequence[Score], group_index: torch.Tensor) -> list[int]:
    """Groups whose valid rewards are not all equal (the only ones with a non-zero GRPO advantage)."""
    rewards: dict[int, set[float]] = {}
    for score, group in zip(scores, group_index.tolist(), strict=True):
        if score.valid:
            rewards.setdefault(group, set()).add(score.reward)
    return sorted(g for g, values in rewards.items() if len(values) > 1)


def select_groups(scored: ScoredGroups, groups: Sequence[int]) -> ScoredGroups:
    """Keep only ``groups`` (renumbered 0..len-1 in the given order), with their tasks and scores."""
    rollout = scored.rollout
    rows = [r for g in groups for r in range(rollout.num_rows) if int(rollout.group_index[r]) == g]
    index = torch.tensor(rows, dtype=torch.long)
    new_group = {g: i for i, g in enumerate(groups)}
    picked = dataclasses.replace(
        rollout,
        prompt_token_ids=tuple(rollout.prompt_token_ids[g] for g in groups),
        completion_ids=rollout.completion_ids[index],
        logprobs=rollout.logprobs[index],
        sampling_logprobs=rollout.sampling_logprobs[index],
        response_mask=rollout.response_mask[index],
        group_index=torch.tensor([new_group[int(rollout.group_index[r])] for r in rows], dtype=torch.long),
        finish_reasons=tuple(rollout.finish_reasons[r] for r in rows),
        texts=tuple(rollout.texts[r] for r in rows),
    )
    return dataclasses.replace(
        scored,
        rollout=picked,
        tasks=[scored.tasks[g] for g in groups],
        scores=[scored.scores[r] for r in rows],
    )


def concat_groups(parts: Sequence[ScoredGroups]) -> ScoredGroups:
    """Stack several scored rollouts into one, padding completions to the longest."""
    if len(parts) == 1:
        return parts[0]
    width = max(p.rollout.completion_ids.shape[1] for p in parts)
    pad_id = parts[0].rollout.pad_token_id

    def padded(t: torch.Tensor, value: float | int | bool) -> torch.Tensor:  # [n, T_i] -> [n, width]
        return torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)

    offsets = [0]
    for p in parts[:-1]:
        offsets.append(offsets[-1] + p.rollout.num_prompts)
    rollouts = [p.rollout for p in parts]
    stats = RolloutStats(
        prefill_s=sum(r.stats.prefill_s for r in rollouts),
        decode_s=sum(r.stats.decode_s for r in rollouts),
        total_s=sum(r.stats.total_s for r in rollouts),
        prompt_tokens=sum(r.stats.prompt_tokens for r in rollouts),
        generated_tokens=sum(r.stats.generated_tokens for r in rollouts),
        decode_steps=sum(r.stats.decode_steps for r in rollouts),
    )
    merged = dataclasses.replace(
        rollouts[0],
        prompt_token_ids=tuple(p for r in rollouts for p in r.prompt_token_ids),
        completion_ids=torch.cat([padded(r.completion_ids, pad_id) for r in rollouts]),
        logprobs=torch.cat([padded(r.logprobs, 0.0) for r in rollouts]),
        sampling_logprobs=torch.cat([padded(r.sampling_logprobs, 0.0) for r in rollouts]),
        response_mask=torch.cat([padded(r.response_mask, False) for r in rollouts]),
        group_index=torch.cat([r.group_index + off for r, off in zip(rollouts, offsets, strict=True)]),
        finish_reasons=tuple(f for r in rollouts for f in r.finish_reasons),
        texts=tuple(t for r in rollouts for t in r.texts),
        stats=stats,
    )
    return ScoredGroups(
        rollout=merged,
        tasks=[t for p in parts for t in p.tasks],
        scores=[s for p in parts for s in p.scores],
        rounds=sum(p.rounds for p in parts),
        dropped_groups=sum(p.dropped_groups for p in parts),
    )


def sample_groups(
    first_tasks: list[Task],
    extra_tasks: Callable[[int], list[Task]],
    sample: SampleFn,
    *,
    dynamic: bool,
    max_resample_rounds: int,
) -> ScoredGroups:
    """Sample and score the step's groups; with ``dynamic``, refill zero-variance groups (DAPO)."""
    rollout, scores = sample(first_tasks, 0)
    outcomes = group_outcomes(first_tasks, rollout, scores)
    first = scored = ScoredGroups(rollout, first_tasks, scores, outcomes=tuple(outcomes))
    if not dynamic:
        return first
    target = len(first_tasks)
    kept: list[ScoredGroups] = []
    have = rounds = dropped = 0
    while True:
        groups = informative_groups(scored.scores, scored.rollout.group_index)
        dropped += scored.rollout.num_prompts - len(groups)
        groups = groups[: target - have]
        if groups:
            kept.append(select_groups(scored, groups))
            have += len(groups)
        rounds += 1
        if have >= target or rounds > max_resample_rounds:
            break
        tasks = extra_tasks(rounds - 1)
        rollout, scores = sample(tasks, rounds)
        outcomes.extend(group_outcomes(tasks, rollout, scores))
        scored = ScoredGroups(rollout, tasks, scores)
    if not kept:  # nothing informative in any round: keep the first (all its advantages are zero)
        kept = [first]
    merged = concat_groups(kept)
    return dataclasses.replace(merged, rounds=rounds, dropped_groups=dropped, outcomes=tuple(outcomes))


@dataclass(frozen=True)
class StreamingGroupSampler(GroupSampler):
    """Scoring streams (``rollout.stream_scoring``): each task's group is generated by its own engine call
    and sent to the sandbox as soon as it finishes, while the engine generates the next group. The sandbox
    workers are separate processes, so scoring and generation really run at the same time.

    Seeds: group g of (step, round) samples with the hash of (seed, step, round, g), so the draws differ
    from the batched sampler's (one seed per call) but are just as reproducible. Limit: one group per
    engine call loses the batching across prompts, which can cost more than the overlap saves; ``execrl
    bench pipeline`` measures both.
    """

    def generate_calls(self, step: int, tasks: list[Task], round_: int) -> list[GenerateCall]:
        """One call per group g, seeded with the hash of (seed, step, round, g)."""
        prompts = encode_prompts(self.tokenizer, [prompt_for_chat(t.prompt) for t in tasks])
        return [
            GenerateCall(
                g,
                [prompt],
                self.step_params(step, round_, g),
            )
            for g, prompt in enumerate(prompts)
        ]

    def __call__(self, step: int, tasks: list[Task], round_: int) -> tuple[RolloutBatch, list[Score]]:
        parts: list[RolloutBatch] = []
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="execrl-score") as scorer:
            pending: list[Future[list[Score]]] = []
            for task, call in zip(tasks, self.generate_calls(step, tasks, round_), strict=True):
                rollout = self.engine.generate(call.prompts, call.params)
                rows = [task] * rollout.num_rows
                pending.append(
                    scorer.submit(
                        score_batch, rows, list(rollout.texts), sandbox=self.sandbox, config=self.reward
                    )
                )
                parts.append(rollout)
            scored = [ScoredGroups(r, [t], f.result()) for r, t, f in zip(parts, tasks, pending, strict=True)]
        merged = concat_groups(scored)
        return merged.rollout, merged.scores
