"""From a rollout and its scores to the trainer's ``TrainBatch`` (and PPO's value targets), and the metrics
of a step: what the recipes' steps (``grpo.py``, ``ppo.py``, ``pipeline.py``) call between sampling and
the update."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from execrl.components.sampling import ScoredGroups
from execrl.rewards import Score, reward_metrics
from execrl.rewards.overlong import overlong_keep, overlong_penalties
from execrl.rollout.types import RolloutBatch
from execrl.scheduler import domain_metrics
from execrl.scheduler.prompt_cap import prompt_cap_metrics
from execrl.telemetry.memory import peak_rss_metric
from execrl.trainer import TrainBatch

if TYPE_CHECKING:
    from execrl.recipes.loop import Run


def reward_tensors(scores: Sequence[Score]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's reward ``[N]`` float64 and whether it is valid ``[N]`` bool (an invalid reward is kept out
    of the advantages and the loss, never counted as a 0)."""
    rewards = torch.tensor([s.reward for s in scores], dtype=torch.float64)  # [N]
    valid = torch.tensor([s.valid for s in scores], dtype=torch.bool)  # [N]
    return rewards, valid


def overlong_shaping(run: Run, step: int, rollout: RolloutBatch) -> torch.Tensor:
    """DAPO's soft overlong punishment of each row ``[N]`` float64 (``algorithm.overlong_buffer_tokens``; all
    0 when off), against the cap step ``step`` sampled with. Added to the rewards before the advantages."""
    algorithm = run.config.algorithm
    penalties = overlong_penalties(
        rollout.completion_lengths.tolist(), max_new_tokens=run.length.cap(step),
        buffer_tokens=algorithm.overlong_buffer_tokens, penalty_factor=algorithm.overlong_penalty_factor,
    )  # fmt: skip
    return torch.tensor(penalties, dtype=torch.float64)


def overlong_filtered(run: Run, rollout: RolloutBatch, valid: torch.Tensor) -> torch.Tensor:
    """The rows the loss trains on ``[N]`` bool: ``valid``, minus the truncated ones when
    ``algorithm.overlong_filtering`` is on (DAPO overlong filtering; their rewards still count in their
    group's advantages)."""
    if not run.config.algorithm.overlong_filtering:
        return valid
    return valid & torch.tensor(overlong_keep(rollout.finish_reasons), dtype=torch.bool)


def to_train_batch(
    rollout: RolloutBatch,
    advantages: torch.Tensor,  # [N]
    valid: torch.Tensor,  # [N] bool
    *,
    old_logprobs_from_rollout: bool,
) -> TrainBatch:
    """Left-pad each row's prompt and append its completion: ``input_ids`` [N, P_max + T].

    Left padding keeps every completion starting at the same column, so the rollout's ``[N, T]`` tensors
    slot in as the last ``T`` columns. With ``old_logprobs_from_rollout`` the rollout's
    ``sampling_logprobs`` (log-softmax of logits / temperature, exactly what the trainer computes with
    ``logprob_temperature`` when no top-k/top-p truncation was applied) are the behaviour policy's, which
    saves a forward pass; otherwise the trainer recomputes them.
    """
    n, width = rollout.completion_ids.shape  # [N, T]
    prompts = [rollout.prompt_for_row(r) for r in range(n)]
    p_max = max(len(p) for p in prompts)
    input_ids = torch.full((n, p_max + width), rollout.pad_token_id, dtype=torch.long)  # [N, S]
    attention = torch.zeros((n, p_max + width), dtype=torch.long)  # [N, S]
    for row, prompt in enumerate(prompts):
        input_ids[row, p_max - len(prompt) : p_max] = torch.tensor(prompt, dtype=torch.long)
        attention[row, p_max - len(prompt) : p_max] = 1
    input_ids[:, p_max:] = rollout.completion_ids
    response = torch.zeros((n, p_max + width), dtype=torch.long)  # [N, S]
    response[:, p_max:] = rollout.response_mask.long()
    attention[:, p_max:] = rollout.response_mask.long()
    old = None
    if old_logprobs_from_rollout:
        old = torch.zeros((n, p_max + width), dtype=torch.float32)
        old[:, p_max:] = rollout.sampling_logprobs * rollout.response_mask
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention,
        response_mask=response,
        old_logprobs=old,
        advantages=advantages.to(torch.float32),
        valid=valid,
    )


def rollout_metrics(rollout: RolloutBatch, scores: Sequence[Score], max_new_tokens: int) -> dict[str, float]:
    """Response lengths, truncation, throughput and the sandbox's share of failures, namespaced."""
    lengths = rollout.completion_lengths.double()  # [N]
    truncated = sum(reason == "length" for reason in rollout.finish_reasons)
    sandbox_errors = sum(s.reason_code == "sandbox_error" for s in scores)
    executed = [s.execution for s in scores if s.execution is not None]
    return {
        "rollout/response_length_mean": float(lengths.mean()),
        "rollout/response_length_max": float(lengths.max()),
        "rollout/truncation_rate": truncated / len(rollout.finish_reasons),
        "rollout/max_new_tokens": float(max_new_tokens),
        "rollout/prompt_tokens_max": float(max(len(p) for p in rollout.prompt_token_ids)),
        "perf/rollout_tokens_per_s": rollout.stats.tokens_per_s,
        "sandbox/error_rate": sandbox_errors / len(scores),
        "sandbox/executions": float(len(executed)),
        "sandbox/cpu_time_s_mean": (sum(e.cpu_time_s for e in executed) / len(executed)) if executed else 0.0,
    }


