"""One-step-off asynchronous training (``algorithm.async_steps=1``): the rollout of step t+1 (generation and
sandbox scoring) runs in a background thread while step t trains.

    execrl train algorithm.async_steps=1

Design (verl's one-step-off policy, ``docs/advance/one_step_off.md``, on one machine): the rollout runs on a
*behaviour copy* of the policy. At step t the loop takes the groups sampled in the background (by the
weights of step t-1), lets the scheduler learn from them, copies the current weights into the behaviour
copy, starts the rollout of step t+1 on it, and only then trains step t. So a sample is at most one update
stale (the staleness bound is 1 by construction), and the update corrects for it with the truncated
importance weight of ``execrl.trainer.offpolicy`` (decoupled PPO), spelled out in ``train_step``. The
advantages are GRPO's (group-relative) or, with ``algorithm.advantage_estimator=gae``, PPO's (value head
and GAE), made as the synchronous recipes' steps make them. Scheduler draws and observations stay on the main
thread, in step order, so the task draws do not depend on thread timing.

The rollout goes through the executor (``executor.behaviour_sampler``): in-process it runs the behaviour
copy's engine; with ``executor.kind=ray`` the rollout workers generate with published version t, the
weights the behaviour copy holds, so the same step code runs on both and gives the same samples.

Resume is bit-exact: the behaviour copy is saved in every checkpoint (``behaviour_policy.safetensors``),
so a resumed run regenerates the in-flight rollout with the same weights and seeds.

With an engine of its own (``rollout.engine=vllm``, one process for the run): that engine is the rollout's,
and ``OneStepOff`` syncs the behaviour copy into it (verified, ``sync/*`` metrics of the step) on this thread
before each rollout starts, so the engine gets the weights one step late, exactly as the behaviour copy
does; the executor does not sync it on publish (the rollout thread is using it then), and the final
evaluation syncs the trained weights (``loop.trained_engine``). The behaviour log-probs mu are the
engine's own, so the truncated importance weight corrects the staleness and the engine/trainer mismatch
at once.

Limits: generation and the update share the CPU cores (PyTorch intra-op threads of both threads compete),
and a tiny model's generation is Python-bound (the GIL), so on 2 cores the overlap gains less than the
1.2-2.8x GPU frameworks report; ``execrl bench pipeline`` measures it. Memory: one more copy of the
weights (with LoRA, of the adapters only: the copy shares the frozen base).
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

import torch

from execrl.components import setup
from execrl.config import ConfigError, TrainConfig
from execrl.distributed import Executor, InProcessExecutor
from execrl.episodes import Environment, StepEpisodes, episodes_to_batch, group_index, reward_tensors
from execrl.episodes.batch import aligned_logprobs
from execrl.recipes.audit import audit_step
from execrl.recipes.batch import (
    logprob_gap,
    logprob_gap_metric,
    overlong_filtered,
    overlong_shaping,
    ppo_targets,
    step_metrics,
)
from execrl.recipes.loop import (
    Run,
    TrainOutcome,
    finish_session,
    inject_nan_loss,
    publish_weights,
    run_steps,
    session,
)
from execrl.recipes.ppo import value_head
from execrl.trainer import (
    TrainBatch,
    compute_advantages,
    policy_update,
    prepare_batch,
    truncated_is_weights,
)
from execrl.trainer.lora import frozen_sharing_copy

__all__ = ["OneStepOff", "behaviour_copy", "train", "train_step"]


def behaviour_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A frozen copy of the policy for the background rollout (checkpointed as ``behaviour_policy``).
    Parameters the policy never trains (LoRA's base weights) are shared, not copied: the copy costs the
    adapters only."""
    clone = frozen_sharing_copy(model)  # type: ignore[arg-type]
    clone.eval()
    clone.requires_grad_(False)
    return clone


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    """Set up as ``grpo.train`` does (with the behaviour copy and, for PPO, the value head), then run
    ``train_step`` with step t+1's rollout in a background thread (``OneStepOff``); the thread is joined
    before the final evaluation uses the sandbox."""
    if not config.algorithm.async_steps:
        raise ConfigError("the one-step-off recipe needs algorithm.async_steps=1")
    parts = {"behaviour_policy": behaviour_copy}
    if config.algorithm.learns_values:
        parts = {"value_head": value_head, **parts}
    with session(config, resume_dir, parts=parts) as s:
        with OneStepOff(s.run, s.executor) as rollouts:  # exits (joins) before the executor
            step_fn = partial(
                train_step, s.run, rollouts=rollouts, executor=s.executor, environment=s.environment
            )
            last_step = run_steps(s.run, s.telemetry, step_fn, started=s.started, progress=progress)
        return finish_session(s, last_step)


