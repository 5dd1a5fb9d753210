"""The one-step-off (async) and streaming loops on the Ray executor, on a local Ray (``num_cpus=2``).

Deterministic by design (each generate call runs whole on one worker with the driver's seed and the
weight version the in-process behaviour copy holds), so the properties are checked exactly: the async,
streaming Ray run equals the in-process one step for step, every step uses the version one update back
(staleness 1, never more), and workers killed while step t+1's rollout is in flight are replaced, with
the step completing on the same samples, none lost or scored twice.
"""

from __future__ import annotations

import copy
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import ray  # the "ray" extra; scripts/setup.sh installs it
from toy_domain import toy_overrides

from execrl.config import load_config
from execrl.distributed.ray_executor import RayExecutor

pytestmark = pytest.mark.slow
HALF_CPU = ["executor.rollout_num_cpus=0.5", "executor.sandbox_num_cpus=0.5"]
ASYNC = ["algorithm.async_steps=1", "executor.max_weight_staleness=1"]


def test_bench_executor_async_streaming_ray_run_equals_the_in_process_run(
    local_ray: None, tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    from execrl.cli import main

    out = tmp_path / "bench.json"
    overrides = [o for o in toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path) if "output_dir" not in o]
    argv = ["bench", "executor", "--async", "--steps", "2", "--json", str(out), *overrides, *HALF_CPU]
    assert main([*argv, "rollout.stream_scoring=true"]) == 0
    summary = json.loads(out.read_text())
    assert summary["mode"] == "async"
    assert summary["metrics_equal"] is True and summary["differences"] == []
    assert "loss/policy" in summary["compared_metrics"]
    # step 0 is sampled by the initial weights; step t >= 1 by version t-1 (one update back, the bound)
    assert summary["ray_weight_version_used_each"] == [0.0, 0.0]
    assert summary["ray_weight_staleness_each"] == [0.0, 1.0]
    assert summary["ray_retries"] == 0.0


def _same(a: Any, b: Any) -> None:
    """The same episodes: the same sampled tokens and behaviour log-probs, the same verdicts."""
    assert [e.token_ids for e in a.episodes] == [e.token_ids for e in b.episodes]
    assert [e.sampling_logprobs for e in a.episodes] == [e.sampling_logprobs for e in b.episodes]
    assert [(e.verdict.reward, e.verdict.reason) for e in a.episodes] == [
        (e.verdict.reward, e.verdict.reason) for e in b.episodes
    ]


def test_workers_killed_during_the_async_rollout_are_replaced_and_the_step_completes(
    local_ray: None,
    tiny_model_dir: Path,
    toy_tasks_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rollout worker (``ray.kill``) and the sandbox worker (SIGKILL) die while step 1's rollout runs
    in the background and step 0 trains: step 1 still gets every group, sampled by version 0 exactly as
    the in-process behaviour copy samples it (the one-turn environment restored on the new sandbox
    worker, whatever it had answered), and the retries are step 1's metrics, not step 0's."""
    from execrl.components import setup
    from execrl.components.run import build_run
    from execrl.recipes import pipeline
    from execrl.rollout.engine import create_engine

    overrides = [*toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path), "executor.kind=ray", *ASYNC]
    config = load_config(None, [*overrides, *HALF_CPU, "executor.retry_backoff_s=0", "run.total_steps=3"])
    run = build_run(config, None, parts={"behaviour_policy": pipeline.behaviour_copy})
    version0 = copy.deepcopy(run.model)
    sampled: dict[int, Any] = {}
    killed: list[bool] = []
    real_audit, real_update = pipeline.audit_step, pipeline.policy_update

    def audit_and_keep(run_dir: Path, step: int, groups: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
        sampled[step] = groups
        return real_audit(run_dir, step, groups, *args, **kwargs)

    with setup.build_sandbox(config) as sandbox:
        environment = setup.build_environment(config, sandbox)
        sampler = setup.step_sampler(config, environment, run.engine, run.tokenizer, None)
        executor = RayExecutor(config, sampler)
        try:
            sandbox_pid = ray.get(executor.sandbox.actors[0].pid.remote())

            def kill_then_update(*args: Any, **kwargs: Any) -> dict[str, float]:
                if not killed:  # step 0's update: step 1's rollout was just started
                    killed.append(True)
                    ray.kill(executor.rollout.actors[0])
                    os.kill(sandbox_pid, signal.SIGKILL)
                return real_update(*args, **kwargs)

            monkeypatch.setattr(pipeline, "audit_step", audit_and_keep)
            monkeypatch.setattr(pipeline, "policy_update", kill_then_update)
            executor.publish_weights(run.model, version=0)
            logs = {}
            with pipeline.OneStepOff(run, executor) as rollouts:
                for step in range(3):
                    metrics = pipeline.train_step(
                        run, step, rollouts=rollouts, executor=executor, environment=environment
                    )
                    logs[step] = {k: v for k, v in metrics.items() if k.startswith("executor/")}
            engine0 = create_engine(config.rollout.engine, model=version0, tokenizer=run.tokenizer)
            reference = setup.step_sampler(config, environment, engine0, run.tokenizer, None)
            step1 = sampled[1]
            _same(step1, reference(1, list(step1.tasks), 0))
        finally:
            executor.close()
    assert len(step1.episodes) == 32 and all(e.valid for e in step1.episodes)
    assert logs[0]["executor/retries"] == 0.0 and logs[0]["executor/replaced_workers"] == 0.0
    # one retry each: the engine call in flight, and the sandbox call the death met (start, or a later
    # one after the partition was restored); nothing failed, nothing lost
    assert (logs[1]["executor/retries"], logs[1]["executor/replaced_workers"]) == (2.0, 2.0)
    assert logs[1]["executor/failed_tasks"] == 0.0 and logs[1]["executor/lost_episodes"] == 0.0
    assert [logs[s]["executor/weight_version_used_min"] for s in range(3)] == [0.0, 0.0, 1.0]
    assert max(logs[s]["executor/weight_staleness_max"] for s in range(3)) == 1.0  # never beyond the bound
    assert logs[2]["executor/retries"] == 0.0
