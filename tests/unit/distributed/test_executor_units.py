"""The executors' pure parts: retry delays, fault counters, the retry-rate alarm, the in-process executor,
and that ``ray`` stays inside ``execrl.distributed`` (imported only when the Ray executor is chosen)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from execrl.distributed import FaultCounters, InProcessExecutor, RetryPolicy, TaskFailed
from execrl.telemetry import AlarmEngine, default_alarm_rules

SRC = Path(__file__).resolve().parents[3] / "src" / "execrl"


def test_backoff_doubles_from_backoff_s_and_is_capped() -> None:
    policy = RetryPolicy(max_attempts=7, backoff_s=0.2, backoff_max_s=5.0)
    assert [policy.delay(a) for a in range(1, 7)] == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 5.0])


def test_a_policy_without_attempts_is_refused() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


def test_counters_drain_into_step_metrics_and_reset() -> None:
    counters = FaultCounters(tasks=10, retries=3, replaced_workers=2, failed_tasks=1)
    assert counters.drain() == {
        "executor/tasks": 10.0,
        "executor/retries": 3.0,
        "executor/retry_rate": 0.3,
        "executor/replaced_workers": 2.0,
        "executor/failed_tasks": 1.0,
        "executor/lost_episodes": 0.0,
    }
    assert counters.drain()["executor/retry_rate"] == 0.0  # no tasks: rate 0, not a division by zero


def test_task_failed_lists_the_last_reasons() -> None:
    error = TaskFailed("scoring of rows 0..7", ["A died", "B died", "C: boom", "D: boom"])
    assert str(error) == "scoring of rows 0..7 failed after 4 attempts: B died; C: boom; D: boom"


def test_the_default_alarm_fires_when_the_retry_rate_passes_a_tenth() -> None:
    engine = AlarmEngine(default_alarm_rules())
    assert [e.rule for e in engine.observe(0, {"executor/retry_rate": 0.05}).fired] == []
    assert [e.rule for e in engine.observe(1, {"executor/retry_rate": 0.25}).fired] == ["executor_retries"]


def test_in_process_executor_samples_through_the_recipes_sampler_and_reports_nothing() -> None:
    sampler = object()
    executor = InProcessExecutor(sampler)  # type: ignore[arg-type]
    assert executor.sampler is sampler
    executor.publish_weights(None, version=4)  # type: ignore[arg-type]
    assert executor.version == 4
    assert executor.step_metrics(3) == {}  # an in-process run's metrics stay exactly as they were


def test_in_process_behaviour_sampler_is_the_sampler_on_the_behaviour_engine() -> None:
    from execrl.components.sampling import StepSampler
    from execrl.episodes import LocalBackend, SingleTurn
    from execrl.rollout.types import SamplingParams

    environment = SingleTurn(None, None)  # type: ignore[arg-type]
    backend = LocalBackend("engine", "tokenizer")  # type: ignore[arg-type]
    sampler = StepSampler(environment, backend, SamplingParams(), seed=1)
    behaviour = InProcessExecutor(sampler).behaviour_sampler(engine="behaviour engine", version=3)  # type: ignore[arg-type]
    assert type(behaviour) is StepSampler and behaviour.seed == 1 and behaviour.environment is environment
    assert behaviour.backend.engine == "behaviour engine" and behaviour.backend.tokenizer == "tokenizer"  # type: ignore[attr-defined]


def test_only_the_distributed_package_imports_ray() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "ray" or n.startswith("ray.") for n in names) and "distributed" not in path.parts:
                offenders.append(str(path.relative_to(SRC)))
    assert offenders == []


def test_the_default_executor_does_not_import_ray() -> None:
    code = (
        "import sys; from execrl.config import load_config; from execrl.distributed import build_executor;"
        "build_executor(load_config(None, []), lambda *a: None); print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_compare_metrics_checks_rewards_and_losses_step_for_step() -> None:
    from execrl.bench.executor import compare_metrics

    a = [{"step": 0, "reward/mean": 0.5, "loss/policy": float("nan"), "perf/step_s": 1.0}]
    same = [{"step": 0, "reward/mean": 0.5 * (1 + 1e-7), "loss/policy": float("nan"), "perf/step_s": 9.0}]
    assert compare_metrics(a, same) == []  # within rtol 1e-5; timings are not compared
    off = [{"step": 0, "reward/mean": 0.51, "loss/policy": float("nan")}]
    assert compare_metrics(a, off) == ["step 0 reward/mean: 0.5 vs 0.51"]
    assert compare_metrics(a, []) == ["steps differ: [0] vs []"]
    missing = [{"step": 0, "reward/mean": 0.5}]
    assert compare_metrics(a, missing) == ["step 0 loss/policy: nan vs None"]


def test_ray_async_needs_a_staleness_bound_covering_the_pipeline() -> None:
    """Guards against the Ray executor refusing (or silently exceeding) the one-step-off loop's staleness."""
    from execrl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="set executor.max_weight_staleness=1"):
        load_config(None, ["executor.kind=ray", "algorithm.async_steps=1"])
    config = load_config(
        None, ["executor.kind=ray", "algorithm.async_steps=1", "executor.max_weight_staleness=1"]
    )
    assert config.algorithm.async_steps == 1
    assert load_config(None, ["executor.kind=ray", "rollout.stream_scoring=true"]).rollout.stream_scoring


def test_ray_takes_every_environment() -> None:
    """The Ray executor runs the multi-turn environments too (issue 36): no refusal left for them."""
    from execrl.config import load_config

    assert load_config(None, ["executor.kind=ray", "refine.max_turns=2"]).refine.max_turns == 2
    assert load_config(None, ["executor.kind=ray", "tools.enabled=true"]).tools.enabled


def test_train_flags_set_the_executor_keys() -> None:
    argv = ["train", "--print-config", "--executor", "ray", "--ray-address", "10.0.0.1:6379"]
    out = subprocess.run(
        [sys.executable, "-m", "execrl.cli", *argv], capture_output=True, text=True, check=True
    )
    assert 'kind = "ray"' in out.stdout and 'ray_address = "10.0.0.1:6379"' in out.stdout


def test_in_process_executor_syncs_an_engine_with_weights_of_its_own() -> None:
    """rollout.engine=vllm: ``publish_weights`` pushes into the engine, and the step's metrics carry the
    sync's ``sync/*`` once (the next step starts empty)."""
    from execrl.components.sampling import StepSampler
    from execrl.episodes import LocalBackend
    from execrl.rollout.types import SamplingParams

    class Report:
        def metrics(self) -> dict[str, float]:
            return {"sync/s": 0.25, "sync/verify_s": 0.125}

    class Engine:
        synced: list[int] = []

        def sync_weights(self, model: object, version: int) -> Report:
            self.synced.append(version)
            return Report()

    engine = Engine()
    backend = LocalBackend(engine, None)  # type: ignore[arg-type]
    sampler = StepSampler(None, backend, SamplingParams(), seed=1)  # type: ignore[arg-type]
    executor = InProcessExecutor(sampler)
    executor.publish_weights(None, version=5)  # type: ignore[arg-type]
    assert engine.synced == [5]
    assert executor.step_metrics(4) == {"sync/s": 0.25, "sync/verify_s": 0.125}
    assert executor.step_metrics(5) == {}
    one_step_off = InProcessExecutor(sampler, syncs_engine=False)  # its rollout thread holds the engine
    one_step_off.publish_weights(None, version=6)  # type: ignore[arg-type]
    assert engine.synced == [5] and one_step_off.step_metrics(5) == {}