def train_step(
    run: Run, step: int, *, rollouts: OneStepOff, executor: Executor, environment: Environment
) -> dict[str, float]:
    """One step: take step t's episodes, start step t+1's rollout, advantages, off-policy correction, update."""
    config = run.config
    t0 = time.perf_counter()
    weights, groups = rollouts.take(step)  # sampled by the weights of step t-1 (step 0: the initial ones)
    run.tasks.observe(step, groups.outcomes)  # on this thread, in step order: draws never depend on timing
    t1 = time.perf_counter()
    # The audit uses the sandbox, so it runs before step t+1's rollout starts using it in the thread;
    # its share is taken of this step's sampling time (the update has not run yet).
    audit = audit_step(run.run_dir, step, groups, environment, config, step_s=t1 - t0)
    rollouts.start_next(step)  # the behaviour copy takes version t; step t+1's rollout starts with it
    batch = advantage_batch(run, step, groups)  # GRPO's group-relative or PPO's GAE advantages
    gap = logprob_gap(run, batch, groups.episodes)  # the proximal log-probs are recomputed: measure the gap
    batch = prepare_batch(  # old log-probs = pi_prox, the current weights before this update
        run.model, batch, run.tcfg, ref_model=run.ref_model, value_model=run.value_head
    )
    mu = aligned_logprobs(groups.episodes, sampling=True)  # [N, S] log mu, the behaviour policy's
    is_weights, off_metrics = truncated_is_weights(  # min(pi_prox / mu, cap) per token, [N, S]
        batch.old_logprobs, mu, batch.response_mask, cap=config.algorithm.offpolicy_is_cap
    )
    batch = dataclasses.replace(batch, advantages=batch.advantages * is_weights)  # decoupled PPO
    metrics = policy_update(  # the clip is taken against pi_prox; the weights above correct for mu
        run.model, run.optimizer, run.lr_scheduler, batch, run.tcfg, ref_model=run.ref_model,
        value_model=run.value_head,  # type: ignore[arg-type]
    )  # fmt: skip
    t2 = time.perf_counter()
    metrics.update(logprob_gap_metric(gap, metrics))  # generation vs training log-probs
    metrics.update(off_metrics)  # train/offpolicy_ratio_*, train/offpolicy_clipped_frac
    metrics.update(rollouts.take_sync_metrics())  # vLLM: the behaviour copy's sync into the engine (sync/*)
    metrics.update(step_metrics(run, step, groups, weights, environment, sample_s=t1 - t0, update_s=t2 - t1))
    metrics["train/offpolicy_staleness_steps"] = 0.0 if step == 0 else 1.0  # t >= 1: sampled by t-1
    metrics.update(audit)  # reward hacking (see above for why it ran before the update)
    metrics.update(publish_weights(run, executor, step))  # version step + 1 out; executor/* metrics
    return metrics


def advantage_batch(run: Run, step: int, groups: StepEpisodes) -> TrainBatch:
    """Step ``step``'s train batch with the advantages the synchronous recipe would use: group-relative
    (``grpo.train_step``) or, with PPO's value head, old values, GAE and returns (``ppo.train_step``). Old
    log-probs are left to ``prepare_batch`` (the rollout's are the behaviour policy's, not pi_prox)."""
    episodes = groups.episodes
    rewards, valid = reward_tensors(episodes)  # [N] each
    rewards = rewards + overlong_shaping(run, step, episodes)  # DAPO soft overlong punishment; 0 if off
    loss_rows = overlong_filtered(run, episodes, valid)  # DAPO overlong filtering (off: valid)
    if run.value_head is None:
        advantages = compute_advantages(
            run.tcfg.advantage_estimator, rewards, group_ids=group_index(episodes), valid=valid,
            eps=run.tcfg.advantage_std_eps,
        )  # fmt: skip
        return episodes_to_batch(episodes, inject_nan_loss(run, step, advantages), loss_rows,
                                 pad_token_id=run.pad_token_id, old_logprobs_from_rollout=False)  # fmt: skip
    batch = episodes_to_batch(episodes, torch.zeros_like(rewards), loss_rows, pad_token_id=run.pad_token_id,
                              old_logprobs_from_rollout=False)  # fmt: skip
    batch = ppo_targets(
        run.model, run.value_head, batch, rewards, gamma=run.tcfg.gamma, lam=run.tcfg.gae_lambda
    )
    return dataclasses.replace(batch, advantages=inject_nan_loss(run, step, batch.advantages))


