"""One-step-off asynchronous training (``algorithm.async_steps=1``): the rollout of step t+1 (generation and
sandbox scoring) runs in a background thread while step t trains.

Design (verl's one-step-off policy, ``docs/advance/one_step_off.md``, on one machine): the rollout runs on a
*behaviour copy* of the policy. At step t the loop takes the groups sampled in the background (by the
weights of step t-1), lets the scheduler learn from them, copies the current weights into the behaviour
copy, starts the rollout of step t+1 on it, and only then trains step t. So a sample is at most one update
stale (the staleness bound is 1 by construction), and the update corrects for it with the truncated
importance weight of ``offpolicy.py`` (decoupled PPO). Scheduler draws and observations stay on the main
thread, in step order, so the task draws do not depend on thread timing.

Resume is bit-exact: the behaviour copy is saved in every checkpoint (``behaviour_policy.safetensors``),
so a resumed run regenerates the in-flight rollout with the same weights and seeds.

Limits: generation and the update share the CPU cores (PyTorch intra-op threads of both threads compete),
and a tiny model's generation is Python-bound (the GIL), so on 2 cores the overlap gains less than the
1.2-2.8x GPU frameworks report; ``execrl bench pipeline`` measures it. Memory: one more copy of the
weights.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from execrl.recipes.loop import Run
from execrl.recipes.sampling import GroupSampler, ScoredGroups
from execrl.recipes.update import step_metrics, update_from_rollout
from execrl.rollout.engine import create_engine

__all__ = ["OneStepOff"]


class OneStepOff:
    """The async step: ``step_fn`` for ``grpo.train``; use as a context manager (waits for the thread)."""

    def __init__(self, run: Run) -> None:
        if run.behaviour_model is None:
            raise ValueError("async_steps=1 needs the run's behaviour copy (setup_run builds it)")
        self.run = run
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="execrl-rollout")
        self.pending: Future[tuple[dict[str, float], ScoredGroups]] | None = None
        self.engine = create_engine(
            run.config.rollout.engine, model=run.behaviour_model, tokenizer=run.tokenizer
        )

    def __enter__(self) -> OneStepOff:
        return self

    def __exit__(self, *exc: object) -> None:
        self.executor.shutdown(wait=True)  # a rollout in flight finishes before the sandbox closes

    def _sample(self, step: int, sampler: GroupSampler) -> tuple[dict[str, float], ScoredGroups]:
        weights = self.run.tasks.domain_weights()  # read-only here: observe runs on the main thread
        alg = self.run.config.algorithm
        groups = sampler.sample_step(
            step,
            self.run.tasks,
            prompts_per_step=self.run.config.rollout.prompts_per_step,
            dynamic=alg.dynamic_sampling,
            max_resample_rounds=alg.max_resample_rounds,
        )
        return weights, groups

    def __call__(self, run: Run, step: int, sampler: GroupSampler) -> dict[str, float]:
        """One step: take (or make) step t's groups, start step t+1's rollout, train step t."""
        config = run.config
        behaviour = dataclasses.replace(sampler, engine=self.engine)
        t0 = time.perf_counter()
        if self.pending is None:  # first step of the run (or of a resume): nothing in flight
            weights, groups = self._sample(step, behaviour)
        else:
            weights, groups = self.pending.result()
        run.tasks.observe(step, groups.outcomes)
        t1 = time.perf_counter()
        staleness = 0.0 if step == 0 else 1.0  # step t >= 1 was sampled by the weights of step t-1
        _load_weights(run.behaviour_model, run.model)
        if step + 1 < config.run.total_steps:
            self.pending = self.executor.submit(self._sample, step + 1, behaviour)
        metrics = update_from_rollout(  # decoupled PPO: clip against pi_prox, truncated weight pi_prox/mu
            run.model, run.optimizer, run.lr_scheduler, run.tcfg, groups.rollout, groups.scores,
            old_logprobs_from_rollout=False, value_head=run.value_head, ref_model=run.ref_model,
            poison_advantages=step == config.run.inject_nan_loss_at_step,
            behaviour_cap=config.algorithm.offpolicy_is_cap,
        )  # fmt: skip
        t2 = time.perf_counter()
        metrics.update(step_metrics(
            groups, run.tasks, weights, max_new_tokens=config.rollout.max_new_tokens, sample_s=t1 - t0,
            update_s=t2 - t1,
        ))  # fmt: skip
        metrics["train/offpolicy_staleness_steps"] = staleness
        return metrics


def _load_weights(target: Any, source: torch.nn.Module) -> None:
    with torch.no_grad():
        for dst, src in zip(target.parameters(), source.parameters(), strict=True):
            dst.copy_(src)