def trainer_logprob_gap(
    model: torch.nn.Module, batch: TrainBatch, rollout: RolloutBatch, *, rows: int, temperature: float
) -> float:
    """Max |rollout log-prob - trainer log-prob| over the response tokens of the first ``rows`` rows.

    NeMo-RL's gen_kl_error idea: generation (KV cache, left padding, incremental positions) and training
    (one teacher-forced pass) must agree, or the importance ratio is biased. A subset keeps it cheap
    enough to run every step. Compared against ``sampling_logprobs`` at the sampling temperature, so it is
    exact only without top-k/top-p truncation (with truncation it also measures the truncation).
    """
    from execrl.trainer import compute_logprobs

    width = rollout.completion_ids.shape[1]
    with torch.no_grad():
        logp, _ = compute_logprobs(
            model,
            batch.input_ids[:rows],
            batch.attention_mask[:rows],
            token_mask=batch.response_mask[:rows] > 0,
            temperature=temperature,
        )
    expected = rollout.sampling_logprobs[:rows] if temperature != 1.0 else rollout.logprobs[:rows]
    diff = (logp[:, -width:] - expected).abs() * rollout.response_mask[:rows]  # [rows, T]
    return float(diff.max()) if diff.numel() else 0.0


def logprob_gap(run: Run, batch: TrainBatch, rollout: RolloutBatch) -> float:
    """``trainer_logprob_gap`` over the first group (one no-grad pass), at the trainer's temperature; the
    steps call it when old log-probs are recomputed (otherwise the update's first forward measures it)."""
    return trainer_logprob_gap(
        run.model, batch, rollout, rows=rollout.samples_per_prompt, temperature=run.tcfg.logprob_temperature
    )


def engine_corrected(
    run: Run, batch: TrainBatch, rollout: RolloutBatch
) -> tuple[TrainBatch, dict[str, float]]:
    """With an engine that is not the trainer's own forward (``rollout.engine=vllm``, ``run.engine_correction``):
    the old log-probs recomputed by the trainer (pi_old, one no-grad pass, ``prepare_batch``) and each
    token's advantage weighted by min(pi_old / mu, ``algorithm.offpolicy_is_cap``), mu being the engine's
    ``sampling_logprobs`` (truncated importance sampling, Yao et al. 2025, "Your efficient RL framework
    secretly brings you off-policy RL training"; the one-step-off recipe's correction,
    ``trainer/offpolicy.py``). A bf16 engine's log-probs sit up to ~0.5 from an fp32 trainer's: this is the
    supported correction for that pair. Also measures the mismatch over every response token:
    ``rollout/logprob_max_abs_diff`` and ``rollout/logprob_mean_abs_diff`` (engine vs trainer). Otherwise
    the batch comes back unchanged with no metrics."""
    if not run.engine_correction:
        return batch, {}
    from execrl.trainer import behaviour_logprobs, prepare_batch, truncated_is_weights

    prepared = prepare_batch(run.model, batch, run.tcfg, ref_model=run.ref_model, value_model=run.value_head)
    mu = behaviour_logprobs(rollout.sampling_logprobs, prepared.input_ids.shape[1])  # [N, S] log mu
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
    run: Run, step: int, groups: ScoredGroups, weights: dict[str, float], *, sample_s: float, update_s: float
) -> dict[str, float]:
    """Rewards, rollout shape (the cap step ``step`` sampled with), per-domain metrics (``weights``: each
    domain's share when the step's tasks were drawn), timings and peak memory of one step's scored groups."""
    tasks, max_new_tokens = run.tasks, run.length.cap(step)
    rollout, scores = groups.rollout, groups.scores
    metrics = reward_metrics(scores)
    metrics.update(rollout_metrics(rollout, scores, max_new_tokens))
    metrics.update(prompt_cap_metrics(run.prompt_stages, step))  # the step's prompt cap, tasks left out
    metrics["rollout/sampling_rounds"] = float(groups.rounds)
    metrics["rollout/dropped_zero_variance_groups"] = float(groups.dropped_groups)
    metrics.update(domain_metrics([(tasks.domain_of(o.task_id), o) for o in groups.outcomes], weights))
    metrics["perf/rollout_and_reward_s"] = sample_s
    metrics["perf/update_s"] = update_s
    metrics["perf/step_s"] = sample_s + update_s
    metrics["perf/step_tokens_per_s"] = rollout.stats.generated_tokens / (sample_s + update_s)
    if run.config.algorithm.overlong_buffer_tokens:
        metrics["reward/overlong_penalty_mean"] = float(overlong_shaping(run, step, rollout).mean())
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
