"""The multi-turn environments on the Ray executor (issue 36), on a local Ray (``num_cpus=2``).

Tool episodes run next to their sessions: scripted episodes (a real ``python`` call, its answer copied)
on two sandbox workers equal the in-process ones, and a worker SIGKILLed holding sessions ends only its
own episodes, as counted errors. ``execrl bench executor`` finds the synchronous Ray run equal to the
in-process run step for step with tool calls and with refine feedback, and the one-step-off tool run
equal too (it runs to completion: the acceptance's ``--executor ray`` with ``algorithm.async_steps=1``).
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import ray  # the "ray" extra; scripts/setup.sh installs it
import toy_tools
from toy_domain import toy_overrides

from execrl.config import TrainConfig, load_config
from execrl.distributed.faults import FaultCounters, RetryPolicy
from execrl.distributed.ray_actors import ActorGroup
from execrl.distributed.ray_environment import RemoteEnvironment
from execrl.distributed.ray_workers import SandboxWorker
from execrl.episodes import Episode, LocalBackend, RolloutResult, run_episodes
from execrl.rollout.types import SamplingParams

pytestmark = pytest.mark.slow
HALF_CPU = ["executor.rollout_num_cpus=0.5", "executor.sandbox_num_cpus=0.5"]
TOOL_LIMITS = [f"tools.{k}={v}" for k, v in toy_tools.TOOL_LIMITS.items()]


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from execrl.tasks import save_tasks

    path = tmp_path_factory.mktemp("toy-tools") / "toy_tools.jsonl"
    save_tasks(toy_tools.toy_tool_tasks(8, "train"), str(path))
    return path


def _script(turn: int, context: str) -> str:
    """Call the tool first, then answer the digit it printed."""
    if turn == 0:
        return toy_tools.GOOD_CALL
    seen = re.findall(r"Out: (\d)", context)
    return seen[-1] if seen else "?"


def _rollout(environment: Any, tokenizer: Any, script: Any = _script) -> RolloutResult:
    backend = LocalBackend(toy_tools.ScriptedEngine(tokenizer, script), tokenizer)
    params = SamplingParams(samples_per_prompt=2, max_new_tokens=32)
    tasks = toy_tools.toy_tool_tasks(4, "train")
    return run_episodes(environment, backend, tasks, params=params, max_episode_tokens=160)


def _view(episodes: tuple[Episode, ...]) -> list[tuple[Any, ...]]:
    keep = ("tool_calls", "parse_errors", "truncated_outputs", "calls", "tokens_used")
    return [
        (e.token_ids, e.stop, e.reward, e.verdict.reason, {k: e.info.get(k) for k in keep}) for e in episodes
    ]


def test_tool_episodes_run_next_to_their_sessions_and_a_dead_worker_ends_only_its_own(
    local_ray: None, tiny_model_dir: Path
) -> None:
    from execrl.components import setup

    overrides = [f"model.path={tiny_model_dir}", "tools.enabled=true", *TOOL_LIMITS, "sandbox.workers=1"]
    config: TrainConfig = load_config(None, overrides)
    _, tokenizer, _ = setup.load_policy(config)
    with setup.build_sandbox(config, sessions=setup.sessions_held(config)) as sandbox:
        environment = setup.build_environment(config, sandbox)
        local = _rollout(environment, tokenizer)
    assert all(e.passed and e.info["tool_calls"] == 1.0 for e in local.episodes)  # the tool really ran
    hosts = ray.remote(SandboxWorker).options(num_cpus=0, max_concurrency=2)
    group = ActorGroup("sandbox", lambda: hosts.remote(config, tokenizer), 2, policy=RetryPolicy(2, 0.0),
                       timeout_s=120)  # fmt: skip
    try:
        counters = FaultCounters()
        remote = RemoteEnvironment(environment, group, counters)
        assert _view(_rollout(remote, tokenizer).episodes) == _view(local.episodes)  # tasks split 2 + 2
        assert counters.lost_episodes == 0
        pid = ray.get(group.actors[1].pid.remote())
        killed: list[int] = []

        def kill_then_answer(turn: int, context: str) -> str:
            if turn == 1 and not killed:  # the final answers: the sessions hold the calls' state
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            return _script(turn, context)

        result = _rollout(remote, tokenizer, kill_then_answer)  # worker 1 dies holding tasks 2-3's sessions
    finally:
        group.close()
    assert _view(result.episodes[:4]) == _view(local.episodes[:4])
    lost = result.episodes[4:]
    assert [e.stop for e in lost] == ["error"] * 4 and not any(e.valid for e in lost)
    assert all(e.info["executor_lost"] == 1.0 for e in lost)
    assert (counters.lost_episodes, counters.replaced_workers) == (4, 1)


def _bench(argv: list[str], out: Path) -> dict[str, Any]:
    from execrl.cli import main

    assert main(["bench", "executor", "--steps", "2", "--json", str(out), *argv, *HALF_CPU]) == 0
    summary: dict[str, Any] = json.loads(out.read_text())
    assert summary["metrics_equal"] is True and summary["differences"] == []
    assert summary["ray_retries"] == 0.0 and summary["ray_lost_episodes"] == 0.0
    return summary


def _tool_args(tiny_model_dir: Path, tools_file: Path) -> list[str]:
    return [
        f"model.path={tiny_model_dir}", f'tasks.suites={{"{tools_file}"=1.0}}', "run.name=toy",
        "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2", "rollout.top_k=16", "optim.learning_rate=1e-2",
        "sandbox.workers=1", "telemetry.tensorboard=false", "tools.enabled=true", "tools.max_turn_tokens=8",
        "tools.max_episode_tokens=24", "tools.max_tool_calls=2",
    ]  # fmt: skip


def test_bench_executor_finds_the_ray_tool_runs_equal_step_for_step(
    local_ray: None, tiny_model_dir: Path, tools_file: Path, tmp_path: Path
) -> None:
    """Serial and one-step-off: the Ray run's rewards, losses, rollout shapes and ``tools/*`` equal the
    in-process run's (the tool episodes' environment on a sandbox actor, their turns on a rollout actor)."""
    summary = _bench(_tool_args(tiny_model_dir, tools_file), tmp_path / "serial.json")
    assert (
        "tools/calls_per_episode" in summary["compared_metrics"]
        and "loss/policy" in summary["compared_metrics"]
    )
    summary = _bench(["--async", *_tool_args(tiny_model_dir, tools_file)], tmp_path / "async.json")
    assert summary["mode"] == "async" and summary["ray_weight_staleness_each"] == [0.0, 1.0]


def test_bench_executor_finds_the_ray_refine_run_equal_step_for_step(
    local_ray: None, tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    overrides = [o for o in toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path) if "output_dir" not in o]
    small = ["refine.max_turns=2", "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2",
             "rollout.max_new_tokens=4", "sandbox.workers=1"]  # fmt: skip
    summary = _bench([*overrides, *small], tmp_path / "refine.json")
    assert "refine/turns_mean" in summary["compared_metrics"]