class OneStepOff:
    """Step t+1's rollout in a background thread while step t trains; a context manager (waits for it).

    The rollout goes through ``executor.behaviour_sampler(version=...)``: in-process the behaviour copy's
    engine, on Ray the rollout workers holding that published version, so this code is the same for both.
    """

    def __init__(self, run: Run, executor: Executor) -> None:
        if run.behaviour_model is None:
            raise ValueError("async_steps=1 needs the run's behaviour copy (setup_run builds it)")
        self.run = run
        self.behaviour_model = run.behaviour_model
        self.executor = executor
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="execrl-rollout")
        self.pending: Future[tuple[dict[str, float], StepEpisodes]] | None = None
        # An engine with weights of its own (vLLM) is the run's, fed from the behaviour copy (module doc);
        # under Ray the workers' engines sample and this one is never called (no second engine process).
        own = hasattr(run.engine, "sync_weights")
        self.syncs = own and isinstance(executor, InProcessExecutor)
        self.sync_metrics: dict[str, float] = {}
        if own:
            self.engine = run.engine
        else:
            self.engine = setup.rollout_engine(run.config, run.behaviour_model, run.tokenizer)  # type: ignore[arg-type]
        if run.start_step > 0:  # resume: step start_step is sampled by the checkpointed behaviour copy
            executor.publish_weights(run.behaviour_model, version=run.start_step - 1)

    def __enter__(self) -> OneStepOff:
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.shutdown(wait=True)  # a rollout in flight finishes before the sandbox closes

    def _sample(self, step: int, version: int) -> tuple[dict[str, float], StepEpisodes]:
        """Step ``step``'s groups, generated with weights ``version`` (the behaviour copy's)."""
        weights = self.run.tasks.domain_weights()  # read-only here: observe runs on the main thread
        alg = self.run.config.algorithm
        sampler = self.executor.behaviour_sampler(engine=self.engine, version=version)
        groups = sampler.sample_step(
            step,
            self.run.tasks,
            prompts_per_step=self.run.config.rollout.prompts_per_step,
            dynamic=alg.dynamic_sampling,
            max_resample_rounds=alg.max_resample_rounds,
        )
        return weights, groups

    def take(self, step: int) -> tuple[dict[str, float], StepEpisodes]:
        """Step ``step``'s domain weights and groups: from the rollout in flight, or (the first step of a run
        or of a resume) sampled now by the behaviour copy, which holds version ``step - 1``."""
        if self.pending is None:
            self._sync_engine(max(step - 1, 0))
            return self._sample(step, max(step - 1, 0))
        return self.pending.result()

    def start_next(self, step: int) -> None:
        """Copy the current weights (version ``step``, published after step ``step - 1``) into the behaviour
        copy and start step ``step + 1``'s rollout with them (none after the last step)."""
        _load_weights(self.behaviour_model, self.run.model)
        if step + 1 < self.run.config.run.total_steps:
            self._sync_engine(step)
            self.pending = self.thread.submit(self._sample, step + 1, step)

    def _sync_engine(self, version: int) -> None:
        """An engine of its own gets the behaviour copy as ``version`` (verified; none when it holds it)."""
        if self.syncs and getattr(self.engine, "version", None) != version:
            report = self.engine.sync_weights(self.behaviour_model, version)  # type: ignore[attr-defined]
            self.sync_metrics = report.metrics()

    def take_sync_metrics(self) -> dict[str, float]:
        """The ``sync/*`` metrics of the sync since the last call (none: nothing was synced)."""
        metrics, self.sync_metrics = self.sync_metrics, {}
        return metrics


def _load_weights(target: torch.nn.Module, source: torch.nn.Module) -> None:
    """The policy's weights into the behaviour copy; the ones it shares (LoRA's frozen base) need none."""
    with torch.no_grad():
        for dst, src in zip(target.parameters(), source.parameters(), strict=True):
            if dst is not src:
                dst.copy_(src)
