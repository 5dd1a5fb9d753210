"""From a step's episodes to the trainer's ``TrainBatch`` inputs (DAPO's overlong shaping and filtering, the
generation/training log-prob gap) and the metrics of a step: what the recipes' steps (``grpo.py``,
``ppo.py``, ``pipeline.py``) call between sampling and the update, for every environment. The batch itself
is ``execrl.episodes.episodes_to_batch``."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from execrl.episodes import StepEpisodes, episode_metrics
from execrl.episodes.batch import aligned_logprobs
from execrl.episodes.types import Episode
from execrl.rewards.overlong import overlong_penalties
from execrl.scheduler import domain_metrics
from execrl.scheduler.prompt_cap import prompt_cap_metrics
from execrl.telemetry.memory import peak_rss_metric
from execrl.trainer import TrainBatch

if TYPE_CHECKING:
    from collections.abc import Sequence

    from execrl.episodes import Environment
    from execrl.recipes.loop import Run


def overlong_shaping(run: Run, step: int, episodes: Sequence[Episode]) -> torch.Tensor:
    """DAPO's soft overlong punishment of each episode ``[N]`` float64 (``algorithm.overlong_buffer_tokens``;
    all 0 when off), on its longest model turn against the turn cap step ``step`` sampled with (a
    single-turn completion: its length). Added to the rewards before the advantages."""
    algorithm = run.config.algorithm
    penalties = overlong_penalties(
        [e.longest_turn_tokens for e in episodes], max_new_tokens=run.length.cap(step),
        buffer_tokens=algorithm.overlong_buffer_tokens, penalty_factor=algorithm.overlong_penalty_factor,
    )  # fmt: skip
    return torch.tensor(penalties, dtype=torch.float64)


def overlong_filtered(run: Run, episodes: Sequence[Episode], valid: torch.Tensor) -> torch.Tensor:
    """The episodes the loss trains on ``[N]`` bool: ``valid``, minus those a turn cap cut when
    ``algorithm.overlong_filtering`` is on (DAPO overlong filtering; their rewards still count in their
    group's advantages)."""
    if not run.config.algorithm.overlong_filtering:
        return valid
    return valid & torch.tensor([not e.truncated for e in episodes], dtype=torch.bool)


def trainer_logprob_gap(
    model: torch.nn.Module, batch: TrainBatch, episodes: Sequence[Episode], *, rows: int, temperature: float
) -> float:
    """Max |rollout log-prob - trainer log-prob| over the sampled tokens of the first ``rows`` episodes.

    NeMo-RL's gen_kl_error idea: generation (KV cache, left padding, incremental positions) and training
    (one teacher-forced pass) must agree, or the importance ratio is biased. A subset keeps it cheap
    enough to run every step. Compared against ``sampling_logprobs`` at the sampling temperature, so it is
    exact only without top-k/top-p truncation (with truncation it also measures the truncation).
    """
    from execrl.trainer import compute_logprobs

    with torch.no_grad():
        logp, _ = compute_logprobs(
            model,
            batch.input_ids[:rows],
            batch.attention_mask[:rows],
            token_mask=batch.response_mask[:rows] > 0,
            temperature=temperature,
        )
    expected = aligned_logprobs(episodes, sampling=temperature != 1.0)[:rows]  # [rows, S]
    diff = (logp - expected).abs() * batch.response_mask[:rows]  # [rows, S]
    return float(diff.max()) if diff.numel() else 0.0


def logprob_gap(run: Run, batch: TrainBatch, episodes: Sequence[Episode]) -> float:
    """``trainer_logprob_gap`` over the first group (one no-grad pass), at the trainer's temperature; the
    steps call it when old log-probs are recomputed (otherwise the update's first forward measures it)."""
    rows = sum(e.task_index == episodes[0].task_index for e in episodes)
    return trainer_logprob_gap(
        run.model, batch, episodes, rows=rows, temperature=run.tcfg.logprob_temperature
    )


def engine_corrected(
    run: Run, batch: TrainBatch, episodes: Sequence[Episode]
) -> tuple[TrainBatch, dict[str, float]]:
    """With an engine that is not the trainer's own forward (``rollout.engine=vllm``, ``run.engine_correction``):
    the old log-probs recomputed by the trainer (pi_old, one no-grad pass, ``prepare_batch``) and each
    token's advantage weighted by min(pi_old / mu, ``algorithm.offpolicy_is_cap``), mu being the engine's
    ``sampling_logprobs`` of the episodes' model turns (truncated importance sampling, Yao et al. 2025, "Your
    efficient RL framework secretly brings you off-policy RL training"; the one-step-off recipe's
    correction, ``trainer/offpolicy.py``), for one-turn and multi-turn episodes alike (the environment's
    tokens carry no loss). A bf16 engine's log-probs sit up to ~0.5 from an fp32 trainer's: this is the
    supported correction for that pair. Also measures the mismatch over every model token:
    ``rollout/logprob_max_abs_diff`` and ``rollout/logprob_mean_abs_diff`` (engine vs trainer). Otherwise
    the batch comes back unchanged with no metrics."""
    if not run.engine_correction:
        return batch, {}
    from execrl.trainer import prepare_batch, truncated_is_weights

    prepared = prepare_batch(run.model, batch, run.tcfg, ref_model=run.ref_model, value_model=run.value_head)
    mu = aligned_logprobs(episodes, sampling=True)  # [N, S] log mu, in the batch's columns
    weights, metrics = truncated_is_weights(  # min(pi_old / mu, cap) per token, [N, S]
        prepared.old_logprobs, mu, prepared.response_mask, cap=run.config.algorithm.offpolicy_is_cap
    )
    mask = prepared.response_mask.bool()  # [N, S]
    diff = (prepared.old_logprobs.float() - mu.float()).abs()[mask]  # [M]
    if diff.numel():
        metrics["rollout/logprob_max_abs_diff"] = float(diff.max())
        metrics["rollout/logprob_mean_abs_diff"] = float(diff.mean())
    return dataclasses.replace(prepared, advantages=prepared.advantages * weights), metrics


def logprob_gap_metric(gap: float | None, update_metrics: dict[str, float]) -> dict[str, float]:
    """``rollout/logprob_max_abs_diff`` (NeMo-RL's ``gen_kl_error`` idea): ``gap`` when an extra pass measured
    it, else the update's own first forward against the rollout's log-probs (no extra pass); absent when no
    valid row had a response token to compare."""
    value = gap if gap is not None else update_metrics.get("train/old_logprob_max_abs_diff")
    return {} if value is None else {"rollout/logprob_max_abs_diff": value}


def step_metrics(
    run: Run,
    step: int,
    groups: StepEpisodes,
    weights: dict[str, float],
    environment: Environment,
    *,
    sample_s: float,
    update_s: float,
) -> dict[str, float]:
    """Rewards, rollout shape (the turn cap step ``step`` sampled with), the environment's own metrics,
    per-domain metrics (``weights``: each domain's share when the step's tasks were drawn), timings and peak
    memory of one step's episodes."""
    episodes, tasks = groups.episodes, run.tasks
    step_s = sample_s + update_s
    metrics = episode_metrics(episodes, max_new_tokens=run.length.cap(step))
    metrics.update(environment.metrics(episodes, step_s=step_s))
    metrics.update(prompt_cap_metrics(run.prompt_stages, step))  # the step's prompt cap, tasks left out
    metrics["rollout/sampling_rounds"] = float(groups.rounds)
    metrics["rollout/dropped_zero_variance_groups"] = float(groups.dropped_groups)
    metrics.update(domain_metrics([(tasks.domain_of(o.task_id), o) for o in groups.outcomes], weights))
    tokens = sum(e.model_tokens for e in episodes)
    metrics["perf/rollout_and_reward_s"] = sample_s
    metrics["perf/rollout_tokens_per_s"] = tokens / groups.generate_s if groups.generate_s > 0 else 0.0
    metrics["perf/update_s"] = update_s
    metrics["perf/step_s"] = step_s
    metrics["perf/step_tokens_per_s"] = tokens / step_s
    if run.config.algorithm.overlong_buffer_tokens:
        metrics["reward/overlong_penalty_mean"] = float(overlong_shaping(run, step, episodes).mean())
    metrics.update(peak_rss_metric())
    return metrics


def ppo_targets(
    model: torch.nn.Module,
    value_head: torch.nn.Module,
    batch: TrainBatch,
    rewards: torch.Tensor,  # [N] outcome rewards
    *,
    gamma: float,
    lam: float,
) -> TrainBatch:
    """PPO with a learned value function: old values, GAE advantages (whitened) and returns.

    The outcome reward sits on each sequence's last response token (``token_level_rewards``); GAE
    (Schulman et al. 2016, arXiv 1506.02438) spreads it back with the critic's values as baseline.
    Invalid rows (``batch.valid`` False) are masked out of the advantages and returns.
    """
    from execrl.trainer import forward_hidden, gae, masked_whiten, token_level_rewards

    mask = batch.response_mask.bool()
    if batch.valid is not None:
        mask &= batch.valid[:, None]
    with torch.no_grad():
        hidden = forward_hidden(
            model, batch.input_ids, batch.attention_mask, shared_context_of=batch.response_mask
        )  # [N, S, H]
        values = value_head(hidden).float()  # [N, S]
    token_rewards = token_level_rewards(rewards.float(), mask)  # [N, S]
    advantages, returns = gae(token_rewards, values * mask, mask, gamma=gamma, lam=lam)
    if int(mask.sum()) >= 2:
        advantages = masked_whiten(advantages, mask)
    return dataclasses.replace(batch, advantages=advantages, old_values=values * mask, returns=returns)
