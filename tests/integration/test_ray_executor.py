"""The Ray executor on a local Ray instance (``num_cpus=2``) with the tiny model and the toy domain.

Each test checks one property: a rollout call equals the in-process call; killed workers (``ray.kill``
and SIGKILL of the process) are replaced and their task retried with nothing lost or counted twice (a
one-turn environment restored on the replacement); a judgement failing every attempt becomes invalid
verdicts with its reason; a worker refuses weights older than the staleness bound; and ``execrl bench
executor`` finds the synchronous Ray run equal step for step (the multi-turn environments:
``test_ray_episodes.py``).
"""

from __future__ import annotations

import dataclasses
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
from execrl.distributed.ray_workers import RolloutWorker, SandboxWorker, StaleWeights
from execrl.episodes import RolloutResult

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
    """The driver side: the run (model, tasks) and the in-process ``StepSampler`` (the reference)."""
    from execrl.components import setup
    from execrl.components.run import build_run

    run = build_run(config, None)
    with setup.build_sandbox(config) as sandbox:
        environment = setup.build_environment(config, sandbox)
        yield run, setup.step_sampler(config, environment, run.engine, run.tokenizer, None)


@pytest.fixture(scope="module")
def executor(local_ray: None, config: TrainConfig, in_process: Any) -> Iterator[RayExecutor]:
    """One executor (its actors start once) shared by the tests that drive it."""
    run, sampler = in_process
    executor = RayExecutor(config, sampler)
    executor.publish_weights(run.model, version=0)
    yield executor
    executor.close()


def _same(a: RolloutResult, b: RolloutResult) -> None:
    """The same episodes: the same sampled tokens and behaviour log-probs, the same verdicts."""
    assert [e.token_ids for e in a.episodes] == [e.token_ids for e in b.episodes]
    assert [e.sampling_logprobs for e in a.episodes] == [e.sampling_logprobs for e in b.episodes]
    assert [e.verdict.reward for e in a.episodes] == [e.verdict.reward for e in b.episodes]
    assert [e.verdict.reason for e in a.episodes] == [e.verdict.reason for e in b.episodes]


def test_killed_workers_are_replaced_and_their_task_retried(executor: RayExecutor, in_process: Any) -> None:
    run, sampler = in_process
    tasks = run.tasks.tasks_for_step(0, 4)
    _same(executor.sampler(0, tasks, 0), sampler(0, tasks, 0))
    assert executor.step_metrics(0)["executor/retries"] == 0.0
    ray.kill(executor.rollout.actors[0])  # the rollout replica dies
    os.kill(ray.get(executor.sandbox.actors[0].pid.remote()), signal.SIGKILL)  # so does the sandbox's
    executor.publish_weights(run.model, version=1)  # the same weights, as the version step 1 starts from
    result = executor.sampler(1, tasks, 0)
    _same(result, sampler(1, tasks, 0))  # nothing lost, nothing judged twice, same samples
    assert len(result.episodes) == 32 and all(e.valid for e in result.episodes)
    metrics = executor.step_metrics(1)
    # start, one engine call, respond, close, judge, report; the first two retried on replacements
    assert metrics["executor/tasks"] == 6.0
    assert metrics["executor/retries"] == 2.0 and metrics["executor/replaced_workers"] == 2.0
    assert metrics["executor/failed_tasks"] == 0.0 and metrics["executor/lost_episodes"] == 0.0
    assert metrics["executor/weight_version_used_min"] == 1.0  # the new replica got version 1 first
    assert metrics["executor/weight_staleness_max"] == 0.0


def test_a_one_turn_partition_is_restored_when_its_worker_dies_after_answering(
    executor: RayExecutor, in_process: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox worker dies after the turns were answered, before the judge: a one-turn environment is
    started again on the replacement and its answered turns replayed, so every episode is judged."""
    from execrl.distributed.ray_environment import RemoteEnvironment, RemoteLive
    from execrl.episodes import LocalBackend, run_episodes

    run, sampler = in_process
    real_close = RemoteLive.close

    def close_after_a_kill(live: RemoteLive) -> None:
        os.kill(ray.get(executor.sandbox.actors[0].pid.remote()), signal.SIGKILL)
        real_close(live)

    monkeypatch.setattr(RemoteLive, "close", close_after_a_kill)
    counters = FaultCounters()
    tasks = run.tasks.tasks_for_step(2, 2)
    remote = RemoteEnvironment(sampler.environment, executor.sandbox, counters)
    result = run_episodes(
        remote, LocalBackend(run.engine, run.tokenizer), tasks, params=sampler.step_params(2, 0)
    )
    _same(result, sampler(2, tasks, 0))
    assert (counters.replaced_workers, counters.retries, counters.lost_episodes) == (1, 1, 0)


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


class JudgeFails(SandboxWorker):
    def judge(self, rollout: str, finals: Any) -> Any:
        raise RuntimeError("sandbox host lost its cgroups")


def test_a_judgement_failing_every_attempt_becomes_invalid_verdicts_with_the_reason(
    local_ray: None, config: TrainConfig, in_process: Any
) -> None:
    from execrl.distributed.ray_environment import RemoteEnvironment
    from execrl.episodes import LocalBackend, run_episodes

    run, sampler = in_process
    failing = ray.remote(JudgeFails).options(num_cpus=0)
    group = ActorGroup("sandbox", lambda: failing.remote(config, run.tokenizer), 1, policy=RetryPolicy(2, 0.0),
                       timeout_s=60)  # fmt: skip
    counters = FaultCounters()
    try:
        remote = RemoteEnvironment(sampler.environment, group, counters)
        tasks = run.tasks.tasks_for_step(0, 1)
        params = dataclasses.replace(sampler.params, samples_per_prompt=3)
        result = run_episodes(remote, LocalBackend(run.engine, run.tokenizer), tasks, params=params)
    finally:
        group.close()
    verdicts = [e.verdict for e in result.episodes]
    assert [v.valid for v in verdicts] == [False, False, False]
    assert {v.reason for v in verdicts} == {"executor_error"}
    assert verdicts[0].score is not None
    assert "judge of tasks 0..0 failed after 2 attempts" in verdicts[0].score.reason
    assert "RuntimeError: sandbox host lost its cgroups" in verdicts[0].score.reason
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
    prompts, params = [run.tokenizer("def f():")["input_ids"]], sampler.step_params(0, 0)
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
