"""The Ray executor on a local Ray instance (``num_cpus=2``) with the tiny model and the toy domain.

Each test checks one property: a call equals the in-process call; killed workers (``ray.kill`` and
SIGKILL of the process) are replaced and their task retried with nothing lost or counted twice; a task
failing every attempt becomes invalid scores with its reason; a worker refuses weights older than the
staleness bound; and ``execrl bench executor`` finds the synchronous Ray run equal step for step.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray  # the "ray" extra; scripts/setup.sh installs it
from toy_domain import toy_overrides

from execrl.config import TrainConfig, load_config
from execrl.distributed.faults import FaultCounters, RetryPolicy
from execrl.distributed.ray_executor import ActorGroup, Attempt, RayExecutor
from execrl.distributed.ray_workers import RolloutWorker, StaleWeights

pytestmark = pytest.mark.slow
# Two executors live at once in this module (the shared one and the benchmark's); 2 CPUs hold both.
HALF_CPU = ["executor.rollout_num_cpus=0.5", "executor.sandbox_num_cpus=0.5"]


@pytest.fixture(scope="module")
def config(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> TrainConfig:
    out = tmp_path_factory.mktemp("ray-runs")
    overrides = [*toy_overrides(tiny_model_dir, toy_tasks_file, out), "executor.kind=ray", *HALF_CPU]
    return load_config(None, [*overrides, "executor.retry_backoff_s=0", "sandbox.workers=1"])


@pytest.fixture(scope="module")
def in_process(config: TrainConfig) -> Iterator[Any]:
    """The driver side: model, tasks and an in-process ``GroupSampler`` (the reference)."""
    from execrl.components import setup
    from execrl.components.sampling import GroupSampler
    from execrl.recipes.loop import setup_run
    from execrl.rollout.types import SamplingParams

    run = setup_run(config, None)
    rollout = config.rollout
    params = SamplingParams(
        samples_per_prompt=rollout.samples_per_prompt,
        max_new_tokens=rollout.max_new_tokens,
        temperature=rollout.temperature,
        top_k=rollout.top_k,
    )
    with setup.build_sandbox(config) as sandbox:
        sampler = GroupSampler(
            run.engine, run.tokenizer, sandbox, setup.reward_config(config), params, seed=0
        )
        yield run, sampler


@pytest.fixture(scope="module")
def executor(local_ray: None, config: TrainConfig, in_process: Any) -> Iterator[RayExecutor]:
    """One executor (its actors start once) shared by the tests that drive it."""
    run, sampler = in_process
    executor = RayExecutor(config, sampler)
    executor.publish_weights(run.model, version=0)
    yield executor
    executor.close()


def _same(a: tuple[Any, list[Any]], b: tuple[Any, list[Any]]) -> None:
    assert a[0].texts == b[0].texts
    assert [s.reward for s in a[1]] == [s.reward for s in b[1]]
    assert [s.reason for s in a[1]] == [s.reason for s in b[1]]


def test_killed_workers_are_replaced_and_their_task_retried(executor: RayExecutor, in_process: Any) -> None:
    run, sampler = in_process
    tasks = run.tasks.tasks_for_step(0, 4)
    _same(executor(0, tasks, 0), sampler(0, tasks, 0))
    assert executor.step_metrics(0)["executor/retries"] == 0.0
    ray.kill(executor.rollout.actors[0])  # the rollout replica dies
    os.kill(ray.get(executor.sandbox.actors[0].pid.remote()), signal.SIGKILL)  # so does the sandbox's
    executor.publish_weights(run.model, version=1)  # the same weights, as the version step 1 starts from
    result = executor(1, tasks, 0)
    _same(result, sampler(1, tasks, 0))  # nothing lost, nothing scored twice, same samples
    assert len(result[1]) == result[0].num_rows == 32
    metrics = executor.step_metrics(1)
    assert metrics["executor/tasks"] == 2.0  # one generate call, one scoring chunk
    assert metrics["executor/retries"] == 2.0 and metrics["executor/replaced_workers"] == 2.0
    assert metrics["executor/failed_tasks"] == 0.0
    assert metrics["executor/weight_version_used_min"] == 1.0  # the new replica got version 1 first
    assert metrics["executor/weight_staleness_max"] == 0.0


class Slow:
    def work(self, seconds: float, tag: str) -> str:
        import time

        time.sleep(seconds)
        return tag

    def pid(self) -> int:
        return os.getpid()


@pytest.mark.parametrize("how", ["ray.kill", "SIGKILL"])
def test_a_worker_killed_mid_task_is_replaced_and_the_task_retried_once(local_ray: None, how: str) -> None:
    """The kill lands while the task runs (not before it is sent): the in-flight task is retried on the
    replacement and its result is returned exactly once."""
    slow = ray.remote(Slow).options(num_cpus=0)
    counters = FaultCounters()
    group = ActorGroup("test", slow.remote, 1, policy=RetryPolicy(3, 0.0), timeout_s=60)
    victim = group.actors[0]
    pid = ray.get(victim.pid.remote())  # the actor is up before the task is sent
    ref = victim.work.remote(3.0, "done")
    time.sleep(1.0)  # the task is now running
    if how == "ray.kill":
        ray.kill(victim)
    else:
        os.kill(pid, signal.SIGKILL)
    try:
        assert (
            group.call(
                "work",
                lambda i: group.actors[i].work.remote(0.1, "done"),
                counters=counters,
                first=Attempt(0, victim, ref),
            )
            == "done"
        )
    finally:
        group.close()
    assert group.actors[0] is not victim
    assert (counters.tasks, counters.retries, counters.replaced_workers, counters.failed_tasks) == (
        1,
        1,
        1,
        0,
    )


class AlwaysFails:
    def score(self, tasks: list[Any], completions: list[str]) -> list[Any]:
        raise RuntimeError("sandbox host lost its cgroups")


def test_a_scoring_task_failing_every_attempt_becomes_invalid_scores_with_the_reason(
    executor: RayExecutor, in_process: Any
) -> None:
    run, _ = in_process
    failing = ray.remote(AlwaysFails).options(num_cpus=0)
    executor.sandbox.close()
    executor.sandbox = ActorGroup("sandbox", failing.remote, 1, policy=RetryPolicy(2, 0.0), timeout_s=60)
    tasks = run.tasks.tasks_for_step(0, 1)
    counters = FaultCounters()
    scores = executor._score(tasks * 3, ["a", "b", "c"], counters)
    assert [s.valid for s in scores] == [False, False, False]
    assert scores[0].reason_code == "executor_error"
    assert "scoring of rows 0..2 failed after 2 attempts" in scores[0].reason
    assert "RuntimeError: sandbox host lost its cgroups" in scores[0].reason
    metrics = counters.drain()
    assert (metrics["executor/retries"], metrics["executor/failed_tasks"]) == (1.0, 1.0)


def test_an_executor_the_cluster_cannot_place_is_refused_naming_the_keys(
    local_ray: None, config: TrainConfig, in_process: Any
) -> None:
    greedy = config.model_copy(update={"executor": config.executor.model_copy(update={"rollout_workers": 8})})
    with pytest.raises(ValueError, match=r"need 4.5 CPU .* lower executor.rollout_workers"):
        RayExecutor(greedy, in_process[1])


def test_a_rollout_worker_refuses_weights_older_than_the_bound(config: TrainConfig, in_process: Any) -> None:
    run, sampler = in_process
    worker = RolloutWorker(config)
    prompts, params = sampler.generation_inputs(0, run.tasks.tasks_for_step(0, 1), 0)
    with pytest.raises(StaleWeights, match="version -1 < 0"):
        worker.generate(prompts, params, 0)
    worker.load_weights(5, run.model.state_dict())
    _, used = worker.generate(prompts, params, 4)
    assert used == 5


def test_bench_executor_finds_the_synchronous_ray_run_equal_step_for_step(
    local_ray: None, tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    from execrl.cli import main

    out = tmp_path / "bench.json"
    overrides = [o for o in toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path) if "output_dir" not in o]
    assert main(["bench", "executor", "--steps", "2", "--json", str(out), *overrides, *HALF_CPU]) == 0
    summary = json.loads(out.read_text())
    assert summary["metrics_equal"] is True and summary["differences"] == []
    assert "reward/mean" in summary["compared_metrics"] and "loss/policy" in summary["compared_metrics"]
    assert summary["ray_step_s"] > 0 and summary["inprocess_step_s"] > 0
    assert summary["ray_weight_staleness_max"] == 0.0 and summary["ray_retries"] == 0.0


def test_a_local_ray_listens_on_loopback_only(local_ray: None) -> None:
    """Regression (issue 24, class 7): the local Ray that ``ensure_ray`` starts (GCS, raylet, workers)
    listened on every interface, so anyone on the network could submit tasks to this machine."""
    import psutil

    @ray.remote
    def ping() -> int:
        return 1

    assert ray.get(ping.remote()) == 1  # a worker is up, so its port is listening too
    children = psutil.Process().children(recursive=True)
    listening = []
    for process in children:
        try:
            connections = process.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        listening += [(process.name(), c.laddr.ip) for c in connections if c.status == psutil.CONN_LISTEN]
    assert any(name.startswith("gcs_server") for name, _ in listening), listening
    loopback = ("127.0.0.1", "::1", "::ffff:127.0.0.1")
    assert all(ip in loopback for _, ip in listening), listening
